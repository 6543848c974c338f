#include "fs/cache/chunk_buffers.h"

#include <bit>
#include <vector>

namespace brevis::fs {

std::shared_ptr<chunk_buffers> chunk_buffers::make(size_t max_idle_bytes) {
  return std::shared_ptr<chunk_buffers>(new chunk_buffers(max_idle_bytes));
}

std::shared_ptr<chunk_bytes> chunk_buffers::take(size_t size) {
  std::unique_ptr<chunk_bytes> b;
  {
    std::lock_guard lk(mu_);
    // The smallest that fits (the most recently returned of those: its
    // pages are the warmest), up to twice the size: chunks are cut per
    // tensor and their sizes vary, so a tighter fit reused only ~40% of the
    // buffers of a cold read, and a fresh one costs a zero fill and page
    // faults (~5% of the read's CPU). The cache counts capacities.
    size_t best = idle_.size();
    for (size_t i = idle_.size(); i-- > 0;) {
      size_t const cap = idle_[i]->capacity();
      if (cap < size || cap / 2 > size) continue;
      if (best == idle_.size() || cap < idle_[best]->capacity()) best = i;
    }
    if (best != idle_.size()) {
      b = std::move(idle_[best]);
      idle_.erase(idle_.begin() + static_cast<ptrdiff_t>(best));
      idle_bytes_ -= b->capacity();
      ++reused_;
    }
  }
  if (!b) {
    // A power of two, so that chunks of sizes within an octave share
    // buffers (only the bytes written are ever touched).
    b = std::make_unique<chunk_bytes>(std::bit_ceil(size));
  }
  b->resize(size);
  std::weak_ptr<chunk_buffers> home = weak_from_this();
  return std::shared_ptr<chunk_bytes>(b.release(), [home](chunk_bytes* p) {
    if (auto pool = home.lock()) {
      pool->give(p);
    } else {
      delete p;
    }
  });
}

void chunk_buffers::give(chunk_bytes* b) {
  std::unique_ptr<chunk_bytes> owned(b);
  std::vector<std::unique_ptr<chunk_bytes>> dropped;  // freed unlocked
  std::lock_guard lk(mu_);
  if (owned->capacity() > max_idle_) return;
  idle_bytes_ += owned->capacity();
  idle_.push_back(std::move(owned));
  while (idle_bytes_ > max_idle_) {
    idle_bytes_ -= idle_.front()->capacity();
    dropped.push_back(std::move(idle_.front()));
    idle_.pop_front();
  }
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
