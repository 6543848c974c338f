// A sibling's program (the seed) that replays on a region with the
// statistics it was searched on is kept without a search, unless a program
// on its own path -- one of its values closed by that value's best leaf
// instead of expanded -- codes the region smaller.

#include <gtest/gtest.h>

#include <cstring>
#include <optional>
#include <random>

#include "codec/choose/histogram.h"
#include "codec/search/astar.h"
#include "tests/codec/uses_op.h"

namespace brevis::codec::search {
namespace {

using testing::uses_op;

// bf16 weights of 4 significant bits (a few hundred values): their byte
// planes share the exponent's low bit, which their own table codes once.
bytes rounded_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.05f);
  bytes out(2 * n);
  for (size_t i = 0; i < n; ++i) {
    float const f = g(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    u &= 0xfff00000u;
    out[2 * i] = static_cast<uint8_t>(u >> 16);
    out[2 * i + 1] = static_cast<uint8_t>(u >> 24);
  }
  return out;
}

node planes_program(opcode low, opcode high) {
  return make_op(
      opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
      {make_op(opcode::planes, {}, {make_leaf(low), make_leaf(high)}),
       make_leaf(opcode::raw)});
}

TEST(seed_replay, a_seed_beaten_on_its_own_path_is_searched) {
  size_t const n = 64 * 1024;
  bytes const data = rounded_bf16(n, 5);
  region const r{0, data.size(), region_kind::tensor, dtype::bf16, {n}, "w"};
  sparse_hist const h = sparse_histogram(data);
  region_input const in{r, data, nullptr, &h};
  prior const uniform;
  // The byte planes, closed by their best leaves (found by trying): a
  // seed that replays here, the region's own table one step up its path.
  search_options checked;
  checked.trust_seed = false;
  std::optional<node> seed;
  search_result replayed;
  opcode const leaves[] = {opcode::raw, opcode::rans0, opcode::rans_static};
  for (opcode lo : leaves) {
    for (opcode hi : leaves) {
      node const p = planes_program(lo, hi);
      search_result res = find_program(in, uniform, checked, &p, 1e9);
      if (!seed && uses_op(res.program, opcode::planes)) {
        seed = p;
        replayed = std::move(res);
      }
    }
  }
  ASSERT_TRUE(seed.has_value());
  // Its decisions on this region: the same statistics, so it would be
  // trusted but for the program on its path.
  search_options trusting;
  search_result const res =
      find_program(in, uniform, trusting, &*seed, 0.01, replayed.decisions);
  EXPECT_FALSE(uses_op(res.program, opcode::planes))
      << program_text(res.program);
  EXPECT_LT(res.estimated_bytes, replayed.estimated_bytes);
}

}  // namespace
}  // namespace brevis::codec::search
