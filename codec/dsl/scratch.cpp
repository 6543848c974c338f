#include "codec/dsl/scratch.h"

#include <algorithm>
#include <bit>
#include <memory>
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

// A fresh buffer of at least this many bytes gets the next power of two:
// values grow from tensor to tensor (a file's chunks are not all full), and
// a buffer with room to spare serves the larger ones later instead of a new
// one paged in again. Untouched pages of the spare room cost nothing.
constexpr size_t round_from = size_t{64} << 10;

size_t fresh_capacity(size_t size) {
  return size >= round_from && size <= max_cached_bytes ? std::bit_ceil(size)
                                                        : size;
}

// The uninitialized buffers of decoders, kept apart from the `bytes`.
struct buffer_cache {
  buffer_cache() { free.reserve(max_buffers); }
  std::vector<buffer> free;
  size_t bytes_held = 0;
};

}  // namespace

struct pool::caches {
  cache values;
  buffer_cache buffers;
};

pool::pool() : caches_(std::make_unique<caches>()) {}
pool::~pool() = default;

namespace {

// The pool a pool_scope lent this thread, else null.
pool*& lent() {
  // NOLINTNEXTLINE(cppcoreguidelines-avoid-non-const-global-variables)
  thread_local pool* p = nullptr;  // per thread: what a scope set
  return p;
}

}  // namespace

pool::caches& pool::current() {
  thread_local caches own;  // the thread's own pool
  pool* const p = lent();
  return p != nullptr ? *p->caches_ : own;
}

pool_scope::pool_scope(pool& p) noexcept : previous_(lent()) { lent() = &p; }

pool_scope::~pool_scope() { lent() = previous_; }

namespace {

cache& local() { return pool::current().values; }

buffer_cache& local_buffers() { return pool::current().buffers; }

}  // namespace

buffer take_buffer(size_t size) {
  buffer_cache& c = local_buffers();
  auto best = c.free.end();
  for (auto it = c.free.begin(); it != c.free.end(); ++it) {
    if (it->capacity >= size &&
        (best == c.free.end() || it->capacity < best->capacity)) {
      best = it;
    }
  }
  if (best != c.free.end()) {
    std::swap(*best, c.free.back());
    buffer b = std::move(c.free.back());
    c.free.pop_back();
    c.bytes_held -= b.capacity;
    return b;
  }
  size_t const cap = std::max<size_t>(fresh_capacity(size), 1);
  return {std::make_unique_for_overwrite<uint8_t[]>(cap), cap};
}

void give(buffer&& b) noexcept {
  buffer_cache& c = local_buffers();
  size_t const cap = b.capacity;
  if (!b.data || cap > max_cached_bytes) return;  // freed by its owner
  while (c.free.size() >= max_buffers ||
         c.bytes_held + cap > max_cached_bytes) {
    auto smallest = std::min_element(c.free.begin(), c.free.end(),
                                     [](buffer const& x, buffer const& y) {
                                       return x.capacity < y.capacity;
                                     });
    if (smallest == c.free.end() || smallest->capacity >= cap) return;
    c.bytes_held -= smallest->capacity;
    std::swap(*smallest, c.free.back());
    c.free.pop_back();  // frees it
  }
  c.free.push_back(std::move(b));  // within the reserved capacity
  c.bytes_held += cap;
}

bytes take(size_t size) {
  if (size == 0) return {};  // keeps the cached buffers for real work
  cache& c = local();
  // Best fit: of the buffers that hold `size` bytes without reallocating,
  // the one growing past its old size fills the fewest bytes (std::vector
  // zero-fills them), then the smallest. (Payloads come back shorter than
  // the chunks; taking the smallest of those regardless of its length
  // zero-filled more bytes than blazepose-heavy.bf16 has.)
  auto best = c.free.end();
  auto fits = [size](bytes const& b) {
    return std::pair{size - std::min(b.size(), size), b.capacity()};
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
  if (b.capacity() < size) {
    b = bytes();
    b.reserve(fresh_capacity(size));
  }
  // Shrinking keeps the old bytes; only growth past the old size zero-fills.
  b.resize(size);
  return b;
}

bytes take_empty(size_t capacity) {
  bytes b;
  if (capacity == 0) return b;
  cache& c = local();
  // Of the buffers that hold `capacity` bytes, the shortest (its contents
  // are dropped without being touched: the longer ones serve take() with
  // no fill), then the smallest.
  auto best = c.free.end();
  auto fits = [](bytes const& b) { return std::pair{b.size(), b.capacity()}; };
  for (auto it = c.free.begin(); it != c.free.end(); ++it) {
    if (it->capacity() >= capacity &&
        (best == c.free.end() || fits(*it) < fits(*best))) {
      best = it;
    }
  }
  if (best != c.free.end()) {
    std::swap(*best, c.free.back());
    b = std::move(c.free.back());
    c.free.pop_back();
    c.bytes_held -= b.capacity();
    b.clear();
    return b;
  }
  b.reserve(fresh_capacity(capacity));
  return b;
}

void give(bytes&& b) noexcept {
  cache& c = local();
  size_t const cap = b.capacity();
  if (cap == 0 || cap > max_cached_bytes) return;  // b is freed by its owner
  // When full, the smallest buffers make room for a larger one: a file of
  // many small tensors would otherwise fill the cache with small buffers,
  // and every chunk-sized one would be fresh (and paged in) again.
  while (c.free.size() >= max_buffers ||
         c.bytes_held + cap > max_cached_bytes) {
    auto smallest = std::min_element(c.free.begin(), c.free.end(),
                                     [](bytes const& x, bytes const& y) {
                                       return x.capacity() < y.capacity();
                                     });
    if (smallest == c.free.end() || smallest->capacity() >= cap) return;
    c.bytes_held -= smallest->capacity();
    std::swap(*smallest, c.free.back());
    c.free.pop_back();  // frees it
  }
  c.free.push_back(std::move(b));  // within the reserved capacity
  c.bytes_held += cap;
}

}  // namespace brevis::codec::scratch
