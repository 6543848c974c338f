#include "codec/search/whole_counts.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace brevis::codec::search {
namespace {

// Branch-free: the zeros of pruned weights are unpredictable.
template <typename T>
size_t run_lanes(uint8_t const* p, size_t n, bool skip_zeros, unsigned shift,
                 unsigned bits) {
  T const mask = bits == 0 || bits >= 8 * sizeof(T)
                     ? static_cast<T>(~T{0})
                     : static_cast<T>((T{1} << bits) - 1);
  if (!skip_zeros) {
    // Each element against the one before: no state carried, so that the
    // loop vectorizes (the carried loop below was 6% of compressing
    // handlandmark-sparse.fp32).
    if (n == 0) return 0;
    size_t changes = 0;
    for (size_t i = 1; i < n; ++i) {
      T const a =
          static_cast<T>((load_le<T>(p + (i - 1) * sizeof(T)) >> shift) & mask);
      T const b =
          static_cast<T>((load_le<T>(p + i * sizeof(T)) >> shift) & mask);
      changes += a != b;
    }
    return changes + 1;
  }
  // The fields of the nonzero elements, a block at a time, gathered into a
  // buffer (branch-free: a store each element, the index advanced past the
  // nonzero ones), then their changes counted as above. The loop carrying
  // the last nonzero field took 2.2 ns an element, most of the runs
  // candidate's count on handlandmark-full.bf16's pruned tensors.
  constexpr size_t block = 2048;
  std::array<T, block> kept;
  size_t runs = 0;
  bool first = true;
  T last = 0;
  for (size_t start = 0; start < n; start += block) {
    size_t const m = std::min(block, n - start);
    uint8_t const* const q = p + start * sizeof(T);
    size_t k = 0;
    for (size_t i = 0; i < m; ++i) {
      T const e = load_le<T>(q + i * sizeof(T));
      kept[k] = static_cast<T>((e >> shift) & mask);
      k += e != 0;
    }
    if (k == 0) continue;
    size_t changes = first || kept[0] != last;
    for (size_t i = 1; i < k; ++i) changes += kept[i] != kept[i - 1];
    runs += changes;
    first = false;
    last = kept[k - 1];
  }
  return runs;
}

}  // namespace

size_t count_runs(value_source const& s) {
  uint8_t const* const p = s.elements.data();
  size_t const n = s.elements.size() / s.width;
  if (s.bits > 0 && s.shift + s.bits > 8 * s.width) return 0;
  unsigned const shift = s.bits == 0 ? 0 : s.shift;
  switch (s.width) {
    case 1:
      return run_lanes<uint8_t>(p, n, s.skip_zeros, shift, s.bits);
    case 2:
      return run_lanes<uint16_t>(p, n, s.skip_zeros, shift, s.bits);
    case 4:
      return run_lanes<uint32_t>(p, n, s.skip_zeros, shift, s.bits);
    case 8:
      return run_lanes<uint64_t>(p, n, s.skip_zeros, shift, s.bits);
    default:
      return 0;
  }
}

}  // namespace brevis::codec::search
