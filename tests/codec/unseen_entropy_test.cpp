// unseen_entropy_bits: what a sample's plug-in entropy hides.
#include "codec/choose/unseen_entropy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "codec/choose/entropy_terms.h"

namespace brevis::codec {
namespace {

sparse_hist histogram_of(std::vector<uint16_t> const& v) {
  std::vector<uint32_t> counts(65536);
  for (uint16_t x : v) ++counts[x];
  sparse_hist h;
  for (uint32_t s = 0; s < counts.size(); ++s) {
    if (counts[s]) h.emplace_back(s, counts[s]);
  }
  return h;
}

double plug_in_bits(sparse_hist const& h, uint64_t n) {
  double terms = 0;
  for (auto const& [s, c] : h) terms += c_log2_c(c);
  return entropy_from_terms(n, terms);
}

TEST(unseen_entropy, a_uniform_sample_reads_as_its_source) {
  // 2^16 uniform 16-bit values, sampled 2^16 times: the plug-in entropy is
  // ~15.2 bits a value; the source's is 16.
  std::mt19937 rng(1);
  std::vector<uint16_t> v(65536);
  for (uint16_t& x : v) x = static_cast<uint16_t>(rng());
  sparse_hist const h = histogram_of(v);
  auto const n = static_cast<double>(v.size());
  double const plug_in = plug_in_bits(h, v.size()) / n;
  EXPECT_LT(plug_in, 15.4);
  double const corrected = plug_in + unseen_entropy_bits(h, v.size(), 16) / n;
  // Chao-Shen reads 16.2 here; at most the alphabet's 16 bits.
  EXPECT_NEAR(corrected, 16.0, 0.02);
}

TEST(unseen_entropy, a_well_sampled_source_needs_no_correction) {
  // 64 symbols, a geometric distribution, sampled 2^16 times: every symbol
  // seen many times.
  std::mt19937 rng(2);
  std::geometric_distribution<int> g(0.1);
  std::vector<uint16_t> v(65536);
  for (uint16_t& x : v) x = static_cast<uint16_t>(std::min(g(rng), 63));
  sparse_hist const h = histogram_of(v);
  EXPECT_LT(unseen_entropy_bits(h, v.size(), 16), 0.001 * v.size());
}

TEST(unseen_entropy, closer_to_the_source_than_the_plug_in) {
  // A geometric source over 2^16 symbols (entropy ~12.4 bits), sampled 4096
  // times: most symbols unseen or seen once.
  double const q = 1.0 / 2048;
  double source = 0;
  for (int k = 0; k < 65536; ++k) {
    double const p = q * std::pow(1 - q, k);
    source -= p * std::log2(p);
  }
  std::mt19937 rng(3);
  std::geometric_distribution<int> g(q);
  std::vector<uint16_t> v(4096);
  for (uint16_t& x : v) x = static_cast<uint16_t>(std::min(g(rng), 65535));
  sparse_hist const h = histogram_of(v);
  auto const n = static_cast<double>(v.size());
  double const plug_in = plug_in_bits(h, v.size()) / n;
  double const corrected = plug_in + unseen_entropy_bits(h, v.size(), 16) / n;
  EXPECT_LT(std::abs(corrected - source), std::abs(plug_in - source) / 2)
      << "plug-in " << plug_in << ", corrected " << corrected << ", source "
      << source;
}

TEST(unseen_entropy, degenerate_samples) {
  EXPECT_EQ(unseen_entropy_bits({}, 0, 16), 0);
  EXPECT_EQ(unseen_entropy_bits({{7, 100}}, 100, 16), 0);
  // Every value seen once: no coverage left to estimate from, yet a finite,
  // positive correction (one value taken as seen twice), the estimate at
  // most the alphabet's bits.
  sparse_hist all_once;
  for (uint32_t s = 0; s < 1000; ++s) all_once.emplace_back(s, 1);
  double const bits = unseen_entropy_bits(all_once, 1000, 16);
  EXPECT_TRUE(std::isfinite(bits));
  EXPECT_GT(bits, 0);
  EXPECT_LE(bits + plug_in_bits(all_once, 1000), 1000.0 * 16 + 1e-6);
}

// The Chao-Shen estimate as its definition reads, a term per symbol.
double chao_shen_bits(sparse_hist const& h, uint64_t n) {
  auto const nd = static_cast<long double>(n);
  uint64_t singletons = 0;
  for (auto const& [s, c] : h) singletons += c == 1;
  singletons = std::min<uint64_t>(singletons, n - 1);
  long double const coverage = 1 - static_cast<long double>(singletons) / nd;
  long double h_bits = 0;
  for (auto const& [s, c] : h) {
    long double const p = coverage * c / nd;
    h_bits += -p * std::log2(p) / (1 - std::pow(1 - p, nd));
  }
  return static_cast<double>(nd * h_bits);
}

TEST(unseen_entropy, follows_the_definition_on_every_path) {
  // Counts by their count and one at a time (256 and more), past the c log2
  // c table (4096), at low coverage (where large counts are weighted too)
  // and high.
  std::vector<sparse_hist> cases = {
      {{0, 1}, {1, 1}},         {{0, 1000}},
      {{0, 300}, {1, 5000}},    {{0, 1}, {1, 4000000000u}},
      {{0, 100}, {1, 5000000}},
  };
  sparse_hist many_once;
  for (uint32_t s = 0; s < 10000; ++s) many_once.emplace_back(s, 1);
  sparse_hist low_coverage = many_once;
  low_coverage.emplace_back(10000, 1000);
  cases.push_back(low_coverage);
  sparse_hist mixed = many_once;
  mixed.emplace_back(10000, 300);
  mixed.emplace_back(10001, 5000);
  cases.push_back(mixed);
  sparse_hist spread;
  for (uint32_t s = 0; s < 3000; ++s) spread.emplace_back(s, 1 + s % 700);
  cases.push_back(spread);
  for (sparse_hist const& h : cases) {
    uint64_t n = 0;
    for (auto const& [s, c] : h) n += c;
    if (h.size() < 2) {
      EXPECT_EQ(unseen_entropy_bits(h, n, 64), 0);
      continue;
    }
    double const expected =
        std::max(0.0, chao_shen_bits(h, n) - plug_in_bits(h, n));
    // Within rounding of the sums it is the difference of (n log2 n and
    // sum c log2 c: 1.3e11 bits for n = 4e9, to a difference of 20).
    auto const nd = static_cast<double>(n);
    EXPECT_NEAR(unseen_entropy_bits(h, n, 64), expected,
                1e-12 * nd * std::log2(nd) + 1e-9)
        << h.size() << " symbols, n " << n;
  }
}

}  // namespace
}  // namespace brevis::codec
