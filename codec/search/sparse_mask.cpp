#include "codec/search/sparse_mask.h"

#include <algorithm>

#if defined(__x86_64__) && defined(__GNUC__)
#include <emmintrin.h>
#endif

namespace brevis::codec::search {

std::array<uint64_t, 256> sparse_mask_histogram16(byte_view data,
                                                  size_t chunk_elements) {
  std::array<uint64_t, 256> hist{};
  // A second histogram for every other mask byte: dense weights give the
  // same byte in a row, whose increments would wait on each other.
  std::array<uint64_t, 256> odd{};
  size_t const n = data.size() / 2;
  size_t const step = std::max<size_t>(1, chunk_elements);
  uint8_t const* const p = data.data();
  for (size_t start = 0; start < n; start += step) {
    size_t const count = std::min(step, n - start);
    uint8_t const* const in = p + 2 * start;
    // A mask byte per 8 elements, built in a register without a branch
    // (the zeros of pruned weights are unpredictable).
    size_t j = 0;
#if defined(__x86_64__) && defined(__GNUC__)
    // SSE2 (every x86-64 has it): 8 elements compared with zero at once,
    // their 16-bit lanes packed to bytes and their signs gathered.
    __m128i const zero = _mm_setzero_si128();
    auto mask_byte = [&](size_t at) {
      __m128i const v =
          _mm_loadu_si128(reinterpret_cast<__m128i const*>(in + 2 * at));
      __m128i const z = _mm_cmpeq_epi16(v, zero);
      auto const zeros =
          static_cast<unsigned>(_mm_movemask_epi8(_mm_packs_epi16(z, z)));
      return ~zeros & 255u;
    };
    for (; j + 16 <= count; j += 16) {
      ++hist[mask_byte(j)];
      ++odd[mask_byte(j + 8)];
    }
#endif
    for (; j + 8 <= count; j += 8) {
      unsigned bits = 0;
      for (unsigned b = 0; b < 8; ++b) {
        bits |= unsigned{load_le<uint16_t>(in + 2 * (j + b)) != 0} << b;
      }
      ++hist[bits];
    }
    if (j < count) {
      unsigned bits = 0;
      for (size_t b = 0; j + b < count; ++b) {
        bits |= unsigned{load_le<uint16_t>(in + 2 * (j + b)) != 0} << b;
      }
      ++hist[bits];
    }
  }
  for (size_t b = 0; b < 256; ++b) hist[b] += odd[b];
  return hist;
}

}  // namespace brevis::codec::search
