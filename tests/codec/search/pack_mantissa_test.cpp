// The store's chooser packs the mantissa of bf16 tensors whose mantissa is
// close to uniform (the bits leaf), and keeps an entropy coder where it is
// not; the CLI's chooser never packs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/parse/region.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/uses_op.h"

namespace brevis::codec {
namespace {

using testing::uses_op;

// Gaussian bf16 values at scales spread over 2^-24..1: many exponents (so
// the elements' own table costs more than the fields'), a nearly uniform
// 7-bit mantissa. With `six_bits`, the mantissa takes
// 64 values only (6 bits of entropy: packing it would cost 1 bit an element).
bytes planted_bf16(size_t n, bool six_bits, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::uniform_int_distribution<int> scale(-24, 0);
  bytes out(2 * n);
  for (size_t i = 0; i < n; ++i) {
    float const f = std::ldexp(g(rng), scale(rng));
    uint32_t u;
    std::memcpy(&u, &f, 4);
    auto v = static_cast<uint16_t>(u >> 16);
    if (six_bits) v = static_cast<uint16_t>((v & ~0x7fu) | rng() % 64);
    store_le<uint16_t>(out.data() + 2 * i, v);
  }
  return out;
}

region tensor_region(size_t n) {
  return region{0, 2 * n, region_kind::tensor, dtype::bf16, {n}, "w"};
}

TEST(pack_mantissa, store_chooser_packs_a_high_entropy_mantissa) {
  size_t const n = 256 * 1024;
  bytes const data = planted_bf16(n, false, 7);
  auto const store = make_store_chooser();
  node const p = store->choose(tensor_region(n), data);
  EXPECT_TRUE(uses_op(p, opcode::bits)) << program_text(p);
  EXPECT_TRUE(roundtrips(p, data));
  // The same bytes choose the same program (the store's dedup).
  EXPECT_EQ(store->choose(tensor_region(n), data), p);
}

TEST(pack_mantissa, store_chooser_keeps_a_low_entropy_mantissa_coded) {
  size_t const n = 256 * 1024;
  bytes const data = planted_bf16(n, true, 8);
  node const p = make_store_chooser()->choose(tensor_region(n), data);
  // Its fields are split, the mantissa entropy-coded.
  EXPECT_TRUE(uses_op(p, opcode::bitfields) || uses_op(p, opcode::fields))
      << program_text(p);
  EXPECT_FALSE(uses_op(p, opcode::bits)) << program_text(p);
}

TEST(pack_mantissa, the_cli_chooser_does_not_pack) {
  size_t const n = 256 * 1024;
  bytes const data = planted_bf16(n, false, 7);
  node const p = make_search_chooser()->choose(tensor_region(n), data);
  EXPECT_FALSE(uses_op(p, opcode::bits)) << program_text(p);
}

}  // namespace
}  // namespace brevis::codec
