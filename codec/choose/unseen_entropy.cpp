#include "codec/choose/unseen_entropy.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "codec/choose/entropy_terms.h"

namespace brevis::codec {

double unseen_entropy_bits(sparse_hist const& h, uint64_t n) {
  if (n < 2 || h.size() < 2) return 0;
  // Symbols by their count: the estimate's term depends on the count alone,
  // so a histogram of tens of thousands of symbols (mostly counts of a few)
  // takes a log and a power per distinct count, not per symbol.
  constexpr uint32_t small = 256;
  std::array<uint64_t, small> with_count{};
  double terms = 0;  // sum c log2 c, for the plug-in entropy
  double const nd = static_cast<double>(n);
  // Coverage: the probability mass of the symbols seen (Good-Turing), with
  // at least one value not a singleton, as Chao and Shen take it.
  uint64_t singletons = 0;
  for (auto const& [sym, c] : h) singletons += c == 1;
  singletons = std::min(singletons, n - 1);
  double const coverage = 1 - static_cast<double>(singletons) / nd;
  // A seen symbol of count c stands for p = coverage c / n, weighted by
  // the inverse of its chance to be seen in n draws (Horvitz-Thompson).
  auto term = [&](uint32_t c) {
    double const p = coverage * c / nd;
    double const seen = -std::expm1(nd * std::log1p(-p));
    return -p * std::log2(p) / seen;
  };
  double estimate = 0;
  for (auto const& [sym, c] : h) {
    terms += c_log2_c(c);
    if (c < small) {
      ++with_count[c];
    } else {
      estimate += term(c);
    }
  }
  for (uint32_t c = 1; c < small; ++c) {
    if (with_count[c] != 0)
      estimate += static_cast<double>(with_count[c]) * term(c);
  }
  double const plug_in = entropy_from_terms(n, terms);
  return std::max(0.0, nd * estimate - plug_in);
}

}  // namespace brevis::codec
