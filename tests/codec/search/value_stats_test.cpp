// measure()'s zero and repeat counts run in lanes as wide as the elements,
// a block at a time that such a lane cannot overflow: exact at the block
// edges (255 one-byte and 65535 two-byte elements) and past them.
// measure_whole()'s period: the smallest, as a check of every candidate
// finds it, and found without comparing the data once a candidate.

#include "codec/search/value_stats.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "codec/core/bytes.h"
#include "codec/ops/op_util.h"

namespace brevis::codec::search {
namespace {

stream filled(unsigned width, size_t count, uint8_t byte) {
  return stream{bytes(count * width, byte),
                op_util::uint_type(static_cast<uint8_t>(width))};
}

TEST(value_stats, zero_and_repeat_counts_are_exact_across_block_edges) {
  for (unsigned width : {1u, 2u, 4u, 8u}) {
    size_t const edge = width == 1 ? 255 : width == 2 ? 65535 : 65536;
    for (size_t count :
         {edge - 1, edge, edge + 1, 2 * edge, 2 * edge + 1, 3 * edge + 7}) {
      SCOPED_TRACE("width " + std::to_string(width) + " count " +
                   std::to_string(count));
      value_stats const zeros = measure(filled(width, count, 0), false);
      EXPECT_EQ(zeros.zero_rate, 1.0);
      EXPECT_EQ(zeros.repeat_rate, 1.0);
      value_stats const same = measure(filled(width, count, 0x5a), false);
      EXPECT_EQ(same.zero_rate, 0.0);
      EXPECT_EQ(same.repeat_rate, 1.0);
      // Every other element zero: half the elements, no repeats.
      stream alternating = filled(width, count, 0);
      for (size_t i = 0; i < count; i += 2) alternating.data[i * width] = 1;
      value_stats const alt = measure(alternating, false);
      EXPECT_EQ(alt.zero_rate,
                static_cast<double>(count / 2) / static_cast<double>(count));
      EXPECT_EQ(alt.repeat_rate, 0.0);
    }
  }
}

// Siblings keep their role's program only where their decisions fall in
// the same buckets: the fields that every float tensor has must not
// straddle an edge.
TEST(value_stats, common_fields_do_not_straddle_a_bucket_edge) {
  value_stats a, b;
  // A sign field: about half its values zero.
  a.zero_rate = 0.46, b.zero_rate = 0.54;
  EXPECT_EQ(zero_bucket(a), zero_bucket(b));
  // A 7-bit mantissa in byte lanes: about 7 bits of entropy a byte.
  a.byte_entropy = 6.9, b.byte_entropy = 7.0;
  EXPECT_EQ(entropy_bucket(a), entropy_bucket(b));
  // A full mantissa byte is told apart from it, a mostly zero field from a
  // sign field, a low-entropy field from either.
  b.byte_entropy = 7.99;
  EXPECT_NE(entropy_bucket(a), entropy_bucket(b));
  b.zero_rate = 0.9;
  EXPECT_NE(zero_bucket(a), zero_bucket(b));
  b.byte_entropy = 2.5;
  EXPECT_NE(entropy_bucket(a), entropy_bucket(b));
}

// The smallest p <= min(n / 2, 2^16) with e[i] == e[i + p] for every i (of
// n elements of `width` bytes), or 0: every candidate checked on every
// element.
uint64_t period_by_every_check(bytes const& d, unsigned width) {
  size_t const n = d.size() / width;
  for (size_t p = 1; p <= std::min<size_t>(n / 2, 65536); ++p) {
    if (std::equal(d.begin() + static_cast<std::ptrdiff_t>(p * width), d.end(),
                   d.begin())) {
      return p;
    }
  }
  return 0;
}

uint64_t period_of(bytes const& d, unsigned width) {
  value_stats s;
  measure_whole(byte_view(d.data(), d.size()), width, s, true);
  return s.constant ? 0 : s.period;
}

// Sequences built to have periods, near-periods and long runs: a random
// pattern of a few symbols repeated, then bent at a random element or not;
// a run of one value with a tail of others.
TEST(value_stats, the_period_is_the_smallest_one) {
  std::mt19937_64 rng(17);
  for (unsigned width : {1u, 2u, 4u, 8u}) {
    for (int round = 0; round < 400; ++round) {
      size_t const n = 4 + rng() % 3000;
      bytes d(n * width);
      unsigned const symbols = 1 + static_cast<unsigned>(rng() % 3);
      size_t const pattern = 1 + rng() % std::max<size_t>(1, n / 3);
      std::vector<uint8_t> unit(pattern * width);
      for (auto& b : unit) b = static_cast<uint8_t>(rng() % symbols);
      if (round % 4 == 0) std::fill(unit.begin(), unit.end(), 0);
      for (size_t i = 0; i < d.size(); ++i) d[i] = unit[i % unit.size()];
      if (round % 2 == 1) {  // bent: one element changed
        d[(rng() % n) * width] ^= static_cast<uint8_t>(1 + rng() % 255);
      }
      SCOPED_TRACE("width " + std::to_string(width) + " n " +
                   std::to_string(n) + " round " + std::to_string(round));
      value_stats s;
      measure_whole(byte_view(d.data(), d.size()), width, s, true);
      if (s.constant) {
        EXPECT_EQ(period_by_every_check(d, width), 1u);
        continue;
      }
      EXPECT_EQ(s.period, period_by_every_check(d, width));
    }
  }
}

// Short sequences, where a wrong skip shows: a random pattern of up to the
// whole length (so periods of every size), repeated, with none, one or two
// elements changed; every element width.
TEST(value_stats, the_period_of_short_sequences_is_the_smallest_one) {
  std::mt19937_64 rng(29);
  for (int round = 0; round < 40000; ++round) {
    unsigned const width = 1u << (rng() % 4);
    size_t const n = 4 + rng() % 197;
    size_t const pattern = 1 + rng() % n;
    unsigned const symbols = 1 + static_cast<unsigned>(rng() % 3);
    std::vector<uint8_t> unit(pattern * width);
    for (auto& b : unit) b = static_cast<uint8_t>(rng() % symbols);
    bytes d(n * width);
    for (size_t i = 0; i < d.size(); ++i) d[i] = unit[i % unit.size()];
    for (size_t changes = rng() % 3; changes > 0; --changes) {
      d[(rng() % n) * width] = static_cast<uint8_t>(rng() % symbols);
    }
    value_stats s;
    measure_whole(byte_view(d.data(), d.size()), width, s, true);
    uint64_t const want = period_by_every_check(d, width);
    if (s.constant) {
      EXPECT_EQ(want, 1u);
      continue;
    }
    ASSERT_EQ(s.period, want)
        << "width " << width << " n " << n << " round " << round;
  }
}

// 32 MiB of one value and a last element of another: every one of 2^16
// candidates matches for all but the last element. Checking each to its
// end compared 2^16 x 32 MiB (hours); skipping what a mismatch rules out,
// one pass. A period past a long run is still found.
TEST(value_stats, a_long_run_is_no_period_and_costs_one_pass) {
  for (unsigned width : {1u, 2u, 8u}) {
    SCOPED_TRACE("width " + std::to_string(width));
    bytes d(size_t{32} << 20, 0);
    d[d.size() - width] = 1;
    EXPECT_EQ(period_of(d, width), 0u);
    // Runs of 60,000 and a marker, repeated: the period is run and marker.
    size_t const unit = 60001;
    bytes runs(unit * 70 * width, 0);
    for (size_t i = unit - 1; i < runs.size() / width; i += unit) {
      runs[i * width] = 7;
    }
    EXPECT_EQ(period_of(runs, width), unit);
  }
}

}  // namespace
}  // namespace brevis::codec::search
