#include "codec/search/sparse_mask.h"

#include <algorithm>

namespace brevis::codec::search {

std::array<uint64_t, 256> sparse_mask_histogram16(byte_view data,
                                                  size_t chunk_elements) {
  std::array<uint64_t, 256> hist{};
  size_t const n = data.size() / 2;
  size_t const step = std::max<size_t>(1, chunk_elements);
  uint8_t const* const p = data.data();
  for (size_t start = 0; start < n; start += step) {
    size_t const count = std::min(step, n - start);
    uint8_t const* const in = p + 2 * start;
    // A mask byte per 8 elements, built in a register without a branch
    // (the zeros of pruned weights are unpredictable).
    size_t j = 0;
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
  return hist;
}

}  // namespace brevis::codec::search
