#pragma once
// FUSE's lookup counts: how many references the kernel holds on each inode
// the mount has named to it. Every entry reply (lookup, create, mkdir,
// link, readdirplus, ...) gives the kernel one more; its FORGET gives back
// as many as it says. The mount keeps what it knows of a removed inode
// (mount_fs::getattr) while the kernel holds it, and no longer: a FORGET
// that reaches the daemon late, after a newer lookup of the same inode,
// must not end what the newer reference still needs.

#include <array>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>

namespace brevis::fs {

class lookup_counts {
 public:
  /// The kernel was given `n` more references to `ino`.
  void add(uint64_t ino, uint64_t n = 1);
  /// The kernel gave back `n` references to `ino`; returns whether it holds
  /// none now. (More than it was given counts as all of them: the root, and
  /// inodes named before this count began, are not counted.)
  bool drop(uint64_t ino, uint64_t n);
  /// Whether the kernel holds a reference to `ino`.
  bool held(uint64_t ino) const;
  /// The inodes held (tests).
  size_t size() const;

 private:
  // Sharded by inode: lookups from all FUSE threads update it.
  static constexpr size_t shard_count = 16;
  struct shard {
    mutable std::mutex mu;
    std::unordered_map<uint64_t, uint64_t> count;
  };
  shard& shard_of(uint64_t ino) { return shards_[ino % shard_count]; }
  shard const& shard_of(uint64_t ino) const {
    return shards_[ino % shard_count];
  }
  std::array<shard, shard_count> shards_;
};

}  // namespace brevis::fs
