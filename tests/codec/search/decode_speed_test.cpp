// Measures the decode speeds in codec/search/decode_speed.cpp (run by hand:
// --gtest_also_run_disabled_tests --gtest_filter=*decode_speed*, Release).
// Each leaf is timed as view<u16>(leaf, raw), each operator as
// view<u16>(op(raw...), raw) less view<u16>(raw, raw), on 1 MiB chunks.
// It prints the table; timings are never asserted.

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/program.h"
#include "codec/leaves/rans_static.h"

namespace brevis::codec {
namespace {

bytes weights(size_t n, bool quantized, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.05f);
  bytes out(2 * n);
  for (size_t i = 0; i < n; ++i) {
    float f = g(rng);
    if (quantized) f = std::round(f * 400) / 400;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    store_le<uint16_t>(out.data() + 2 * i, static_cast<uint16_t>(u >> 16));
  }
  return out;
}

// Seconds per decode of `data` under `p`, best of a few runs.
double decode_seconds(node const& p, bytes const& data) {
  bytes payload;
  encode_chunk(p, data, payload);
  bytes out(data.size());
  double best = 1e9;
  for (int run = 0; run < 7; ++run) {
    auto const t0 = std::chrono::steady_clock::now();
    decode_chunk(p, payload, out.size(), out.data());
    best = std::min(best, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - t0)
                              .count());
  }
  EXPECT_TRUE(out == data);
  return best;
}

node view16(node inner) {
  return make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
                 {std::move(inner), make_leaf(opcode::raw)});
}
node view16u(node inner) {
  return make_op(opcode::view, {2, static_cast<uint64_t>(meaning::uint)},
                 {std::move(inner), make_leaf(opcode::raw)});
}

TEST(search, DISABLED_decode_speed) {
  size_t const n = 512 * 1024;  // 1 MiB of bf16
  bytes const w = weights(n, false, 1), q = weights(n, true, 2);
  double const mb = static_cast<double>(w.size()) / 1e6;
  double const base = decode_seconds(view16(make_leaf(opcode::raw)), w);
  auto leaf_row = [&](char const* name, node leaf, bytes const& d) {
    std::printf("%-12s %8.0f MB/s\n", name,
                mb / decode_seconds(view16(leaf), d));
  };
  auto op_row = [&](char const* name, node p, bytes const& d) {
    double const s = decode_seconds(p, d) - base;
    std::printf("%-12s %8.0f MB/s\n", name, s > 0 ? mb / s : 1e9);
  };
  node const raw = make_leaf(opcode::raw);
  leaf_row("raw", raw, w);
  leaf_row("rans0", make_leaf(opcode::rans0), w);
  leaf_row("rans1", make_leaf(opcode::rans1), w);
  leaf_row("zstd", make_leaf(opcode::zstd, {3}), w);
  leaf_row("rans_static",
           make_rans_static(stream{w, value_type{2, meaning::uint}}, 2), w);
  op_row("fields", view16(make_op(opcode::fields, {}, {raw, raw, raw})), w);
  op_row("planes", view16(make_op(opcode::planes, {}, {raw, raw})), w);
  op_row("delta", view16u(make_op(opcode::delta, {}, {raw})), w);
  op_row("xor_prev", view16u(make_op(opcode::xor_prev, {}, {raw})), w);
  op_row("xor_row", view16u(make_op(opcode::xor_row, {512}, {raw})), w);
  op_row("transpose", view16u(make_op(opcode::transpose, {512}, {raw})), w);
  op_row("palette", view16u(make_op(opcode::palette, {1}, {raw, raw})), q);
  op_row("runs", view16u(make_op(opcode::runs, {}, {raw, raw})), q);
  op_row("map", view16u(make_op(opcode::map, {0, 0}, {raw})), w);
  op_row("sparse", view16u(make_op(opcode::sparse, {}, {raw, raw})), q);
  op_row("bitfields", view16u(make_op(opcode::bitfields, {7, 9}, {raw, raw})),
         w);
  op_row("bitplanes",
         view16u(make_op(opcode::bitplanes, {},
                         std::vector<node>(16, make_leaf(opcode::raw)))),
         w);
  bytes periodic(w.size());
  for (size_t i = 0; i < periodic.size(); ++i) periodic[i] = w[i % 3000];
  op_row("repeat", view16u(make_op(opcode::repeat, {1500}, {raw})), periodic);
  bytes low(2 * w.size());  // fp32 upcast from bf16
  for (size_t i = 0; i < n; ++i) {
    store_le<uint32_t>(low.data() + 4 * i,
                       uint32_t{load_le<uint16_t>(w.data() + 2 * i)} << 16);
  }
  node const view32 =
      make_op(opcode::view, {4, static_cast<uint64_t>(meaning::fp32)},
              {make_op(opcode::low_zero, {16}, {raw}), make_leaf(opcode::raw)});
  double const s32 =
      decode_seconds(view32, low) -
      decode_seconds(
          make_op(opcode::view, {4, static_cast<uint64_t>(meaning::fp32)},
                  {raw, make_leaf(opcode::raw)}),
          low);
  std::printf("%-12s %8.0f MB/s\n", "low_zero",
              s32 > 0 ? static_cast<double>(low.size()) / 1e6 / s32 : 1e9);
}

}  // namespace
}  // namespace brevis::codec
