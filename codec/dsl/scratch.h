#pragma once
// Per-thread reuse of the buffers that carry values between the nodes of a
// program. Encoding or decoding a chunk makes a few buffers as large as the
// chunk; fresh ones each time cost page faults and zero-filling (the
// allocator returns freed megabytes to the kernel), which measured slower
// than the operators themselves. Buffers taken here come back through give()
// and serve the next chunk of the same thread.

#include <cstddef>
#include <memory>

#include "codec/core/bytes.h"

namespace brevis::codec::scratch {

/// A buffer of exactly `size` bytes, reused when this thread has one large
/// enough. Its contents are unspecified: the caller writes every byte.
bytes take(size_t size);

/// An empty buffer with room for at least `capacity` bytes (appending that
/// many reallocates nothing), reused when this thread has one; nothing is
/// zero-filled.
bytes take_empty(size_t capacity);

/// Hands a buffer back to this thread's cache (which keeps a bounded number
/// of bytes, preferring the largest buffers, and frees the rest).
void give(bytes&& b) noexcept;

/// Uninitialized memory for a decoder's intermediate value: unlike a
/// `bytes`, growing into a reused one fills nothing (the zero-fill of
/// regrown `bytes` measured 2-5% of decoding).
struct buffer {
  std::unique_ptr<uint8_t[]> data;
  size_t capacity = 0;
};

/// A buffer of at least `size` bytes, reused when this thread has one; its
/// contents are unspecified.
buffer take_buffer(size_t size);

/// Hands a buffer back to this thread's cache of buffers (bounded like the
/// cache of `bytes`).
void give(buffer&& b) noexcept;

}  // namespace brevis::codec::scratch
