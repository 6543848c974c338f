// The classes operator (codec/ops/classes.cpp): roundtrips over adversarial
// inputs at every width, stride, class count and map length; malformed
// nodes and child sizes; the chunk step; and the search proposing it for a
// tensor with per-column scales.
#include "codec/ops/classes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "codec/container/archive.h"
#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "codec/parse/region.h"
#include "codec/search/classes_candidate.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/error_code.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

using testing::adversarial;
using testing::code_of;
using testing::test_lengths;

node classes_node(uint64_t stride, uint64_t k, bytes map,
                  std::vector<node> kids = {}) {
  if (kids.empty()) kids.assign(k, make_leaf(opcode::raw));
  node n = make_op(opcode::classes, {stride, k}, std::move(kids));
  n.blob = std::move(map);
  return n;
}

node program(unsigned width, node cls) {
  node p = make_op(opcode::view, {width, static_cast<uint64_t>(meaning::uint)},
                   {std::move(cls), make_leaf(opcode::raw)});
  check_program(p);
  return p;
}

bytes map_of(size_t period, unsigned k, uint32_t seed) {
  std::mt19937 rng(seed);
  bytes m(period);
  for (auto& c : m) c = static_cast<uint8_t>(rng() % k);
  return m;
}

TEST(classes_test, roundtrips_every_adversarial_input) {
  struct shape {
    uint64_t stride;
    unsigned k;
    size_t period;
  };
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    for (shape s : {shape{1, 1, 1}, shape{1, 4, 7}, shape{3, 16, 5},
                    shape{1, 16, 96}, shape{17, 2, 1}}) {
      node const p = program(
          w, classes_node(s.stride, s.k, map_of(s.period, s.k, s.period)));
      node const coded = program(
          w, classes_node(s.stride, s.k, map_of(s.period, s.k, s.period),
                          std::vector<node>(s.k, make_leaf(opcode::rans0))));
      for (size_t len : test_lengths()) {
        for (auto const& a : adversarial(len, w)) {
          SCOPED_TRACE("w=" + std::to_string(w) + " k=" + std::to_string(s.k) +
                       " " + a.name + " n=" + std::to_string(len));
          ASSERT_TRUE(roundtrips(p, a.data));
          ASSERT_TRUE(roundtrips(coded, a.data));
        }
      }
    }
  }
}

TEST(classes_test, roundtrips_every_length_and_one_column) {
  std::mt19937 rng(5);
  bytes data(2 * 4100);
  for (auto& b : data) b = static_cast<uint8_t>(rng());
  node const cols = program(2, classes_node(1, 3, map_of(24, 3, 1)));
  node const rows = program(2, classes_node(24, 2, map_of(9, 2, 2)));
  node const one = program(2, classes_node(1, 1, bytes{0}));
  for (size_t len = 0; len <= 4099; ++len) {
    byte_view const in(data.data(), len);
    ASSERT_TRUE(roundtrips(cols, in)) << len;
    ASSERT_TRUE(roundtrips(rows, in)) << len;
    ASSERT_TRUE(roundtrips(one, in)) << len;
  }
}

TEST(classes_test, children_hold_each_class_in_order) {
  op_def const& op = *find_op(opcode::classes);
  node const n = classes_node(2, 2, bytes{1, 0, 0});
  bytes in(7);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint8_t>(i);
  std::vector<stream> out;
  bytes side;
  op.encode(n, stream{in, bytes_type}, out, side);
  ASSERT_EQ(out.size(), 2u);
  // classes by i / 2 mod 3: 1 1 0 0 0 0 | 1
  EXPECT_EQ(out[0].data, (bytes{2, 3, 4, 5}));
  EXPECT_EQ(out[1].data, (bytes{0, 1, 6}));
  EXPECT_TRUE(side.empty());
}

TEST(classes_test, rejects_malformed_nodes) {
  auto bad = [](node cls) {
    return code_of([&] { program(2, std::move(cls)); });
  };
  EXPECT_EQ(bad(classes_node(1, 2, bytes{})), errc::bad_program);
  EXPECT_EQ(bad(classes_node(0, 2, bytes{0, 1})), errc::bad_program);
  EXPECT_EQ(bad(classes_node(classes_max_stride + 1, 2, bytes{0, 1})),
            errc::bad_program);
  EXPECT_EQ(bad(classes_node(1, 2, bytes{0, 2})), errc::bad_program);
  EXPECT_EQ(bad(make_op(opcode::classes, {1}, {make_leaf(opcode::raw)})),
            errc::bad_program);
  node zero = make_op(opcode::classes, {1, 0}, {});
  zero.blob = {0};
  EXPECT_EQ(bad(zero), errc::bad_program);
  node many =
      make_op(opcode::classes, {1, classes_max_count + 1},
              std::vector<node>(classes_max_count + 1, make_leaf(opcode::raw)));
  many.blob = {0};
  EXPECT_EQ(bad(many), errc::bad_program);
  // A child count other than k.
  node fewer = make_op(opcode::classes, {1, 3}, {make_leaf(opcode::raw)});
  fewer.blob = {0, 1, 2};
  EXPECT_EQ(bad(fewer), errc::bad_program);
  // The largest class count and map byte are accepted.
  EXPECT_EQ(
      bad(classes_node(1, classes_max_count,
                       bytes{static_cast<uint8_t>(classes_max_count - 1)})),
      errc::ok);
}

TEST(classes_test, decode_rejects_children_of_the_wrong_size) {
  op_def const& op = *find_op(opcode::classes);
  node const n = classes_node(1, 2, bytes{0, 1});
  value_type const t{2, meaning::uint};
  bytes a(4), b(2);
  std::vector<stream> kids{stream{a, t}, stream{b, t}};
  bytes out(8);
  EXPECT_EQ(code_of([&] { op.decode(n, t, kids, 8, {}, out.data()); }),
            errc::corrupt);
  EXPECT_EQ(code_of([&] { op.decode(n, t, kids, 7, {}, out.data()); }),
            errc::corrupt);
  bytes c(4);
  kids[1] = stream{c, t};
  EXPECT_EQ(code_of([&] { op.decode(n, t, kids, 8, {}, out.data()); }),
            errc::ok);
}

TEST(classes_test, chunks_hold_whole_cycles) {
  node const p = program(2, classes_node(1, 2, map_of(96, 2, 3)));
  EXPECT_EQ(classes_cycle_elements(p), 96u);
  EXPECT_EQ(chunk_step(p, 2, 1u << 20), (1u << 20) / 192 * 192);
  EXPECT_EQ(chunk_step(make_leaf(opcode::raw), 2, 4097), 4096u);
  // A cycle longer than a chunk: element-aligned chunks.
  node const rows = program(2, classes_node(4096, 2, map_of(300, 2, 4)));
  EXPECT_EQ(chunk_step(rows, 2, 1u << 20), 1u << 20);
}

// bf16 weights rows x cols whose columns have scales spread over 2^-12..1.
bytes per_column_scales(size_t rows, size_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> scale(cols);
  for (auto& s : scale) s = std::ldexp(1.0f, -static_cast<int>(rng() % 12));
  bytes out;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < cols; ++j) {
      float const f = g(rng) * scale[j];
      uint32_t u;
      std::memcpy(&u, &f, 4);
      testing::append<uint16_t>(out, static_cast<uint16_t>(u >> 16));
    }
  }
  return out;
}

TEST(classes_test, search_picks_classes_for_per_column_scales) {
  size_t const rows = 288, cols = 192;
  bytes const data = per_column_scales(rows, cols, 11);
  region r;
  r.kind = region_kind::tensor;
  r.type = dtype::bf16;
  r.length = data.size();
  r.shape = {1, 1, rows, cols};
  r.name = "conv/weights";
  search_chooser_options so;
  so.classes = true;
  auto const chooser = make_search_chooser(so);
  node const p = chooser->choose(r, data);
  EXPECT_GT(classes_cycle_elements(p), 0u) << program_text(p);
  ASSERT_TRUE(roundtrips(p, data));
  bytes with;
  encode_chunk(p, data, with);
  // The same tensor as one column class: what a table per tensor codes.
  region flat = r;
  flat.shape = {rows * cols};
  node const plain = chooser->choose(flat, data);
  EXPECT_EQ(classes_cycle_elements(plain), 0u);
  bytes without;
  encode_chunk(plain, data, without);
  double const gain =
      static_cast<double>(without.size() + serialize_program(plain).size()) /
      static_cast<double>(with.size() + serialize_program(p).size());
  std::printf("classes: %zu -> %zu bytes (programs included: %.3fx)\n",
              without.size(), with.size(), gain);
  EXPECT_GT(gain, 1.05);
}

TEST(classes_test, not_proposed_for_vectors_or_small_tensors) {
  bytes const data = per_column_scales(16, 64, 3);
  region r;
  r.kind = region_kind::tensor;
  r.type = dtype::bf16;
  r.length = data.size();
  r.shape = {16 * 64};
  EXPECT_FALSE(search::classes_program(r, data, 1e18).has_value());
  r.shape = {16, 64};  // 1024 elements: too few
  EXPECT_FALSE(search::classes_program(r, data, 1e18).has_value());
}

}  // namespace
}  // namespace brevis::codec
