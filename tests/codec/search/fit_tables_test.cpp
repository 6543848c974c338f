// fit_static_tables counts each chunk's values in place (slices of the
// region, operators reading their input where it lies): its tables must be
// those of a plain encode of every chunk, copied into streams, and every
// chunk must then encode.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/entropy/rans_static.h"
#include "codec/leaves/rans_static.h"
#include "codec/search/astar.h"

namespace brevis::codec {
namespace {

// The reference count: every operator encodes a copy of its input.
void count_by_copies(node const& n, stream const& in,
                     std::vector<std::vector<uint64_t>>& hists, size_t& next) {
  if (is_leaf(n.op)) {
    if (n.op != opcode::rans_static || !n.blob.empty()) return;
    std::vector<uint64_t> h;
    rans_static::histogram(in.data, in.type.width, h);
    std::vector<uint64_t>& acc = hists[next++];
    if (acc.empty()) acc.assign(h.size(), 0);
    for (size_t i = 0; i < h.size(); ++i) acc[i] += h[i];
    return;
  }
  std::vector<stream> kids;
  bytes side;
  op_for(n.op).encode(n, in, kids, side);
  for (size_t i = 0; i < kids.size(); ++i) {
    count_by_copies(n.children[i], kids[i], hists, next);
  }
}

size_t empty_tables(node const& n) {
  size_t c = n.op == opcode::rans_static && n.blob.empty();
  for (node const& k : n.children) c += empty_tables(k);
  return c;
}

void fill_reference(node& n, std::vector<std::vector<uint64_t>>& hists,
                    size_t& next) {
  if (n.op == opcode::rans_static && n.blob.empty()) {
    std::vector<uint64_t> const& h = hists[next++];
    uint64_t total = 0;
    for (uint64_t c : h) total += c;
    if (total == 0) {
      n = make_leaf(opcode::rans0);
    } else {
      n.blob = serialize_rans_static_table(choose_rans_static_table(h));
    }
    return;
  }
  for (node& k : n.children) fill_reference(k, hists, next);
}

node reference_fit(node program, bytes const& data, size_t step) {
  std::vector<std::vector<uint64_t>> hists(empty_tables(program));
  for (size_t off = 0; off < data.size(); off += step) {
    size_t const len = std::min(step, data.size() - off);
    stream chunk{bytes(data.begin() + off, data.begin() + off + len),
                 bytes_type};
    size_t next = 0;
    count_by_copies(program, chunk, hists, next);
  }
  size_t next = 0;
  fill_reference(program, hists, next);
  return program;
}

// fp32 weights of a few exponents, some zero, then `tail` odd bytes.
bytes weights(size_t n, size_t tail, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> w(0, 0.05f);
  std::bernoulli_distribution zero(0.3);
  bytes d(n * 4);
  for (size_t i = 0; i < n; ++i) {
    float const f = zero(rng) ? 0.0f : w(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    store_le<uint32_t>(d.data() + 4 * i, u);
  }
  for (size_t i = 0; i < tail; ++i) d.push_back(static_cast<uint8_t>(3 * i));
  return d;
}

node fp32_view(node elements) {
  return make_op(opcode::view, {4, static_cast<uint64_t>(meaning::fp32)},
                 {std::move(elements), make_leaf(opcode::rans_static)});
}

TEST(fit_static_tables, tables_match_a_plain_encode_of_every_chunk) {
  node const st = make_leaf(opcode::rans_static);
  std::vector<node> const programs = {
      // 8-bit leaves under planes, the tail's bytes too.
      fp32_view(make_op(opcode::planes, {}, {st, st, st, st})),
      // 16-bit leaves.
      fp32_view(make_op(opcode::bitfields, {16, 16}, {st, st})),
      // A leaf whose values need no table, and tables below a copy.
      fp32_view(make_op(opcode::planes, {},
                        {make_leaf(opcode::raw), make_leaf(opcode::rans0), st,
                         make_leaf(opcode::raw)})),
      // Concatenating operators hand their children slices.
      make_op(opcode::split, {1000},
              {st, fp32_view(make_op(opcode::bitfields, {16, 16},
                                     {st, make_leaf(opcode::raw)}))}),
  };
  for (size_t tail : {size_t{0}, size_t{3}}) {
    bytes const d = weights(5000, tail, 11);
    for (uint32_t chunk : {4096u, 1u << 20}) {
      for (node const& p : programs) {
        node fitted = p;
        search::fit_static_tables(fitted, d, chunk);
        node const want =
            reference_fit(p, d, std::max<size_t>(4, chunk / 4 * 4));
        EXPECT_TRUE(fitted == want) << program_text(p) << " chunk " << chunk;
        EXPECT_EQ(empty_tables(fitted), 0u) << program_text(fitted);
        for (size_t off = 0; off < d.size(); off += chunk) {
          size_t const len = std::min<size_t>(chunk, d.size() - off);
          EXPECT_TRUE(roundtrips(fitted, byte_view(d).subspan(off, len)))
              << program_text(fitted) << " at " << off;
        }
      }
    }
  }
}

}  // namespace
}  // namespace brevis::codec
