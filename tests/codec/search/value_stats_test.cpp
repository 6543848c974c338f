// measure()'s zero and repeat counts run in lanes as wide as the elements,
// a block at a time that such a lane cannot overflow: exact at the block
// edges (255 one-byte and 65535 two-byte elements) and past them.

#include "codec/search/value_stats.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace brevis::codec::search
