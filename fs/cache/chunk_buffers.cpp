#include "fs/cache/chunk_buffers.h"

namespace brevis::fs {

std::shared_ptr<chunk_buffers> chunk_buffers::make(size_t max_idle_bytes) {
  return std::shared_ptr<chunk_buffers>(new chunk_buffers(max_idle_bytes));
}

std::shared_ptr<codec::bytes> chunk_buffers::take(size_t size) {
  std::unique_ptr<codec::bytes> b;
  {
    std::lock_guard lk(mu_);
    // The most recently returned one that fits: its pages are the warmest.
    // Not a much larger one: the cache counts a chunk's size, so a small
    // chunk in a large buffer would hold memory its budget does not see.
    for (size_t i = idle_.size(); i-- > 0;) {
      size_t const cap = idle_[i]->capacity();
      if (cap < size || cap - size > size / 8) continue;
      b = std::move(idle_[i]);
      idle_.erase(idle_.begin() + static_cast<ptrdiff_t>(i));
      idle_bytes_ -= b->capacity();
      ++reused_;
      break;
    }
  }
  // Chunks of a file mostly share one size, so this seldom fills anything.
  if (b) {
    b->resize(size);
  } else {
    b = std::make_unique<codec::bytes>(size);
  }
  std::weak_ptr<chunk_buffers> home = weak_from_this();
  return std::shared_ptr<codec::bytes>(b.release(), [home](codec::bytes* p) {
    if (auto pool = home.lock()) {
      pool->give(p);
    } else {
      delete p;
    }
  });
}

void chunk_buffers::give(codec::bytes* b) {
  std::unique_ptr<codec::bytes> owned(b);
  std::lock_guard lk(mu_);
  if (idle_bytes_ + owned->capacity() > max_idle_) return;
  idle_bytes_ += owned->capacity();
  idle_.push_back(std::move(owned));
}

size_t chunk_buffers::idle_bytes() const {
  std::lock_guard lk(mu_);
  return idle_bytes_;
}

size_t chunk_buffers::reused() const {
  std::lock_guard lk(mu_);
  return reused_;
}

}  // namespace brevis::fs
