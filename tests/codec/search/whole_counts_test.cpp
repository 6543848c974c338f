// The whole value's run counts that scale runs' sampled costs: the sizes of
// the outputs the operator itself writes.
#include "codec/search/whole_counts.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

// Elements of `width` bytes: zero with probability `zeros`, else one of a
// few values, each repeating the previous element with probability 1/2.
bytes elements(size_t n, unsigned width, double zeros, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution zero(zeros), again(0.5);
  std::uniform_int_distribution<int> value(1, 5);
  bytes d;
  uint64_t last = 1;
  for (size_t i = 0; i < n; ++i) {
    uint64_t v = again(rng) ? last : static_cast<uint64_t>(value(rng)) << 7;
    last = v;
    if (zero(rng)) v = 0;
    for (unsigned b = 0; b < width; ++b) {
      d.push_back(static_cast<uint8_t>(v >> (8 * (b % 8))));
    }
  }
  return d;
}

std::vector<stream> encoded(opcode op, bytes const& d, unsigned width) {
  std::vector<stream> kids;
  bytes side;
  op_for(op).encode(make_op(op, {}, {}),
                    stream{d, {static_cast<uint8_t>(width), meaning::uint}},
                    kids, side);
  return kids;
}

// Runs of the byte `plane` of each element of `d`.
size_t plane_runs(bytes const& d, unsigned width, unsigned plane) {
  bytes p;
  for (size_t i = plane; i + width - plane <= d.size(); i += width) {
    p.push_back(d[i]);
  }
  return encoded(opcode::runs, p, 1).at(1).count();
}

TEST(whole_counts, runs_equal_the_operators_outputs) {
  for (unsigned width : {1u, 2u, 4u, 8u}) {
    for (size_t n :
         {size_t{0}, size_t{1}, size_t{2}, size_t{100}, size_t{3001}}) {
      for (double zeros : {0.0, 0.4, 1.0}) {
        bytes const d = elements(n, width, zeros, static_cast<uint32_t>(n));
        bytes const nonzero = encoded(opcode::sparse, d, width).at(1).data;
        EXPECT_EQ(search::count_runs({d, width}),
                  encoded(opcode::runs, d, width).at(1).count())
            << width << " " << n << " " << zeros;
        EXPECT_EQ(search::count_runs({d, width, true}),
                  encoded(opcode::runs, nonzero, width).at(1).count())
            << width << " " << n << " " << zeros;
        for (unsigned plane = 0; plane < width; ++plane) {
          EXPECT_EQ(search::count_runs({d, width, false, 8 * plane, 8}),
                    plane_runs(d, width, plane));
          EXPECT_EQ(search::count_runs({d, width, true, 8 * plane, 8}),
                    plane_runs(nonzero, width, plane));
        }
      }
    }
  }
}

// Floats of `width` bytes with `mbits` mantissa bits: zero with
// probability `zeros`, else a sign, exponent and mantissa each repeating
// the previous element's with probability 1/2 (independently: a field's
// runs are not the element's), else one of a few values.
bytes floats(size_t n, unsigned width, unsigned mbits, double zeros,
             uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::bernoulli_distribution zero(zeros), again(0.5);
  unsigned const ebits = 8 * width - 1 - mbits;
  uint64_t sign = 0, exp = 1, man = 0;
  bytes d;
  for (size_t i = 0; i < n; ++i) {
    if (!again(rng)) sign = rng() % 2;
    if (!again(rng)) exp = (uint64_t{1} << (ebits - 1)) - rng() % 4;
    if (!again(rng)) man = (rng() % 3) << (mbits - 2);
    uint64_t v = sign << (width * 8 - 1) | exp << mbits | man;
    if (zero(rng)) v = 0;
    for (unsigned b = 0; b < width; ++b) {
      d.push_back(static_cast<uint8_t>(v >> (8 * b)));
    }
  }
  return d;
}

// Runs of each child (sign, exponent, mantissa) of the fields operator
// applied to `d` as floats of meaning `m`.
std::vector<size_t> field_runs(bytes const& d, meaning m) {
  std::vector<stream> kids;
  bytes side;
  op_for(opcode::fields)
      .encode(make_op(opcode::fields, {}, {}),
              stream{d, {static_cast<uint8_t>(meaning_width(m)), m}}, kids,
              side);
  std::vector<size_t> out;
  for (stream const& k : kids) {
    out.push_back(encoded(opcode::runs, k.data, k.type.width).at(1).count());
  }
  return out;
}

// The fields' shifts astar gives count_runs (field_source: sign, exponent,
// mantissa at {e + m, 1}, {m, e}, {0, m}) count the runs of the children
// the operator writes, in their own lanes (fp64's exponent in u16).
TEST(whole_counts, field_runs_equal_the_fields_operators_outputs) {
  struct format {
    meaning m;
    unsigned width, mbits;
  };
  for (format const f :
       {format{meaning::bf16, 2, 7}, format{meaning::fp16, 2, 10},
        format{meaning::fp32, 4, 23}, format{meaning::fp64, 8, 52}}) {
    unsigned const ebits = 8 * f.width - 1 - f.mbits;
    unsigned const shifts[3] = {ebits + f.mbits, f.mbits, 0};
    unsigned const bits[3] = {1, ebits, f.mbits};
    for (size_t n : {size_t{1}, size_t{2}, size_t{100}, size_t{3001}}) {
      for (double zeros : {0.0, 0.4, 1.0}) {
        SCOPED_TRACE(std::to_string(f.width) + " bytes, " + std::to_string(n) +
                     " elements, " + std::to_string(zeros) + " zeros");
        bytes const d = floats(n, f.width, f.mbits, zeros,
                               static_cast<uint32_t>(n + f.width));
        bytes const nonzero = encoded(opcode::sparse, d, f.width).at(1).data;
        std::vector<size_t> const all = field_runs(d, f.m);
        std::vector<size_t> const nonzero_runs = field_runs(nonzero, f.m);
        ASSERT_EQ(all.size(), 3u);
        for (size_t i = 0; i < 3; ++i) {
          SCOPED_TRACE(i);
          EXPECT_EQ(search::count_runs({d, f.width, false, shifts[i], bits[i]}),
                    all[i]);
          EXPECT_EQ(search::count_runs({d, f.width, true, shifts[i], bits[i]}),
                    nonzero_runs[i]);
        }
      }
    }
  }
}

// Nonzero runs that continue across zeros longer than count_runs' blocks
// (2048 elements), and blocks of zeros alone.
TEST(whole_counts, nonzero_runs_continue_across_blocks_of_zeros) {
  bytes d;
  auto put = [&](uint16_t v, size_t n) {
    for (size_t i = 0; i < n; ++i) put_le(d, v);
  };
  put(5, 3), put(0, 5000), put(5, 1), put(0, 2047), put(6, 2), put(0, 4096);
  put(6, 2049), put(7, 1);
  EXPECT_EQ(search::count_runs({d, 2, true}), 3u);  // 5, 6, 7
  EXPECT_EQ(search::count_runs({d, 2, false}), 8u);
  EXPECT_EQ(search::count_runs({d, 2, true, 1, 2}), 2u);  // 2, 3, 3
  EXPECT_EQ(search::count_runs({bytes(2 * 5000, 0), 2, true}), 0u);
}

// Every element a run of its own, past count_runs' 16-bit sums of 65535
// comparisons (a sum that wraps, or a block one longer, loses 65536 runs).
TEST(whole_counts, runs_of_one_element_past_the_blocks_of_sums) {
  size_t const n = 2 * 65535 + 3;
  for (unsigned width : {1u, 2u, 4u, 8u}) {
    bytes d;
    for (size_t i = 0; i < n; ++i) {
      for (unsigned b = 0; b < width; ++b) {
        d.push_back(static_cast<uint8_t>(i % 2 == 0 ? 1 : 2));
      }
    }
    SCOPED_TRACE(width);
    EXPECT_EQ(search::count_runs({d, width}), n);
    EXPECT_EQ(search::count_runs({d, width, true}), n);
    EXPECT_EQ(search::count_runs({d, width, false, 0, 2}), n);   // a field
    EXPECT_EQ(search::count_runs({d, width, false, 2, 6}), 1u);  // all zero
  }
}

TEST(whole_counts, ignore_a_partial_element) {
  bytes const d = {0, 0, 1, 1, 1, 1, 0};  // three u16 elements and a byte
  EXPECT_EQ(search::count_runs({d, 2}), 2u);
  EXPECT_EQ(search::count_runs({d, 2, true}), 1u);
  EXPECT_EQ(search::count_runs({d, 2, false, 8, 8}), 2u);
  EXPECT_EQ(search::count_runs({d, 2, false, 0, 1}), 2u);  // bits 0, 1, 1
}

}  // namespace
}  // namespace brevis::codec
