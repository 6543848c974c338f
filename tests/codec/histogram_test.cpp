#include "codec/entropy/histogram.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>

#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

sparse_histogram16 reference(bytes const& d) {
  std::map<uint32_t, uint64_t> m;
  for (size_t i = 0; i + 2 <= d.size(); i += 2) ++m[load_le<uint16_t>(&d[i])];
  return {m.begin(), m.end()};
}

// Sizes on both sides of the switch between the small-input and large-input
// ways of counting, odd lengths, and inputs that reuse the thread's counters
// one after another (each must see them zeroed). Sparse inputs (mostly
// zeros, or all) take the large inputs' way of counting zeros apart; the
// first 1024 lanes choose that way, so zeros there and not after, or after
// and not there, count alike too. Pruned weights' negative zeros (0x8000)
// count as any value.
TEST(histogram_test, matches_a_plain_count) {
  std::mt19937 rng(21);
  for (size_t lanes : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{17},
                       size_t{4099}, size_t{8191}, size_t{8192}, size_t{65535},
                       size_t{65536}, size_t{65537}, size_t{200001}}) {
    for (int kind = 0; kind < 12; ++kind) {
      bytes d;
      for (size_t i = 0; i < lanes; ++i) {
        uint16_t v = 0;
        switch (kind) {
          case 0:
            v = static_cast<uint16_t>(rng());
            break;  // all over
          case 1:
            v = static_cast<uint16_t>(0x3c00 + rng() % 40);
            break;
          case 2:
            v = 0xffff;
            break;  // all equal
          case 4:
            v = rng() % 4 ? 0 : static_cast<uint16_t>(rng());
            break;  // sparse: three quarters zeros
          case 5:
            v = 0;
            break;  // all zeros
          case 6:
            v = i % 16 ? static_cast<uint16_t>(0x8000 | rng() % 7) : 0;
            break;  // a sixteenth zeros, at the sampled stride or not
          case 7:
            v = i < 1024 ? 0 : static_cast<uint16_t>(0x3c00 + rng() % 40);
            break;  // zeros in the lanes that pick the way only
          case 8:
            v = i < 1024 || rng() % 4 ? static_cast<uint16_t>(rng() | 1) : 0;
            break;  // zeros past those lanes only
          case 9:   // pruned: zeros and negative zeros (0x8000), a third each
            v = rng() % 3 == 0   ? 0
                : rng() % 2 == 0 ? 0x8000
                                 : static_cast<uint16_t>(0x3c00 + rng() % 40);
            break;
          case 10:
            v = 0x8000;
            break;  // all negative zeros
          case 11:
            v = i < 1024 ? static_cast<uint16_t>(0x3c00 + rng() % 40) : 0x8000;
            break;  // negative zeros past the lanes that pick the way only
          default:
            v = static_cast<uint16_t>(i);
            break;  // ramp
        }
        testing::append<uint16_t>(d, v);
      }
      if (lanes % 2) d.push_back(0xab);  // odd byte: ignored
      EXPECT_EQ(histogram16(d), reference(d)) << lanes << " " << kind;
    }
  }
}

// Entries hold 32-bit counts: past 2^32 - 1 they saturate rather than wrap,
// so a present symbol never reads as absent (a table built from the counts
// must still cover it).
TEST(histogram_test, entry_counts_saturate) {
  EXPECT_EQ(entry_count(0), 0u);
  EXPECT_EQ(entry_count(12345), 12345u);
  EXPECT_EQ(entry_count(uint64_t{UINT32_MAX}), UINT32_MAX);
  EXPECT_EQ(entry_count(uint64_t{1} << 32), UINT32_MAX);
  EXPECT_EQ(entry_count((uint64_t{1} << 33) + 7), UINT32_MAX);
}

// Against a plain set: around the limit, with runs (which skip the table),
// colliding values (multiples of a large power of two) and partial lanes.
// The sum of several histograms, each counted from its own bytes, equals
// the histogram of their concatenation, and leaves the thread's counters
// zeroed (a count right after it still matches).
TEST(histogram_test, sum_matches_the_count_of_the_concatenation) {
  std::mt19937 rng(5);
  bytes all;
  std::vector<sparse_histogram16> parts;
  for (size_t lanes : {size_t{0}, size_t{3}, size_t{5000}, size_t{70000}}) {
    bytes d;
    for (size_t i = 0; i < lanes; ++i) {
      uint16_t const v = static_cast<uint16_t>(
          i % 2 ? rng() : 0x3c00 + rng() % (1 + lanes / 100));
      d.push_back(static_cast<uint8_t>(v)), d.push_back(v >> 8);
    }
    parts.push_back(histogram16(d));
    all.insert(all.end(), d.begin(), d.end());
  }
  std::vector<sparse_histogram16 const*> ptrs;
  for (auto const& p : parts) ptrs.push_back(&p);
  sparse_histogram16 sum{{7, 7}};  // replaced, not appended to
  sum_histograms16(ptrs, sum);
  EXPECT_EQ(sum, reference(all));
  sum_histograms16({}, sum);
  EXPECT_TRUE(sum.empty());
  bytes again;
  for (int i = 0; i < 4099; ++i) again.push_back(static_cast<uint8_t>(rng()));
  EXPECT_EQ(histogram16(again), reference(again));
}

// Sums past 2^32 take 64-bit counters, and saturate like histogram16's.
TEST(histogram_test, sum_saturates_past_32_bits) {
  sparse_histogram16 const a{{1, 3'000'000'000u}, {9, 2}};
  sparse_histogram16 const b{{1, 3'000'000'000u}, {4, 1}};
  std::vector<sparse_histogram16 const*> const ptrs{&a, &b};
  sparse_histogram16 sum;
  sum_histograms16(ptrs, sum);
  EXPECT_EQ(sum, (sparse_histogram16{{1, UINT32_MAX}, {4, 1}, {9, 2}}));
}

TEST(histogram_test, distinct32_stops_past_its_limit) {
  std::mt19937 rng(22);
  for (size_t distinct : {size_t{0}, size_t{1}, size_t{255}, size_t{256},
                          size_t{257}, size_t{5000}}) {
    for (int kind = 0; kind < 3; ++kind) {
      bytes d;
      std::set<uint32_t> seen;
      for (size_t i = 0; i < 20000 && distinct > 0; ++i) {
        uint32_t const k = static_cast<uint32_t>(rng() % distinct);
        uint32_t const v = kind == 0 ? k * 2654435761u
                           : kind == 1
                               ? k << 20
                               : static_cast<uint32_t>(i / 7 % distinct);
        testing::append<uint32_t>(d, v);
      }
      d.push_back(1);  // a partial lane: ignored
      for (size_t i = 0; i + 4 <= d.size(); i += 4) {
        seen.insert(load_le<uint32_t>(&d[i]));
      }
      for (size_t limit : {size_t{0}, size_t{1}, size_t{256}, size_t{10000}}) {
        EXPECT_EQ(distinct32_up_to(d, limit), std::min(seen.size(), limit + 1))
            << distinct << " " << kind << " " << limit;
      }
    }
  }
}

}  // namespace
}  // namespace brevis::codec
