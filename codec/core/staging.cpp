#include "codec/core/staging.h"

namespace brevis::codec {
namespace {

// Past this the thread would keep a large buffer for a rare large chunk.
constexpr size_t max_shared = size_t{16} << 20;

struct thread_stage {
  bytes buf;
  bool busy = false;
};

thread_stage& local() {
  thread_local thread_stage s;
  return s;
}

}  // namespace

staging_buffer::staging_buffer(size_t size) : buf_(&own_) {
  thread_stage& s = local();
  if (!s.busy && size <= max_shared) {
    s.busy = true;
    shared_ = true;
    buf_ = &s.buf;
  }
  // Never shrinks, so a reused buffer is written only when it grows.
  if (buf_->size() < size) buf_->resize(size);
}

staging_buffer::~staging_buffer() {
  if (shared_) local().busy = false;
}

}  // namespace brevis::codec
