// The store's chooser gives every rans_static leaf the wide-lanes parameter
// (payloads of 2^12 symbols or more interleave 32 states); the CLI's
// chooser writes programs without it.
#include "codec/search/wide_lanes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/entropy/rans_static.h"
#include "codec/parse/region.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/generators.h"
#include "tests/codec/uses_op.h"

namespace brevis::codec {
namespace {

using testing::uses_op;

// The parameters of every rans_static leaf in `n`, appended to `out`.
void rans_static_params(node const& n,
                        std::vector<std::vector<uint64_t>>& out) {
  if (n.op == opcode::rans_static) out.push_back(n.params);
  for (node const& k : n.children) rans_static_params(k, out);
}

bytes gaussian_bf16(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 0.02f);
  bytes d;
  for (size_t i = 0; i < count; ++i)
    testing::append(d, testing::to_bf16(g(rng)));
  return d;
}

region tensor_region(size_t n) {
  return region{0, 2 * n, region_kind::tensor, dtype::bf16, {n}, "w"};
}

TEST(wide_lanes, store_chooser_sets_the_parameter_on_every_static_leaf) {
  for (size_t n : {size_t{20000}, size_t{60000}}) {
    bytes const data = gaussian_bf16(n, static_cast<uint32_t>(n));
    node const p = make_store_chooser()->choose(tensor_region(n), data);
    ASSERT_TRUE(uses_op(p, opcode::rans_static)) << program_text(p);
    std::vector<std::vector<uint64_t>> params;
    rans_static_params(p, params);
    for (auto const& q : params) {
      EXPECT_EQ(q, std::vector<uint64_t>{store_wide_lanes_log2})
          << program_text(p);
    }
    check_program(p);
    EXPECT_TRUE(roundtrips(p, data)) << program_text(p);
  }
}

TEST(wide_lanes, the_cli_chooser_writes_no_parameter) {
  bytes const data = gaussian_bf16(30000, 3);
  node const p = make_search_chooser()->choose(tensor_region(30000), data);
  std::vector<std::vector<uint64_t>> params;
  rans_static_params(p, params);
  ASSERT_FALSE(params.empty()) << program_text(p);
  for (auto const& q : params) EXPECT_TRUE(q.empty()) << program_text(p);
}

TEST(wide_lanes, the_default_clears_the_parameter) {
  node p =
      make_op(opcode::view, {2, 1},
              {make_leaf(opcode::rans_static, {12}), make_leaf(opcode::raw)});
  search::set_wide_lanes(p, rans_static::wide_from_log2);
  EXPECT_TRUE(p.children[0].params.empty());
  search::set_wide_lanes(p, 9);
  EXPECT_EQ(p.children[0].params, std::vector<uint64_t>{9});
  EXPECT_TRUE(p.children[1].params.empty());  // raw untouched
}

}  // namespace
}  // namespace brevis::codec
