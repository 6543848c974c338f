#include "codec/search/whole_counts.h"

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
  size_t runs = 0;
  bool first = true;
  T last = 0;
  for (size_t i = 0; i < n; ++i) {
    T const e = load_le<T>(p + i * sizeof(T));
    bool const counted = e != 0;
    T const x = static_cast<T>((e >> shift) & mask);
    runs += counted & (first | (x != last));
    first &= !counted;
    last = counted ? x : last;
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
