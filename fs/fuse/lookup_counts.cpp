#include "fs/fuse/lookup_counts.h"

namespace brevis::fs {

void lookup_counts::add(uint64_t ino, uint64_t n) {
  shard& s = shard_of(ino);
  std::lock_guard lk(s.mu);
  s.count[ino] += n;
}

bool lookup_counts::drop(uint64_t ino, uint64_t n) {
  shard& s = shard_of(ino);
  std::lock_guard lk(s.mu);
  auto const it = s.count.find(ino);
  if (it == s.count.end()) return true;
  if (it->second > n) {
    it->second -= n;
    return false;
  }
  s.count.erase(it);
  return true;
}

bool lookup_counts::held(uint64_t ino) const {
  shard const& s = shard_of(ino);
  std::lock_guard lk(s.mu);
  return s.count.contains(ino);
}

size_t lookup_counts::size() const {
  size_t n = 0;
  for (shard const& s : shards_) {
    std::lock_guard lk(s.mu);
    n += s.count.size();
  }
  return n;
}

}  // namespace brevis::fs
