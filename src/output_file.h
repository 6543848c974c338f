#pragma once
// An output written atomically: bytes go to a temporary file in the target's
// directory (`.NAME.brevis-tmp-XXXXXX`), which is renamed over the final name
// only by commit(). If the object dies uncommitted, or a signal ends the
// process (fatal_signals.h), the temporary is removed, so a failure never
// leaves a partial file under the final name. "-" writes to stdout instead.
// Errors: throws codec::error(errc::io) naming the file and the system error;
// refuses to replace an existing file unless `force`.
// @note No fsync before the rename unless asked (sync_on_commit, for --rm):
// like zstd and xz the CLI otherwise leaves durability to the filesystem; a
// crash may lose a just-written file but never exposes a partial one under
// its final name on rename-atomic filesystems.

#include <sys/stat.h>

#include <cstdint>
#include <string>
#include <vector>

#include "codec/core/bytes.h"

namespace brevis::cli {

class output_file {
 public:
  /// Opens `path` for writing (checks up front that it does not exist
  /// unless `force`). `like`, when given, supplies the owner, group, mode
  /// and times the committed file gets (the input's, as zstd does; the
  /// owner and group where allowed, and the setuid and setgid bits and the
  /// group's permissions only where those were kept).
  output_file(std::string path, bool force, struct stat const* like);
  ~output_file();
  output_file(output_file const&) = delete;
  output_file& operator=(output_file const&) = delete;

  /// Announces the output's final size (when known, before writing): the
  /// filesystem allocates its blocks at once rather than write by write
  /// (27 MB in 1 MiB writes to ext4: 3.3 -> 2.7 ms CPU). Best effort: a
  /// file system that cannot changes nothing; stdout and devices are left
  /// alone. Never changes the file's size.
  void reserve(uint64_t size) noexcept;
  /// Appends `data`. Pieces under gather_limit are gathered and written
  /// together (by a later write or commit), larger ones at once.
  void write(codec::byte_view data);
  /// Makes commit() durable: the file is synced before the rename and its
  /// directory after, so that the input can be deleted (--rm).
  void sync_on_commit() { sync_ = true; }
  /// Writes what was gathered, closes and renames into place; the file
  /// exists only after this.
  void commit();
  /// Whether the output is a file of its own (a committed temporary), not
  /// stdout, a device or a FIFO: only then may --rm delete the input.
  bool is_new_file() const { return !tmp_.empty(); }
  uint64_t written() const { return written_; }
  std::string const& path() const { return path_; }
  bool is_stdout() const { return fd_ == 1 && tmp_.empty() && !in_place_; }

 private:
  void discard() noexcept;
  /// fsync of the directory holding the committed file (its new name).
  void sync_directory() const;
  void flush();
  void write_now(codec::byte_view data);

  // A checkpoint of many small tensors decoded to ~160 writes of 2-36
  // bytes each (gender-ssrnet-imdb.fp16, 97 KB), ~1 us of CPU apiece here.
  static constexpr size_t gather_limit = size_t{128} << 10;

  std::string path_;
  std::string tmp_;
  bool force_ = false;
  bool has_like_ = false;
  struct stat like_ {};
  int fd_ = -1;
  bool committed_ = false;
  bool in_place_ = false;  // an existing device or FIFO, written directly
  bool sync_ = false;
  uint64_t written_ = 0;
  std::vector<uint8_t> gathered_;  // written, not yet handed to the kernel
};

/// True if `a` and `b` name the same existing file.
bool same_file(std::string const& a, std::string const& b);

/// Whether `path` names stdout itself: "-", /dev/stdout, /dev/fd/1 or
/// /proc/self/fd/1 (written to descriptor 1, never replaced by a rename).
bool names_stdout(std::string const& path);

}  // namespace brevis::cli
