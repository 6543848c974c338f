#pragma once
// c * log2(c), the term every entropy estimate sums: from a table for the
// small counts that make up most of a histogram, so that estimating a
// histogram of tens of thousands of symbols takes no log2 per symbol
// (-sum c log2(c / n) = n log2(n) - sum c log2(c)).

#include <cmath>
#include <cstdint>

namespace brevis::codec {

namespace detail {
inline constexpr uint64_t c_log2_c_table_size = 4096;
double const* c_log2_c_table();
}  // namespace detail

/// c * log2(c) (0 for c = 0).
inline double c_log2_c(uint64_t c) {
  static double const* const table = detail::c_log2_c_table();
  if (c < detail::c_log2_c_table_size) return table[c];
  double const x = static_cast<double>(c);
  return x * std::log2(x);
}

/// Order-0 entropy in bits of counts whose sum is `total` and whose
/// c log2 c terms sum to `sum_c_log2_c`.
inline double entropy_from_terms(uint64_t total, double sum_c_log2_c) {
  return total == 0 ? 0 : c_log2_c(total) - sum_c_log2_c;
}

}  // namespace brevis::codec
