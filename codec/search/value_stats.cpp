#include "codec/search/value_stats.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "codec/choose/entropy_terms.h"
#include "codec/ops/op_util.h"

namespace brevis::codec::search {
namespace {

// The first i < n with a[i] != b[i] (elements of T), or n: memcmp a block
// at a time, then the block's elements.
template <typename T>
size_t first_mismatch(uint8_t const* a, uint8_t const* b, size_t n) {
  constexpr size_t block = 4096 / sizeof(T);
  size_t at = 0;
  while (at < n) {
    size_t const len = std::min(block, n - at);
    if (std::memcmp(a + at * sizeof(T), b + at * sizeof(T), len * sizeof(T)) !=
        0) {
      while (load_le<T>(a + at * sizeof(T)) == load_le<T>(b + at * sizeof(T)))
        ++at;
      return at;
    }
    at += len;
  }
  return n;
}

// The smallest period p (count / 2 at most, 2^16 at most) with v[i] ==
// v[i - p], or 0. Candidates match the first element; each is checked up to
// its first mismatch m (v[m] != v[m + p]), and none up to m can then be a
// period: for q in (p, m], v[m] = v[m - q] = v[m - q + p] = v[m + p] (period
// q twice, p below m once). Checking every candidate to its mismatch was
// quadratic: 12 s for 8 MiB of zeros with a few bytes of data past 4 MiB
// (2^16 candidates, each compared for 4 MiB). The skip bounds the checks
// in practice; a budget of compared elements bounds them always (past it:
// no period, which only costs the repeat operator's offer; it counts
// elements, not time, so the choice stays the same on every machine, but a
// change to it may change a tensor's program, and so its payload, which the
// store then no longer finds stored).
template <typename T>
uint64_t find_period(uint8_t const* d, size_t n) {
  if (n < 4) return 0;
  T const first = load_le<T>(d);
  // Periods past a chunk's elements gain nothing (repeat works per chunk):
  // the scan stops at 2^16.
  size_t const last = std::min<size_t>(n / 2, 65536);
  size_t budget = 4 * n + (size_t{1} << 20);
  size_t next = 1;  // candidates below this cannot be periods
  // Candidates are found 64 at a time by a loop that vectorizes.
  for (size_t at = 1; at <= last; at += 64) {
    size_t const count = std::min<size_t>(64, last + 1 - at);
    if (at + count <= next) continue;
    uint64_t hits = 0;
    for (size_t i = 0; i < count; ++i) {
      hits |= uint64_t{load_le<T>(d + (at + i) * sizeof(T)) == first} << i;
    }
    for (; hits != 0; hits &= hits - 1) {
      size_t const p = at + static_cast<size_t>(std::countr_zero(hits));
      if (p < next) continue;
      size_t const m = first_mismatch<T>(d, d + p * sizeof(T), n - p);
      if (m == n - p) return p;
      if (m + 1 > budget) return 0;
      budget -= m + 1;
      next = m + 1;
    }
  }
  return 0;
}

// Distinct elements, counting stops past 256.
template <typename T>
size_t distinct_up_to_257(uint8_t const* d, size_t n) {
  if constexpr (sizeof(T) <= 2) {
    // A bitmap over every value, cleared through the values set.
    thread_local std::vector<uint64_t> seen_words(65536 / 64, 0);
    uint64_t* const seen = seen_words.data();
    std::vector<T> set;
    set.reserve(257);
    for (size_t i = 0; i < n && set.size() <= 256; ++i) {
      T const x = load_le<T>(d + i * sizeof(T));
      uint64_t& word = seen[x >> 6];
      uint64_t const bit = uint64_t{1} << (x & 63);
      if (word & bit) continue;
      word |= bit;
      set.push_back(x);
    }
    for (T x : set) seen[x >> 6] = 0;
    return set.size();
  } else {
    // Open addressing in 1024 slots: at most 257 are used.
    T slots[1024];
    bool used[1024] = {};
    size_t count = 0;
    for (size_t i = 0; i < n && count <= 256; ++i) {
      T const x = load_le<T>(d + i * sizeof(T));
      size_t h = static_cast<size_t>(
          (static_cast<uint64_t>(x) * 0x9e3779b97f4a7c15) >> 54);
      while (used[h] && slots[h] != x) h = (h + 1) & 1023;
      if (used[h]) continue;
      used[h] = true;
      slots[h] = x;
      ++count;
    }
    return count;
  }
}

}  // namespace

void byte_histogram(byte_view d, std::array<uint32_t, 256>& out) {
  // Four tables: runs of one value do not wait on their own increments.
  uint32_t t[4][256] = {};
  size_t i = 0;
  for (; i + 4 <= d.size(); i += 4) {
    ++t[0][d[i]], ++t[1][d[i + 1]], ++t[2][d[i + 2]], ++t[3][d[i + 3]];
  }
  for (; i < d.size(); ++i) ++t[0][d[i]];
  for (size_t k = 0; k < 256; ++k)
    out[k] = t[0][k] + t[1][k] + t[2][k] + t[3][k];
}

value_stats measure(stream const& v, bool bytes) {
  value_stats s;
  unsigned const w = v.type.width;
  size_t const n = v.count();
  s.count = n;
  uint8_t const* d = v.data.data();
  if (bytes) {
    byte_histogram(byte_view(d, n * w), s.byte_counts);
    double terms = 0;
    for (uint32_t c : s.byte_counts) terms += c_log2_c(c);
    s.byte_entropy =
        n ? entropy_from_terms(n * w, terms) / static_cast<double>(n * w) : 0;
  }
  if (n == 0) return s;
  op_util::with_lane(w, [&]<typename T>() {
    // Separate loops without carried state, so that they vectorize; their
    // counts in lanes as wide as the elements, over blocks they cannot
    // overflow (counted in 64 bits, narrow lanes were widened twice or
    // three times: most of measure() on bytes).
    constexpr size_t block =
        sizeof(T) >= 4 ? size_t{1} << 30 : size_t{T(~T{0})};
    size_t zeros = 0, repeats = 0;
    T ored = 0;
    for (size_t at = 0; at < n; at += block) {
      size_t const end = std::min(n, at + block);
      T z = 0;
      for (size_t i = at; i < end; ++i) {
        T const x = load_le<T>(d + i * sizeof(T));
        z += x == 0;
        ored |= x;
      }
      zeros += z;
    }
    for (size_t at = 1; at < n; at += block) {
      size_t const end = std::min(n, at + block);
      T r = 0;
      for (size_t i = at; i < end; ++i) {
        r += load_le<T>(d + i * sizeof(T)) ==
             load_le<T>(d + (i - 1) * sizeof(T));
      }
      repeats += r;
    }
    s.zero_rate = static_cast<double>(zeros) / static_cast<double>(n);
    s.repeat_rate =
        n > 1 ? static_cast<double>(repeats) / static_cast<double>(n - 1) : 0;
    if constexpr (sizeof(T) == 1) {
      s.distinct = 0;  // unknown without the byte histogram (see above)
      for (uint32_t c : s.byte_counts) s.distinct += c > 0;
    } else {
      s.distinct = distinct_up_to_257<T>(d, n);
    }
    s.constant = s.distinct == 1;
    unsigned const bits_w = 8 * sizeof(T);
    if (ored == 0) {
      s.low_zero = s.high_zero = bits_w - 1;
    } else {
      s.low_zero = static_cast<unsigned>(std::countr_zero(ored));
      s.high_zero = static_cast<unsigned>(std::countl_zero(ored));
    }
  });
  return s;
}

double repeated_words(byte_view d) {
  // The first 4096 8-byte words at a stride of 8, in an open-addressing
  // table of about twice as many slots.
  size_t const n = std::min<size_t>(d.size() / 8, 4096);
  if (n < 16) return 0;
  unsigned const bits = static_cast<unsigned>(std::bit_width(2 * n - 1));
  size_t const mask = (size_t{1} << bits) - 1;
  // Reused between calls: a slot is used when stamped with this call's mark.
  thread_local std::vector<uint64_t> slots(8192);
  thread_local std::vector<uint32_t> stamps(8192, 0);
  thread_local uint32_t mark = 0;
  if (++mark == 0) std::fill(stamps.begin(), stamps.end(), 0), mark = 1;
  size_t repeats = 0;
  for (size_t i = 0; i < n; ++i) {
    uint64_t const w = load_le<uint64_t>(d.data() + 8 * i);
    for (size_t j = (w * 0x9e3779b97f4a7c15) >> (64 - bits);;
         j = (j + 1) & mask) {
      if (stamps[j] != mark) {
        stamps[j] = mark;
        slots[j] = w;
        break;
      }
      if (slots[j] == w) {
        ++repeats;
        break;
      }
    }
  }
  return static_cast<double>(repeats) / static_cast<double>(n);
}

void measure_whole(byte_view whole, unsigned width, value_stats& s,
                   bool period) {
  size_t const n = whole.size() / width;
  if (n == 0) return;
  uint8_t const* d = whole.data();
  op_util::with_lane(width, [&]<typename T>() {
    T ored = 0, differs = 0;
    T const first = load_le<T>(d);
    unsigned const bits_w = 8 * sizeof(T);
    T const ends = static_cast<T>(T{1} | static_cast<T>(T{1} << (bits_w - 1)));
    // In blocks (that vectorize), stopping once the answer is known: both
    // end bits set and two elements differ (weights with noisy low bits
    // settle within the first block).
    constexpr size_t block = 4096;
    for (size_t at = 0; at < n; at += block) {
      size_t const end = std::min(n, at + block);
      for (size_t i = at; i < end; ++i) {
        T const x = load_le<T>(d + i * sizeof(T));
        ored |= x;
        differs |= static_cast<T>(x ^ first);
      }
      if ((ored & ends) == ends && differs != 0) break;
    }
    s.constant = differs == 0;
    s.low_zero =
        ored ? static_cast<unsigned>(std::countr_zero(ored)) : bits_w - 1;
    s.high_zero =
        ored ? static_cast<unsigned>(std::countl_zero(ored)) : bits_w - 1;
    if (s.constant) s.distinct = 1;
    if (!s.constant && period) s.period = find_period<T>(d, n);
  });
}

// The buckets' edges sit away from where common fields scatter: siblings
// whose decisions land in other buckets are searched again instead of
// keeping their role's program. A sign field's zero rate is ~0.5 and a
// 7-bit mantissa's byte entropy ~7 bits: with edges there, 38 of
// handskeleton.fp32's 119 siblings were searched again, none now.
unsigned entropy_bucket(value_stats const& s) {
  double const e = s.byte_entropy;
  return e < 1 ? 0 : e < 4 ? 1 : e < 7.5 ? 2 : 3;
}

unsigned zero_bucket(value_stats const& s) {
  return s.zero_rate < 0.05 ? 0 : s.zero_rate < 0.75 ? 1 : 2;
}

}  // namespace brevis::codec::search
