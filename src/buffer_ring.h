#pragma once
// Output buffers that go round between a decoding and a writing stage: a
// fresh megabyte per chunk costs a page fault per 4 KiB, which measured
// more than the write itself.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

namespace brevis::cli {

class buffer_ring {
 public:
  explicit buffer_ring(size_t size) : size_(size) {}

  std::unique_ptr<uint8_t[]> take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) {
      // Uninitialized: the decoder writes every byte.
      return std::make_unique_for_overwrite<uint8_t[]>(size_);
    }
    std::unique_ptr<uint8_t[]> b = std::move(free_.back());
    free_.pop_back();
    return b;
  }

  void give(std::unique_ptr<uint8_t[]> b) {
    std::lock_guard lock(mutex_);
    free_.push_back(std::move(b));
  }

 private:
  size_t size_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<uint8_t[]>> free_;
};

}  // namespace brevis::cli
