#include "codec/choose/entropy_terms.h"

#include <array>

namespace brevis::codec::detail {

double const* c_log2_c_table() {
  static auto const table = [] {
    std::array<double, c_log2_c_table_size> t{};
    for (uint64_t c = 1; c < t.size(); ++c) {
      double const x = static_cast<double>(c);
      t[c] = x * std::log2(x);
    }
    return t;
  }();
  return table.data();
}

double c_log2_c_large(uint64_t c) {
  double const x = static_cast<double>(c);
  return x * std::log2(x);
}

}  // namespace brevis::codec::detail

namespace brevis::codec {

void c_log2_c_each(std::span<std::pair<uint32_t, uint32_t> const> h,
                   std::vector<double>& out) {
  // Grown only: a buffer reused for histograms of varying sizes would
  // zero-fill the difference at every growth, only to overwrite it.
  if (out.size() < h.size()) out.resize(h.size());
  double* const o = out.data();
  for (size_t i = 0; i < h.size(); ++i) o[i] = c_log2_c(h[i].second);
}

}  // namespace brevis::codec
