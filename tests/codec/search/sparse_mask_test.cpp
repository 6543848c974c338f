// sparse's mask bytes counted without its encode, and the tables of sparse
// programs fitted from the region's histogram: the same as the pass over
// the region's chunks (fit_static_tables) gives.
#include "codec/search/sparse_mask.h"

#include <gtest/gtest.h>

#include <random>

#include "codec/choose/histogram.h"
#include "codec/dsl/operator.h"
#include "codec/search/astar.h"

namespace brevis::codec {
namespace {

// 16-bit elements, each zero with probability `zeros`, then `extra` bytes.
bytes elements(size_t n, double zeros, size_t extra, uint32_t seed) {
  std::mt19937 rng(seed);
  std::bernoulli_distribution zero(zeros);
  std::uniform_int_distribution<int> value(1, 700);
  bytes d;
  for (size_t i = 0; i < n; ++i) {
    uint16_t const v =
        zero(rng) ? 0 : static_cast<uint16_t>(0x3c00 + value(rng));
    d.push_back(static_cast<uint8_t>(v)),
        d.push_back(static_cast<uint8_t>(v >> 8));
  }
  for (size_t i = 0; i < extra; ++i) d.push_back(static_cast<uint8_t>(i + 1));
  return d;
}

// The mask bytes' histogram as the sparse operator writes them, chunk by
// chunk.
std::array<uint64_t, 256> encoded_mask_histogram(bytes const& d,
                                                 size_t chunk_elements) {
  std::array<uint64_t, 256> h{};
  value_type const u16{2, meaning::uint};
  size_t const n = d.size() / 2;
  for (size_t start = 0; start < n; start += chunk_elements) {
    size_t const count = std::min(chunk_elements, n - start);
    stream in{bytes(d.begin() + 2 * start, d.begin() + 2 * (start + count)),
              u16};
    std::vector<stream> kids;
    bytes side;
    op_for(opcode::sparse)
        .encode(make_op(opcode::sparse, {}, {}), in, kids, side);
    for (uint8_t b : kids.at(0).data) ++h[b];
  }
  return h;
}

TEST(sparse_mask, histogram_matches_the_operators_masks) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9},
                   size_t{1000}, size_t{4099}}) {
    for (double zeros : {0.0, 0.3, 0.9, 1.0}) {
      for (size_t chunk :
           {size_t{8}, size_t{13}, size_t{512}, size_t{1} << 19}) {
        for (size_t extra : {size_t{0}, size_t{1}}) {
          bytes const d = elements(n, zeros, extra, static_cast<uint32_t>(n));
          EXPECT_EQ(search::sparse_mask_histogram16(d, chunk),
                    encoded_mask_histogram(d, chunk))
              << n << " elements, zeros " << zeros << ", chunk " << chunk;
        }
      }
    }
  }
}

// view:2:bf16(sparse(mask, values), raw)
node sparse_program(node mask, node values) {
  return make_op(
      opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
      {make_op(opcode::sparse, {}, {std::move(mask), std::move(values)}),
       make_leaf(opcode::raw)});
}

TEST(sparse_mask, tables_from_the_histogram_equal_the_pass_over_chunks) {
  uint32_t const chunk_size = 4096;  // several chunks, the last shorter
  for (double zeros : {0.2, 0.7}) {
    for (size_t extra : {size_t{0}, size_t{1}}) {
      bytes const d = elements(9000, zeros, extra, 7);
      sparse_hist const h = sparse_histogram(d);
      std::vector<node> const programs = {
          sparse_program(make_leaf(opcode::rans_static),
                         make_leaf(opcode::rans_static)),
          sparse_program(make_leaf(opcode::raw),
                         make_leaf(opcode::rans_static)),
          sparse_program(make_leaf(opcode::rans_static),
                         make_leaf(opcode::rans0)),
          sparse_program(make_leaf(opcode::rans_static),
                         make_op(opcode::planes, {},
                                 {make_leaf(opcode::rans_static),
                                  make_leaf(opcode::rans_static)})),
      };
      for (node const& p : programs) {
        node from_histogram = p;
        search::fit_tables_from_histogram(from_histogram, h, meaning::bf16, d,
                                          chunk_size);
        node from_pass = p;
        search::fit_static_tables(from_pass, d, chunk_size);
        EXPECT_EQ(program_text(from_histogram), program_text(from_pass));
        EXPECT_TRUE(from_histogram == from_pass) << program_text(p);
        // Nothing left for the pass.
        node again = from_histogram;
        search::fit_static_tables(again, d, chunk_size);
        EXPECT_TRUE(again == from_histogram);
      }
    }
  }
}

}  // namespace
}  // namespace brevis::codec
