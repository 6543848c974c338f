// Re-segmentation of untyped regions: cuts where the byte statistics
// change, none where they do not, and the fast gain formula agrees with
// coding each part by its smoothed code lengths.

#include "codec/search/segment.h"

#include <gtest/gtest.h>

#include <random>

namespace brevis::codec::search {
namespace {

// Bytes drawn from `values` distinct values starting at `first`.
bytes few_values(size_t n, unsigned first, unsigned values, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<unsigned> pick(0, values - 1);
  bytes out(n);
  for (auto& b : out) b = static_cast<uint8_t>(first + pick(rng));
  return out;
}

TEST(statistics_cuts, none_in_zeros_or_one_distribution) {
  EXPECT_TRUE(statistics_cuts(bytes(8u << 20, 0)).empty());
  EXPECT_TRUE(statistics_cuts(few_values(4u << 20, 0, 256, 1)).empty());
  EXPECT_TRUE(statistics_cuts(few_values(4u << 20, 10, 40, 2)).empty());
}

TEST(statistics_cuts, too_short_to_cut) {
  EXPECT_TRUE(statistics_cuts(bytes()).empty());
  EXPECT_TRUE(statistics_cuts(few_values(40000, 0, 4, 3)).empty());
}

TEST(statistics_cuts, cuts_where_the_values_change) {
  // Three parts with disjoint value sets; the cuts are found to the byte
  // (the boundaries are not block aligned).
  size_t const a = (1u << 20) + 777, b = (2u << 20) + 12345;
  bytes d = few_values(a, 0, 16, 4);
  bytes const mid = few_values(b - a, 100, 50, 5);
  bytes const tail = few_values(3u << 20, 200, 8, 6);
  d.insert(d.end(), mid.begin(), mid.end());
  d.insert(d.end(), tail.begin(), tail.end());
  std::vector<uint64_t> const cuts = statistics_cuts(d);
  ASSERT_EQ(cuts.size(), 2u);
  EXPECT_EQ(cuts[0], a);
  EXPECT_EQ(cuts[1], b);
}

TEST(statistics_cuts, zeros_then_data_and_back) {
  size_t const a = 3u << 20, b = a + (2u << 20) + 5;
  bytes d(a, 0);
  bytes const mid = few_values(b - a, 1, 255, 7);
  d.insert(d.end(), mid.begin(), mid.end());
  d.resize(d.size() + (3u << 20), 0);
  std::vector<uint64_t> const cuts = statistics_cuts(d);
  ASSERT_EQ(cuts.size(), 2u);
  EXPECT_EQ(cuts[0], a);
  // The first zero after the random part may be a 1-in-255 draw of it.
  EXPECT_NEAR(static_cast<double>(cuts[1]), static_cast<double>(b), 4);
}

TEST(statistics_cuts, parts_respect_the_minimum) {
  bytes d = few_values(2u << 20, 0, 16, 8);
  bytes const blip = few_values(20000, 100, 50, 9);
  d.insert(d.end(), blip.begin(), blip.end());
  bytes const tail = few_values(2u << 20, 0, 16, 10);
  d.insert(d.end(), tail.begin(), tail.end());
  for (uint64_t c : statistics_cuts(d, 64u << 10)) {
    EXPECT_GE(c, 64u << 10);
    EXPECT_LE(c, d.size() - (64u << 10));
  }
  std::vector<uint64_t> const fine = statistics_cuts(d, 1024);
  EXPECT_EQ(fine.size(), 2u);
}

}  // namespace
}  // namespace brevis::codec::search
