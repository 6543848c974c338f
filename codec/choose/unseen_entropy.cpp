#include "codec/choose/unseen_entropy.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "codec/choose/entropy_terms.h"

namespace brevis::codec {

double unseen_entropy_bits(sparse_hist const& h, uint64_t n,
                           unsigned alphabet_bits) {
  // One symbol seen: its source may have others, but no estimate from one
  // symbol's count tells their share (and a constant value costs nothing).
  if (n < 2 || h.size() < 2) return 0;
  // Symbols by their count: the estimate's term depends on the count alone,
  // so a histogram of tens of thousands of symbols (mostly counts of a few)
  // takes a log and a power per distinct count, not per symbol.
  constexpr uint32_t small = 256;
  std::array<uint64_t, small> with_count{};
  thread_local std::vector<uint32_t> large;  // the counts of `small` or more
  large.clear();
  double terms = 0;        // sum c log2 c, for the plug-in entropy
  double large_terms = 0;  // the same over the large counts
  uint64_t large_total = 0;
  for (auto const& [sym, c] : h) {
    double const t = c_log2_c(c);
    terms += t;
    if (c < small) {
      ++with_count[c];
    } else {
      large.push_back(c);
      large_terms += t;
      large_total += c;
    }
  }
  auto const nd = static_cast<double>(n);
  // Coverage: the probability mass of the symbols seen (Good-Turing), with
  // at least one value not a singleton, as Chao and Shen take it.
  uint64_t const singletons = std::min(with_count[1], n - 1);
  double const coverage = 1 - static_cast<double>(singletons) / nd;
  // A seen symbol of count c stands for p = coverage c / n, weighted by
  // the inverse of its chance to be seen in n draws (Horvitz-Thompson):
  // 1 - (1 - p)^n, which is 1 in double precision once coverage c > 40
  // ((1 - p)^n <= e^-(coverage c)). Those counts' terms are -p log2 p alone,
  // from c log2 c: no logarithm or power a count.
  double const per_count = coverage / nd;
  double const log2_per_count = std::log2(per_count);
  auto plain = [&](double c_log2_c_sum, double count_sum) {
    return -per_count * (c_log2_c_sum + count_sum * log2_per_count);
  };
  auto weighted = [&](uint32_t c) {
    double const p = per_count * c;
    double const seen = -std::expm1(nd * std::log1p(-p));
    return -p * std::log2(p) / seen;
  };
  double const saturated = 40 / coverage;
  double estimate = 0;
  for (uint32_t c = 1; c < small; ++c) {
    if (with_count[c] == 0) continue;
    auto const k = static_cast<double>(with_count[c]);
    estimate += c < saturated ? k * weighted(c) : k * plain(c_log2_c(c), c);
  }
  if (small >= saturated) {
    estimate += plain(large_terms, static_cast<double>(large_total));
  } else {
    for (uint32_t c : large) estimate += weighted(c);
  }
  double const plug_in = entropy_from_terms(n, terms);
  double const most = nd * alphabet_bits;
  return std::max(0.0, std::min(nd * estimate, most) - plug_in);
}

}  // namespace brevis::codec
