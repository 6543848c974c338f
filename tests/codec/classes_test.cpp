// The classes operator (codec/ops/classes.cpp): roundtrips over adversarial
// inputs at every width, stride, class count and map length; malformed
// nodes and child sizes; the chunk step; and the search proposing it for a
// tensor with per-column scales.
#include "codec/ops/classes.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "codec/choose/histogram.h"
#include "codec/container/archive.h"
#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "codec/leaves/rans_static.h"
#include "codec/parse/region.h"
#include "codec/search/astar.h"
#include "codec/search/classes_candidate.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/error_code.h"
#include "tests/codec/generators.h"
#include "tests/codec/uses_op.h"

namespace brevis::codec {
namespace {

// A tensor region of `type` and `shape` over all of `data`.
region tensor_region(dtype type, bytes const& data,
                     std::vector<uint64_t> shape) {
  region r;
  r.kind = region_kind::tensor;
  r.type = type;
  r.length = data.size();
  r.shape = std::move(shape);
  return r;
}

using testing::adversarial;
using testing::code_of;
using testing::test_lengths;
using testing::uses_op;

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
  region r = tensor_region(dtype::bf16, data, {1, 1, rows, cols});
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

// Bytes of `p`'s chunk of `data`, the program included.
size_t coded_size(node const& p, byte_view data) {
  bytes payload;
  encode_chunk(p, data, payload);
  return payload.size() + serialize_program(p).size();
}

// Pruned bf16 weights rows x 112, `zeros` of them zero, whose columns
// alternate between two scales.
region pruned_two_scales(size_t rows, double zeros, bytes& data) {
  size_t const cols = 112;
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0, 1);
  std::bernoulli_distribution zero(zeros);
  data.clear();
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < cols; ++j) {
      float const f = zero(rng) ? 0.0f : g(rng) * (j % 2 ? 0.5f : 0.002f);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      testing::append<uint16_t>(data, static_cast<uint16_t>(u >> 16));
    }
  }
  region r = tensor_region(dtype::bf16, data, {rows, cols});
  r.name = "pruned/weights";
  return r;
}

// The search's best program for `r` without the classes.
node searched_without_classes(region const& r, byte_view data) {
  search_chooser_options so;
  so.classes = false;
  return make_search_chooser(so)->choose(r, data);
}

// Pruned weights (30% zeros, and 38% of a taller tensor): the search's
// best program is sparse, which the classes cannot extend (they replace a
// table of the elements); they are tried on the tensor's plain table
// instead (fewer than half the elements are zero) and code it smaller than
// sparse (handlandmark-lite.bf16's Conv2D_29: 88,783 B sparse, 86,844 B
// classes).
TEST(classes_test, candidate_beats_a_sparse_program_from_the_plain_table) {
  struct pruned {
    size_t rows;
    double zeros;
  };
  for (pruned const t : {pruned{672, 0.3}, pruned{2048, 0.38}}) {
    SCOPED_TRACE(t.zeros);
    bytes data;
    region const r = pruned_two_scales(t.rows, t.zeros, data);
    node const searched = searched_without_classes(r, data);
    ASSERT_TRUE(uses_op(searched, opcode::sparse)) << program_text(searched);
    search_chooser_options so;
    node const p = make_search_chooser(so)->choose(r, data);
    EXPECT_GT(classes_cycle_elements(p), 0u) << program_text(p);
    ASSERT_TRUE(roundtrips(p, data));
    bytes with, without;
    encode_chunk(p, data, with);
    encode_chunk(searched, data, without);
    EXPECT_LT(with.size() + serialize_program(p).size(),
              without.size() + serialize_program(searched).size());
  }
}

// A program the classes replace keeps the search's expansions in its
// record: the search spent them (the ablation counts them).
TEST(classes_test, candidate_keeps_the_search_expansions) {
  bytes data;
  region const r = pruned_two_scales(672, 0.3, data);
  search_chooser_options so;
  auto const chooser = make_search_chooser(so);
  node p;
  choice_record how;
  ASSERT_TRUE(chooser->choose_recorded(r, data, p, how));
  EXPECT_GT(classes_cycle_elements(p), 0u) << program_text(p);
  EXPECT_GT(how.expansions, 0u);
}

// Past half the elements zero the plain table is not tried (its histogram
// and fit cost CPU where sparse's mask wins: handlandmark-sparse.bf16): the
// tensor with 60% zeros keeps the search's sparse program, though the
// classes on the plain table would code this one 4% smaller (153,500 B,
// sparse 160,581 B).
TEST(classes_test, sparse_program_of_a_heavily_pruned_tensor_is_kept) {
  bytes data;
  region const r = pruned_two_scales(2048, 0.6, data);
  node const searched = searched_without_classes(r, data);
  ASSERT_TRUE(uses_op(searched, opcode::sparse)) << program_text(searched);
  search_chooser_options so;
  node const p = make_search_chooser(so)->choose(r, data);
  EXPECT_EQ(classes_cycle_elements(p), 0u) << program_text(p);
  EXPECT_EQ(serialize_program(p), serialize_program(searched))
      << program_text(p);
  ASSERT_TRUE(roundtrips(p, data));
  // What the skipped retry would have found: the classes on the plain
  // table, as the chooser builds it, against the sparse program.
  node plain =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_leaf(opcode::rans_static), make_leaf(opcode::raw)});
  search::fit_tables_from_histogram(plain, sparse_histogram(data),
                                    meaning::bf16);
  size_t const sparse_bytes = coded_size(searched, data);
  auto const retried = search::classes_program(
      r, data, plain, static_cast<double>(sparse_bytes));
  ASSERT_TRUE(retried.has_value());
  ASSERT_TRUE(roundtrips(retried->program, data));
  EXPECT_LT(coded_size(retried->program, data), sparse_bytes);
}

// The classes extend a sparse program by replacing it whole, zeros and
// all: with 60% zeros the classes' entropy on a sample of rows already
// misses the gain (the pass over the tensor is skipped) and no classes
// program comes back; with 12% zeros and scales 250x apart the sample
// leaves room and the classes code it smaller than sparse.
TEST(classes_test, candidate_over_a_sparse_program_checks_its_sample_first) {
  struct pruned {
    double zeros;
    bool wins;
  };
  for (pruned const t : {pruned{0.6, false}, pruned{0.12, true}}) {
    SCOPED_TRACE(t.zeros);
    bytes data;
    region const r = pruned_two_scales(2048, t.zeros, data);
    node const searched = searched_without_classes(r, data);
    ASSERT_TRUE(uses_op(searched, opcode::sparse)) << program_text(searched);
    size_t const sparse_bytes = coded_size(searched, data);
    auto const c = search::classes_program(r, data, searched,
                                           static_cast<double>(sparse_bytes));
    ASSERT_EQ(c.has_value(), t.wins);
    if (!c) continue;
    ASSERT_TRUE(roundtrips(c->program, data));
    EXPECT_LT(coded_size(c->program, data), sparse_bytes);
  }
}

// 16-bit weights rows x cols (bf16, or fp16 with `fp16`) whose columns, or
// rows with `by_rows`, have scales spread over 2^-12..1 (fp16: 2^-8..1).
bytes channel_scales(size_t rows, size_t cols, bool fp16, bool by_rows,
                     uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0, 1);
  std::vector<float> scale(by_rows ? rows : cols);
  for (auto& s : scale) {
    s = std::ldexp(1.0f, -static_cast<int>(rng() % (fp16 ? 8 : 12)));
  }
  bytes out;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < cols; ++j) {
      float const f = g(rng) * scale[by_rows ? r : j];
      if (fp16) {
        testing::append<uint16_t>(out, testing::to_fp16(f));
      } else {
        uint32_t u;
        std::memcpy(&u, &f, 4);
        testing::append<uint16_t>(out, static_cast<uint16_t>(u >> 16));
      }
    }
  }
  return out;
}

// Every shape the closed form gives a 16-bit float tensor (closed_form.h):
// the classes code its exponent field (the elements whole become
// bitfields), by columns and by rows, for bf16 and fp16; each roundtrips and
// codes smaller than the program it came from.
TEST(classes_test, candidate_classes_the_exponent_of_every_program_shape) {
  for (bool const fp16 : {false, true}) {
    meaning const m = fp16 ? meaning::fp16 : meaning::bf16;
    uint64_t const mbits = fp16 ? 10 : 7;
    auto view = [&](node inner) {
      return make_op(opcode::view, {2, static_cast<uint64_t>(m)},
                     {std::move(inner), make_leaf(opcode::raw)});
    };
    auto r0 = [] { return make_leaf(opcode::rans0); };
    std::vector<node> const shapes = {
        view(r0()),
        view(make_op(opcode::bitfields, {mbits, 16 - mbits}, {r0(), r0()})),
        view(make_op(opcode::fields, {}, {r0(), r0(), r0()})),
        view(make_op(opcode::planes, {}, {r0(), r0()})),
    };
    for (bool const by_rows : {false, true}) {
      size_t const rows = 256, cols = 128;
      bytes const data = channel_scales(rows, cols, fp16, by_rows, 5);
      region r =
          tensor_region(fp16 ? dtype::f16 : dtype::bf16, data, {rows, cols});
      for (node const& inner : shapes) {
        SCOPED_TRACE(program_text(inner) + (by_rows ? " by rows" : ""));
        check_program(inner);
        size_t const before = coded_size(inner, data);
        auto const c = search::classes_program(r, data, inner,
                                               static_cast<double>(before));
        ASSERT_TRUE(c.has_value());
        EXPECT_EQ(c->rows, by_rows);
        check_program(c->program);
        EXPECT_EQ(classes_cycle_elements(c->program),
                  by_rows ? rows * cols : cols);
        ASSERT_TRUE(roundtrips(c->program, data)) << program_text(c->program);
        size_t const after = coded_size(c->program, data);
        std::printf("%s %s: %zu -> %zu\n", program_text(inner).c_str(),
                    by_rows ? "rows" : "columns", before, after);
        EXPECT_LT(after, before);
      }
    }
  }
}

// The estimate counts framing per archive chunk: in chunks of 256 KiB, a
// 2 MiB tensor's elements leaf is 8 wide payloads of 32 states, not the 2
// of chunks of 1 MiB, while each class's field (a quarter of a chunk's
// elements) stays narrow; so the classes gain more, and are estimated
// smaller, than with the chunks taken for 1 MiB.
TEST(classes_test, estimate_counts_the_archives_chunks) {
  node program =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_leaf(opcode::rans_static), make_leaf(opcode::raw)});
  size_t const rows = 1024, cols = 1024;
  bytes const data = channel_scales(rows, cols, false, false, 9);
  region const r = tensor_region(dtype::bf16, data, {rows, cols});
  search::fit_tables_from_histogram(program, sparse_histogram(data),
                                    meaning::bf16);
  double const before = static_cast<double>(coded_size(program, data));
  auto const two = search::classes_program(r, data, program, before);
  auto const eight =
      search::classes_program(r, data, program, before, 256 * 1024);
  ASSERT_TRUE(two.has_value());
  ASSERT_TRUE(eight.has_value());
  EXPECT_LT(eight->estimated_bytes, two->estimated_bytes - 6 * 32);
}

// The chooser finds the channels' classes once for both of its tries:
// given them, the candidate is the one it finds by itself; a grouping that
// does not fit the tensor is turned away.
TEST(classes_test, candidate_from_given_classes_is_the_one_found_alone) {
  for (bool const fp16 : {false, true}) {
    meaning const m = fp16 ? meaning::fp16 : meaning::bf16;
    node const inner =
        make_op(opcode::view, {2, static_cast<uint64_t>(m)},
                {make_leaf(opcode::rans0), make_leaf(opcode::raw)});
    for (bool const by_rows : {false, true}) {
      size_t const rows = 256, cols = 128;
      bytes const data = channel_scales(rows, cols, fp16, by_rows, 9);
      region r =
          tensor_region(fp16 ? dtype::f16 : dtype::bf16, data, {rows, cols});
      double const before = static_cast<double>(coded_size(inner, data));
      auto const grouping = search::channel_classes_of(r, data, before);
      ASSERT_TRUE(grouping.has_value());
      EXPECT_EQ(grouping->rows, by_rows);
      EXPECT_EQ(grouping->map.size(), by_rows ? rows : cols);
      auto const alone = search::classes_program(r, data, inner, before);
      auto const given =
          search::classes_program(r, data, inner, before, *grouping);
      ASSERT_TRUE(alone.has_value());
      ASSERT_TRUE(given.has_value());
      EXPECT_EQ(program_text(given->program), program_text(alone->program));
      EXPECT_EQ(serialize_program(given->program),
                serialize_program(alone->program));
      EXPECT_EQ(given->estimated_bytes, alone->estimated_bytes);
      EXPECT_EQ(given->rows, alone->rows);

      search::channel_classes bad = *grouping;
      bad.map.pop_back();  // one channel short
      EXPECT_FALSE(search::classes_program(r, data, inner, before, bad));
      bad = *grouping;
      bad.map[0] = static_cast<uint8_t>(bad.k);  // a class past k
      EXPECT_FALSE(search::classes_program(r, data, inner, before, bad));
      bad = *grouping;
      bad.k = 1;
      std::fill(bad.map.begin(), bad.map.end(), 0);
      EXPECT_FALSE(search::classes_program(r, data, inner, before, bad));
    }
  }
  // No classes for what the candidate does not take.
  bytes const vector_data(2 * 8192, 0x3F);
  EXPECT_FALSE(search::channel_classes_of(
      tensor_region(dtype::bf16, vector_data, {8192}), vector_data, 1e6));
}

// A program other than bitfields (zstd, a palette...) is replaced whole:
// by bitfields over classes, or classes each with bitfields of its own
// where the classes' mantissas differ (here: one class of bf16 values with
// their low mantissa bits cleared, as quantized weights have them).
TEST(classes_test, candidate_replaces_other_programs_whole) {
  size_t const rows = 256, cols = 128;
  bytes data = channel_scales(rows, cols, false, false, 6);
  // Every 4th column: scale 1, 3 mantissa bits (the others' scales are
  // 2^-12..1: most fall in other classes).
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0, 1);
  for (size_t i = 0; i < rows * cols; i += 4) {
    float const f = g(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    store_le<uint16_t>(&data[2 * i], static_cast<uint16_t>(u >> 16) & 0xFFF0);
  }
  region r = tensor_region(dtype::bf16, data, {rows, cols});
  node const zstd =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_op(opcode::zstd, {3}, {}), make_leaf(opcode::raw)});
  for (node const& inner : {zstd, make_leaf(opcode::raw)}) {
    auto const c = search::classes_program(r, data, inner,
                                           static_cast<double>(data.size()));
    ASSERT_TRUE(c.has_value());
    check_program(c->program);
    EXPECT_EQ(classes_cycle_elements(c->program), cols);
    EXPECT_TRUE(roundtrips(c->program, data)) << program_text(c->program);
    // classes(bitfields(...), ...): a mantissa table a class.
    EXPECT_EQ(c->program.children[0].op, opcode::classes)
        << program_text(c->program);
    EXPECT_FALSE(c->keeps_inner_tables);
  }
}

// Quantized weights: few values, each class of rows or columns using its
// own 32 (of scales 2^0 and 2^-6). Coded by one table of the elements, the
// candidate gives each class a table of its own.
void expect_own_tables(size_t rows, size_t cols, bool by_rows, uint32_t seed) {
  std::mt19937 rng(seed);
  bytes data;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < cols; ++j) {
      // Classes of rows that a sample of every 4th row sees both of.
      bool const fine = by_rows ? r % 3 == 0 : j % 2 == 0;
      float const f =
          std::ldexp(static_cast<float>(rng() % 32) - 15.5f, fine ? -4 : -10);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      testing::append<uint16_t>(data, static_cast<uint16_t>(u >> 16));
    }
  }
  region r = tensor_region(dtype::bf16, data, {rows, cols});
  node const inner =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_rans_static(stream{data, {2, meaning::bf16}}, 2),
               make_leaf(opcode::raw)});
  size_t const before = coded_size(inner, data);
  auto const c =
      search::classes_program(r, data, inner, static_cast<double>(before));
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->rows, by_rows);
  check_program(c->program);
  node const& cls = c->program.children[0];
  ASSERT_EQ(cls.op, opcode::classes) << program_text(c->program);
  for (node const& kid : cls.children) {
    EXPECT_EQ(kid.op, opcode::rans_static) << program_text(c->program);
  }
  // Its tables are built from counts of its own: the inner table is not
  // the coders' input.
  EXPECT_FALSE(c->keeps_inner_tables);
  ASSERT_TRUE(roundtrips(c->program, data));
  EXPECT_LT(coded_size(c->program, data), before);
}

// The own tables are costed on every row, or on a sample of every step-th
// row first (step = elements / 2^15, at most rows / 8, and steps below 4
// count every row instead): 256x128 (step 1, every row) and 1024x128
// (step 4, sampled) by columns.
TEST(classes_test, candidate_gives_few_valued_classes_tables_of_their_own) {
  for (size_t const rows : {256, 1024}) {
    SCOPED_TRACE(rows);
    expect_own_tables(rows, 128, false, 9);
  }
}

// The same by rows and by columns, in shapes that leave tails (rows not a
// multiple of the four counted side by side, odd columns): 257x127 has
// step 1 (every row), 1031x127 step 3 (counted whole instead) and 1031x129
// step 4 (sampled every 4th row).
TEST(classes_test, candidate_gives_own_tables_by_rows_and_columns_with_tails) {
  struct shape {
    size_t rows, cols;
  };
  for (bool const by_rows : {false, true}) {
    for (shape const s :
         {shape{257, 127}, shape{1031, 127}, shape{1031, 129}}) {
      SCOPED_TRACE(std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                   (by_rows ? " by rows" : ""));
      expect_own_tables(s.rows, s.cols, by_rows, 11);
    }
  }
}

// A program of one table of the elements, over a tensor whose every row is
// counted at once (256x128: step 1): the classes' field counts follow from
// the pass counting each class's elements, with no pass of their own. The
// classes' tables hold every value they code, and code smaller.
TEST(classes_test, candidate_over_a_table_of_the_elements_counts_once) {
  for (bool const fp16 : {false, true}) {
    meaning const m = fp16 ? meaning::fp16 : meaning::bf16;
    for (bool const by_rows : {false, true}) {
      SCOPED_TRACE(std::string(fp16 ? "fp16" : "bf16") +
                   (by_rows ? " by rows" : " by columns"));
      size_t const rows = 256, cols = 128;
      bytes const data = channel_scales(rows, cols, fp16, by_rows, 13);
      region r =
          tensor_region(fp16 ? dtype::f16 : dtype::bf16, data, {rows, cols});
      node const inner = make_op(
          opcode::view, {2, static_cast<uint64_t>(m)},
          {make_rans_static(stream{data, {2, m}}, 2), make_leaf(opcode::raw)});
      size_t const before = coded_size(inner, data);
      auto const c =
          search::classes_program(r, data, inner, static_cast<double>(before));
      ASSERT_TRUE(c.has_value());
      EXPECT_EQ(c->rows, by_rows);
      check_program(c->program);
      ASSERT_TRUE(roundtrips(c->program, data)) << program_text(c->program);
      EXPECT_LT(coded_size(c->program, data), before);
    }
  }
}

// Elements the inner program's table lacks (its table from other bytes: an
// inner program that does not code the tensor) get no class a table of
// its own, which would lack them too: the field counts come from a pass
// of their own, and the classes' program codes every element.
TEST(classes_test, candidate_gives_no_own_tables_for_values_outside_the_table) {
  size_t const rows = 256, cols = 128;
  std::mt19937 rng(9);
  bytes data;
  for (size_t r = 0; r < rows; ++r) {
    for (size_t j = 0; j < cols; ++j) {
      float const f = std::ldexp(static_cast<float>(rng() % 32) - 15.5f,
                                 j % 2 == 0 ? -4 : -10);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      testing::append<uint16_t>(data, static_cast<uint16_t>(u >> 16));
    }
  }
  region r = tensor_region(dtype::bf16, data, {rows, cols});
  node const inner =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_rans_static(stream{data, {2, meaning::bf16}}, 2),
               make_leaf(opcode::raw)});
  // 1.0 and -2.0: no value of the quantized grid (|values| < 1).
  bytes changed = data;
  store_le<uint16_t>(&changed[2 * 5], 0x3F80);
  store_le<uint16_t>(&changed[2 * (rows * cols / 2 + 3)], 0xC000);
  // Against the raw bytes: a gain for any shape of the classes.
  auto const c = search::classes_program(r, changed, inner,
                                         static_cast<double>(changed.size()));
  ASSERT_TRUE(c.has_value());
  check_program(c->program);
  ASSERT_TRUE(roundtrips(c->program, changed)) << program_text(c->program);
  // A class's own table is a child of the classes under the view (under
  // bitfields, the classes' children code the sign and exponent).
  node const& top = c->program.children[0];
  if (top.op == opcode::classes) {
    for (node const& kid : top.children) {
      EXPECT_NE(kid.op, opcode::rans_static) << program_text(c->program);
    }
  }
}

// The default chooser codes fp16 weights with per-column scales by classes.
TEST(classes_test, search_picks_classes_for_fp16_per_column_scales) {
  size_t const rows = 288, cols = 192;
  bytes const data = channel_scales(rows, cols, true, false, 12);
  region r = tensor_region(dtype::f16, data, {1, 1, rows, cols});
  search_chooser_options so;
  auto const chooser = make_search_chooser(so);
  node const p = chooser->choose(r, data);
  EXPECT_EQ(classes_cycle_elements(p), cols) << program_text(p);
  ASSERT_TRUE(roundtrips(p, data));
}

TEST(classes_test, not_proposed_for_vectors_or_small_tensors) {
  bytes const data = per_column_scales(16, 64, 3);
  region r = tensor_region(dtype::bf16, data, {16 * 64});
  EXPECT_FALSE(search::classes_program(r, data, node{}, 1e18).has_value());
  r.shape = {16, 64};  // 1024 elements: too few
  EXPECT_FALSE(search::classes_program(r, data, node{}, 1e18).has_value());
}

}  // namespace
}  // namespace brevis::codec
