#include "codec/dsl/scratch.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace brevis::codec::scratch {
namespace {

// Enough for every value of a few chunks of the default 1 MiB in flight on
// one thread; larger chunks still work, they just allocate.
constexpr size_t max_buffers = 32;
constexpr size_t max_cached_bytes = size_t{64} << 20;

struct cache {
  cache() { free.reserve(max_buffers); }  // give() then never reallocates
  std::vector<bytes> free;
  size_t bytes_held = 0;
};

cache& local() {
  thread_local cache c;
  return c;
}

}  // namespace

bytes take(size_t size) {
  if (size == 0) return {};  // keeps the cached buffers for real work
  cache& c = local();
  // Best fit: the smallest buffer already at least `size` long (no fill),
  // else the smallest one that can grow to it without reallocating.
  auto best = c.free.end();
  auto fits = [size](bytes const& b) {
    return std::pair{b.size() < size, b.capacity()};
  };
  for (auto it = c.free.begin(); it != c.free.end(); ++it) {
    if (it->capacity() >= size &&
        (best == c.free.end() || fits(*it) < fits(*best))) {
      best = it;
    }
  }
  bytes b;
  if (best != c.free.end()) {
    std::swap(*best, c.free.back());
    b = std::move(c.free.back());
    c.free.pop_back();
    c.bytes_held -= b.capacity();
  }
  // Shrinking keeps the old bytes; only growth past the old size zero-fills.
  b.resize(size);
  return b;
}

void give(bytes&& b) noexcept {
  cache& c = local();
  size_t const cap = b.capacity();
  if (cap == 0 || c.free.size() >= max_buffers ||
      c.bytes_held + cap > max_cached_bytes) {
    return;  // b is freed by its owner
  }
  c.free.push_back(std::move(b));  // within the reserved capacity
  c.bytes_held += cap;
}

}  // namespace brevis::codec::scratch
