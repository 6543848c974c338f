#pragma once
// c * log2(c), the term every entropy estimate sums: from a table for the
// small counts that make up most of a histogram, so that estimating a
// histogram of tens of thousands of symbols takes no log2 per symbol
// (-sum c log2(c / n) = n log2(n) - sum c log2(c)).

#include <cmath>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace brevis::codec {

namespace detail {
inline constexpr uint64_t c_log2_c_table_size = 4096;
double const* c_log2_c_table();
// Initialized before main (no guard to check in the loops that read it).
inline double const* const c_log2_c_small = c_log2_c_table();
// Out of line and cold: the loops summing terms keep their accumulators in
// registers rather than saving them around a call on every entry.
[[gnu::cold, gnu::noinline]] double c_log2_c_large(uint64_t c);
}  // namespace detail

/// c * log2(c) (0 for c = 0).
inline double c_log2_c(uint64_t c) {
  if (c < detail::c_log2_c_table_size) [[likely]] {
    return detail::c_log2_c_small[c];
  }
  return detail::c_log2_c_large(c);
}

/// c_log2_c of the count of each (symbol, count) entry of `h`, in order,
/// into the first h.size() entries of `out` (grown to hold them, never
/// shrunk): loops that then sum them (in the same order, to the same bits)
/// make no call and keep their accumulators in registers.
void c_log2_c_each(std::span<std::pair<uint32_t, uint32_t> const> h,
                   std::vector<double>& out);

/// Order-0 entropy in bits of counts whose sum is `total` and whose
/// c log2 c terms sum to `sum_c_log2_c`.
inline double entropy_from_terms(uint64_t total, double sum_c_log2_c) {
  return total == 0 ? 0 : c_log2_c(total) - sum_c_log2_c;
}

}  // namespace brevis::codec
