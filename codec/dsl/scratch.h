#pragma once
// Per-thread reuse of the buffers that carry values between the nodes of a
// program. Encoding or decoding a chunk makes a few buffers as large as the
// chunk; fresh ones each time cost page faults and zero-filling (the
// allocator returns freed megabytes to the kernel), which measured slower
// than the operators themselves. Buffers taken here come back through give()
// and serve the next chunk of the same thread (or of whichever thread holds
// the pool a pool_scope lent).

#include <cstddef>
#include <memory>

#include "codec/core/bytes.h"

namespace brevis::codec::scratch {

/// A buffer of exactly `size` bytes, reused when this thread's pool has one
/// large enough. Its contents are unspecified: the caller writes every byte.
bytes take(size_t size);

/// An empty buffer with room for at least `capacity` bytes (appending that
/// many reallocates nothing), reused when this thread's pool has one; nothing
/// is zero-filled.
bytes take_empty(size_t capacity);

/// Hands a buffer back to this thread's pool (which keeps a bounded number
/// of bytes, preferring the largest buffers, and frees the rest).
void give(bytes&& b) noexcept;

/// Uninitialized memory for a decoder's intermediate value: unlike a
/// `bytes`, growing into a reused one fills nothing (the zero-fill of
/// regrown `bytes` measured 2-5% of decoding).
struct buffer {
  std::unique_ptr<uint8_t[]> data;
  size_t capacity = 0;
};

/// A buffer of at least `size` bytes, reused when this thread's pool has one;
/// its contents are unspecified.
buffer take_buffer(size_t size);

/// Hands a buffer back to this thread's pool of buffers (bounded like the
/// cache of `bytes`).
void give(buffer&& b) noexcept;

/// The cached buffers of one thread at a time ("this thread's pool" above):
/// each thread has its own, and a pool_scope lends it another for a while. A
/// process with more threads than concurrent decodes (the mount: a FUSE thread
/// decodes the chunk its read needs) keeps one pool per decode running at once
/// instead of one per thread that ever decoded, each grown to a chunk's
/// buffers.
class pool {
 public:
  pool();
  ~pool();
  pool(pool const&) = delete;
  pool& operator=(pool const&) = delete;
  pool(pool&&) = delete;
  pool& operator=(pool&&) = delete;

  struct caches;
  /// The calling thread's pool's caches (for scratch.cpp).
  static caches& current();

 private:
  std::unique_ptr<caches> caches_;
};

/// Makes take() and give() on this thread use `p` for the scope's
/// lifetime. `p` must not be used by another thread meanwhile. Buffers
/// taken in the scope and given back after it (or the reverse) simply
/// change caches.
class pool_scope {
 public:
  explicit pool_scope(pool& p) noexcept;
  ~pool_scope();
  pool_scope(pool_scope const&) = delete;
  pool_scope& operator=(pool_scope const&) = delete;
  pool_scope(pool_scope&&) = delete;
  pool_scope& operator=(pool_scope&&) = delete;

 private:
  pool* previous_;
};

}  // namespace brevis::codec::scratch
