#include "codec/ops/sparse_kernels.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstring>

#include "codec/core/bytes.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

namespace brevis::codec::sparse_kernels {
namespace {

std::atomic<unsigned> cap{1};

// Branch-free (the mask is unpredictable): every element loads the next
// value (the last one again once all are placed; k >= 1) and keeps it or
// zero by its mask bit. Starts at lane j with `next` values placed.
template <typename T>
void expand_portable(uint8_t const* mask, uint8_t const* values, size_t k,
                     size_t count, uint8_t* out, size_t j, size_t next) {
  size_t const last = k - 1;
  for (; j < count; ++j) {
    size_t const bit = (mask[j / 8] >> (j % 8)) & 1;
    T const v = load_le<T>(values + std::min(next, last) * sizeof(T));
    store_le<T>(out + j * sizeof(T), static_cast<T>(v & (T{0} - bit)));
    next += bit;
  }
}

// Branch-free (the mask is unpredictable; a branch per element cost more
// than the rest of the search on pruned checkpoints): each mask byte is
// built in a register, every element stored at the cursor, which advances
// only past nonzero ones (so one lane of room past the values). Starts at
// lane j (a multiple of 8) with `k` values written; returns the values.
template <typename T>
size_t compact_portable(uint8_t const* in, size_t count, uint8_t* mask,
                        uint8_t* values, size_t j, size_t k) {
  uint8_t* v = values + k * sizeof(T);
  for (; j < count; j += 8) {
    size_t const lanes = std::min<size_t>(8, count - j);
    unsigned bits = 0;
    for (size_t b = 0; b < lanes; ++b) {
      T const x = load_le<T>(in + (j + b) * sizeof(T));
      unsigned const nz = x != 0;
      bits |= nz << b;
      store_le<T>(v, x);
      v += nz * sizeof(T);
    }
    mask[j / 8] = static_cast<uint8_t>(bits);
  }
  return static_cast<size_t>(v - values) / sizeof(T);
}

#if defined(__x86_64__) && defined(__GNUC__)

// For each mask byte, the pshufb control that moves the next values'
// bytes into the set 16-bit lanes and zeroes (0x80) the clear ones.
struct u16_shuffles {
  alignas(16) std::array<std::array<uint8_t, 16>, 256> rows{};
};
constexpr u16_shuffles make_u16_shuffles() {
  u16_shuffles t;
  for (unsigned m = 0; m < 256; ++m) {
    unsigned src = 0;
    for (unsigned lane = 0; lane < 8; ++lane) {
      bool const set = (m >> lane) & 1;
      t.rows[m][2 * lane] = set ? static_cast<uint8_t>(2 * src) : 0x80;
      t.rows[m][2 * lane + 1] = set ? static_cast<uint8_t>(2 * src + 1) : 0x80;
      src += set;
    }
  }
  return t;
}
constexpr u16_shuffles u16_rows = make_u16_shuffles();

// For each mask byte, the pshufb control that packs its set 16-bit lanes
// (in order) into the low lanes; the rest are left as they come.
constexpr u16_shuffles make_u16_packs() {
  u16_shuffles t;
  for (unsigned m = 0; m < 256; ++m) {
    unsigned dst = 0;
    for (unsigned lane = 0; lane < 8; ++lane) {
      if (((m >> lane) & 1) == 0) continue;
      t.rows[m][2 * dst] = static_cast<uint8_t>(2 * lane);
      t.rows[m][2 * dst + 1] = static_cast<uint8_t>(2 * lane + 1);
      ++dst;
    }
    for (; dst < 8; ++dst) {
      t.rows[m][2 * dst] = t.rows[m][2 * dst + 1] = 0x80;
    }
  }
  return t;
}
constexpr u16_shuffles u16_packs = make_u16_packs();

// For each mask byte, the source lane of each packed 32-bit lane (3 bits a
// lane, lane 0 lowest): its set lanes in order, then 0.
constexpr std::array<uint32_t, 256> make_u32_packs() {
  std::array<uint32_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    unsigned dst = 0;
    for (unsigned lane = 0; lane < 8; ++lane) {
      if ((m >> lane) & 1) t[m] |= lane << (3 * dst++);
    }
  }
  return t;
}
constexpr std::array<uint32_t, 256> u32_packs = make_u32_packs();

// For each mask byte, the value each 32-bit lane takes (3 bits a lane,
// lane 0 lowest); clear lanes take 0 and are zeroed after the permute.
constexpr std::array<uint32_t, 256> make_u32_sources() {
  std::array<uint32_t, 256> t{};
  for (unsigned m = 0; m < 256; ++m) {
    unsigned src = 0;
    for (unsigned lane = 0; lane < 8; ++lane) {
      if ((m >> lane) & 1) t[m] |= src++ << (3 * lane);
    }
  }
  return t;
}
constexpr std::array<uint32_t, 256> u32_sources = make_u32_sources();

// Whole mask bytes while 8 values remain to load (the loads read 8 values
// past `next`, so the last few go to the portable loop). Returns the lane
// reached; `next` advances past the values placed.
[[gnu::target("ssse3,popcnt")]] size_t expand_u16_ssse3(uint8_t const* mask,
                                                        uint8_t const* values,
                                                        size_t k, size_t count,
                                                        uint8_t* out,
                                                        size_t& next) {
  size_t j = 0;
  for (; j + 8 <= count && next + 8 <= k; j += 8) {
    unsigned const m = mask[j / 8];
    __m128i const v =
        _mm_loadu_si128(reinterpret_cast<__m128i const*>(values + 2 * next));
    __m128i const s = _mm_load_si128(
        reinterpret_cast<__m128i const*>(u16_rows.rows[m].data()));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 2 * j),
                     _mm_shuffle_epi8(v, s));
    next += static_cast<size_t>(std::popcount(m));
  }
  return j;
}

[[gnu::target("avx2,popcnt")]] size_t expand_u32_avx2(uint8_t const* mask,
                                                      uint8_t const* values,
                                                      size_t k, size_t count,
                                                      uint8_t* out,
                                                      size_t& next) {
  __m256i const shifts = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
  __m256i const lane_bits = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  __m256i const seven = _mm256_set1_epi32(7);
  size_t j = 0;
  for (; j + 8 <= count && next + 8 <= k; j += 8) {
    unsigned const m = mask[j / 8];
    __m256i const v =
        _mm256_loadu_si256(reinterpret_cast<__m256i const*>(values + 4 * next));
    __m256i const from = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(u32_sources[m])),
                          shifts),
        seven);
    __m256i const keep = _mm256_cmpeq_epi32(
        _mm256_and_si256(_mm256_set1_epi32(static_cast<int>(m)), lane_bits),
        lane_bits);
    _mm256_storeu_si256(
        reinterpret_cast<__m256i*>(out + 4 * j),
        _mm256_and_si256(_mm256_permutevar8x32_epi32(v, from), keep));
    next += static_cast<size_t>(std::popcount(m));
  }
  return j;
}

// Whole groups of 8 lanes: a compare gives the mask byte, a shuffle packs
// the nonzero lanes, stored whole (8 lanes at the cursor, which advances
// past the nonzero ones). Returns the lane reached; `k` advances past the
// values written.
[[gnu::target("ssse3,popcnt")]] size_t compact_u16_ssse3(uint8_t const* in,
                                                         size_t count,
                                                         uint8_t* mask,
                                                         uint8_t* values,
                                                         size_t& k) {
  __m128i const zero = _mm_setzero_si128();
  size_t j = 0;
  for (; j + 8 <= count; j += 8) {
    __m128i const x =
        _mm_loadu_si128(reinterpret_cast<__m128i const*>(in + 2 * j));
    __m128i const is_zero = _mm_cmpeq_epi16(x, zero);
    // One byte a lane (0xff where zero), its top bits the lanes' flags.
    unsigned const m = ~static_cast<unsigned>(
                           _mm_movemask_epi8(_mm_packs_epi16(is_zero, zero))) &
                       0xffu;
    mask[j / 8] = static_cast<uint8_t>(m);
    __m128i const s = _mm_load_si128(
        reinterpret_cast<__m128i const*>(u16_packs.rows[m].data()));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(values + 2 * k),
                     _mm_shuffle_epi8(x, s));
    k += static_cast<size_t>(std::popcount(m));
  }
  return j;
}

[[gnu::target("avx2,popcnt")]] size_t compact_u32_avx2(uint8_t const* in,
                                                       size_t count,
                                                       uint8_t* mask,
                                                       uint8_t* values,
                                                       size_t& k) {
  __m256i const shifts = _mm256_setr_epi32(0, 3, 6, 9, 12, 15, 18, 21);
  __m256i const seven = _mm256_set1_epi32(7);
  __m256i const zero = _mm256_setzero_si256();
  size_t j = 0;
  for (; j + 8 <= count; j += 8) {
    __m256i const x =
        _mm256_loadu_si256(reinterpret_cast<__m256i const*>(in + 4 * j));
    unsigned const m = ~static_cast<unsigned>(_mm256_movemask_ps(
                           _mm256_castsi256_ps(_mm256_cmpeq_epi32(x, zero)))) &
                       0xffu;
    mask[j / 8] = static_cast<uint8_t>(m);
    __m256i const from = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(u32_packs[m])),
                          shifts),
        seven);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(values + 4 * k),
                        _mm256_permutevar8x32_epi32(x, from));
    k += static_cast<size_t>(std::popcount(m));
  }
  return j;
}

bool has_ssse3() {
  static bool const yes = __builtin_cpu_supports("ssse3");
  return yes;
}
bool has_avx2() {
  static bool const yes = __builtin_cpu_supports("avx2");
  return yes;
}

#endif

}  // namespace

void expand(unsigned width, uint8_t const* mask, uint8_t const* values,
            size_t k, size_t count, uint8_t* out) {
  if (k == 0) {
    if (count > 0) std::memset(out, 0, count * width);
    return;
  }
  size_t j = 0;
  size_t next = 0;
  [[maybe_unused]] bool const vectors =
      cap.load(std::memory_order_relaxed) >= 1;
  switch (width) {
    case 1:
      return expand_portable<uint8_t>(mask, values, k, count, out, 0, 0);
    case 2:
#if defined(__x86_64__) && defined(__GNUC__)
      if (vectors && has_ssse3()) {
        j = expand_u16_ssse3(mask, values, k, count, out, next);
      }
#endif
      return expand_portable<uint16_t>(mask, values, k, count, out, j, next);
    case 4:
#if defined(__x86_64__) && defined(__GNUC__)
      if (vectors && has_avx2()) {
        j = expand_u32_avx2(mask, values, k, count, out, next);
      }
#endif
      return expand_portable<uint32_t>(mask, values, k, count, out, j, next);
    default:
      return expand_portable<uint64_t>(mask, values, k, count, out, 0, 0);
  }
}

size_t compact(unsigned width, uint8_t const* in, size_t count, uint8_t* mask,
               uint8_t* values) {
  if (count == 0) return 0;  // no mask bytes, no values (and maybe null)
  size_t j = 0;
  size_t k = 0;
  [[maybe_unused]] bool const vectors =
      cap.load(std::memory_order_relaxed) >= 1;
  switch (width) {
    case 1:
      return compact_portable<uint8_t>(in, count, mask, values, 0, 0);
    case 2:
#if defined(__x86_64__) && defined(__GNUC__)
      if (vectors && has_ssse3()) {
        j = compact_u16_ssse3(in, count, mask, values, k);
      }
#endif
      return compact_portable<uint16_t>(in, count, mask, values, j, k);
    case 4:
#if defined(__x86_64__) && defined(__GNUC__)
      if (vectors && has_avx2()) {
        j = compact_u32_avx2(in, count, mask, values, k);
      }
#endif
      return compact_portable<uint32_t>(in, count, mask, values, j, k);
    default:
      return compact_portable<uint64_t>(in, count, mask, values, 0, 0);
  }
}

void set_cap(unsigned level) { cap.store(level, std::memory_order_relaxed); }

}  // namespace brevis::codec::sparse_kernels
