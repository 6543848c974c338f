#include "codec/search/whole_counts.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace brevis::codec::search {
namespace {

// Elements 1..n-1 of `p` that differ from the one before, as `field` of
// each sees them. No state carried, so that the loop vectorizes (a carried
// loop was 6% of compressing handlandmark-sparse.fp32), and summed a block
// at a time in 16 bits (a 64-bit sum widened each byte lane's comparison
// eightfold).
template <typename T, typename Field>
size_t changes(uint8_t const* p, size_t n, Field field) {
  size_t total = 0;
  constexpr size_t block = 65535;
  for (size_t start = 1; start < n; start += block) {
    size_t const end = std::min(n, start + block);
    uint16_t in_block = 0;
    for (size_t i = start; i < end; ++i) {
      T const a = field(load_le<T>(p + (i - 1) * sizeof(T)));
      T const b = field(load_le<T>(p + i * sizeof(T)));
      in_block = static_cast<uint16_t>(in_block + (a != b));
    }
    total += in_block;
  }
  return total;
}

// Branch-free: the zeros of pruned weights are unpredictable.
template <typename T>
size_t run_lanes(uint8_t const* p, size_t n, bool skip_zeros, unsigned shift,
                 unsigned bits) {
  T const mask = bits == 0 || bits >= 8 * sizeof(T)
                     ? static_cast<T>(~T{0})
                     : static_cast<T>((T{1} << bits) - 1);
  if (!skip_zeros) {
    if (n == 0) return 0;
    // Whole elements without a shift: a shift by a variable count kept
    // byte lanes from vectorizing.
    if (shift == 0 && mask == static_cast<T>(~T{0})) {
      return changes<T>(p, n, [](T x) { return x; }) + 1;
    }
    return changes<T>(
               p, n, [=](T x) { return static_cast<T>((x >> shift) & mask); }) +
           1;
  }
  // The fields of the nonzero elements, a block at a time, gathered into a
  // buffer (branch-free: a store each element, the index advanced past the
  // nonzero ones), then their changes counted. The loop carrying
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
    // A block of zeros (most of a mostly-zero value's) has nothing to keep:
    // found in a pass that vectorizes.
    T any = 0;
    for (size_t i = 0; i < m; ++i) any |= load_le<T>(q + i * sizeof(T));
    if (any == 0) continue;
    size_t k = 0;
    for (size_t i = 0; i < m; ++i) {
      T const e = load_le<T>(q + i * sizeof(T));
      kept[k] = static_cast<T>((e >> shift) & mask);
      k += e != 0;
    }
    size_t found = first || kept[0] != last;
    for (size_t i = 1; i < k; ++i) found += kept[i] != kept[i - 1];
    runs += found;
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
