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

void set_cap(unsigned level) { cap.store(level, std::memory_order_relaxed); }

}  // namespace brevis::codec::sparse_kernels
