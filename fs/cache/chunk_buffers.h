#pragma once
// Buffers for decoded chunks, reused. A fresh 1 MiB vector per chunk is
// zero-filled, page-faulted in and handed back to the kernel on free:
// ~13% of the daemon's CPU in a cold sequential read through the mount
// (perf). A buffer returns here when the cache and the last reader let go
// of it, and the next decode takes it. When more come back than the pool
// keeps, the ones idle longest go: the pool follows the sizes of the
// chunks being read now. Thread-safe; buffers outliving the pool are
// simply freed.

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

#include "fs/cache/chunk_bytes.h"

namespace brevis::fs {

class chunk_buffers : public std::enable_shared_from_this<chunk_buffers> {
 public:
  /// Keeps idle buffers up to `max_idle_bytes` of capacity in all.
  static std::shared_ptr<chunk_buffers> make(size_t max_idle_bytes);

  /// A buffer of `size` bytes, its contents unspecified, that comes back
  /// here when its last reference goes. Its capacity is at most twice
  /// `size` (chunk_cache counts capacities).
  std::shared_ptr<chunk_bytes> take(size_t size);

  /// The capacity of a fresh buffer for `size` bytes: `size` rounded up to
  /// a class a quarter octave wide (at most 25% more).
  static size_t capacity_class(size_t size);

  size_t idle_bytes() const;
  /// Buffers handed out that came from the idle list (tests).
  size_t reused() const;

 private:
  explicit chunk_buffers(size_t max_idle_bytes) : max_idle_(max_idle_bytes) {}
  void give(chunk_bytes* b);

  size_t const max_idle_;
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<chunk_bytes>> idle_;  // back: the latest
  size_t idle_bytes_ = 0;
  size_t reused_ = 0;
};

}  // namespace brevis::fs
