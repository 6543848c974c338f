#pragma once
// A per-thread output area for coders that write into a buffer of a bound
// size (zstd, htscodecs) before the result is appended to a payload. Resizing
// the payload to the bound each time zero-fills the whole bound, and a fresh
// buffer each time costs a page fault every 4 KiB; this one is reused and
// only written when it grows.

#include <cstddef>
#include <cstdint>

#include "codec/core/bytes.h"

namespace brevis::codec {

class staging_buffer {
 public:
  /// At least `size` bytes of unspecified contents: this thread's buffer
  /// unless another staging_buffer holds it (or it would grow past a few
  /// chunks), else one of its own.
  explicit staging_buffer(size_t size);
  ~staging_buffer();
  staging_buffer(staging_buffer const&) = delete;
  staging_buffer& operator=(staging_buffer const&) = delete;

  uint8_t* data() { return buf_->data(); }

 private:
  bytes* buf_;
  bytes own_;
  bool shared_ = false;
};

}  // namespace brevis::codec
