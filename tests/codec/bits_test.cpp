// The bits leaf (FORMAT.md, 4.8) and its kernels: roundtrips for every
// width and b over lengths 0..4099 at every instruction cap, the payload
// checked bit by bit against the format's definition, and what decoding
// rejects.
#include <gtest/gtest.h>

#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "codec/leaves/bits_kernels.h"
#include "tests/codec/error_code.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

using testing::code_of;

struct cap_guard {
  explicit cap_guard(unsigned c) { bits_kernels::set_cap(c); }
  ~cap_guard() { bits_kernels::set_cap(3); }
};

uint64_t mask_of(unsigned bits) {
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

uint64_t lane(bytes const& d, size_t i, unsigned width) {
  uint64_t v = 0;
  for (unsigned k = 0; k < width; ++k)
    v |= uint64_t{d[i * width + k]} << (8 * k);
  return v;
}

// The payload as FORMAT.md 4.8 defines it: bit j of value i is payload bit
// i b + j, bit k of the payload bit k % 8 of byte k / 8.
bytes reference_pack(bytes const& values, unsigned width, unsigned bits) {
  size_t const n = values.size() / width;
  bytes out((n * bits + 7) / 8, 0);
  for (size_t i = 0; i < n; ++i) {
    uint64_t const v = lane(values, i, width);
    for (unsigned j = 0; j < bits; ++j) {
      uint64_t const k = uint64_t{i} * bits + j;
      if ((v >> j) & 1)
        out[k / 8] = static_cast<uint8_t>(out[k / 8] | 1u << (k % 8));
    }
  }
  return out;
}

// n lanes of `bits`-bit values: random, all the largest, zeros and the
// largest alternating, one set bit walking (the values a kernel's shifts
// and masks get wrong first).
std::vector<bytes> values_of(size_t n, unsigned width, unsigned bits,
                             uint64_t seed) {
  std::mt19937_64 rng(seed);
  uint64_t const m = mask_of(bits);
  std::vector<bytes> out(4, bytes(n * width));
  for (size_t i = 0; i < n; ++i) {
    uint64_t const v[4] = {rng() & m, m, i % 2 ? m : 0,
                           uint64_t{1} << (i % bits)};
    for (size_t s = 0; s < 4; ++s) {
      for (unsigned k = 0; k < width; ++k) {
        out[s][i * width + k] = static_cast<uint8_t>(v[s] >> (8 * k));
      }
    }
  }
  return out;
}

void check_kernels(unsigned width, unsigned bits, size_t n) {
  for (bytes const& values : values_of(n, width, bits, n * 131 + bits)) {
    bytes const want = reference_pack(values, width, bits);
    ASSERT_EQ(want.size(), bits_kernels::packed_size(n, bits));
    for (unsigned cap = 0; cap <= 3; ++cap) {
      cap_guard const g(cap);
      // Slack after both buffers: a kernel writing past its end shows.
      bytes packed(want.size() + 16, 0xee);
      ASSERT_TRUE(
          bits_kernels::pack(values.data(), width, n, bits, packed.data()));
      ASSERT_TRUE(std::equal(want.begin(), want.end(), packed.begin()))
          << "w " << width << " b " << bits << " n " << n << " cap " << cap;
      ASSERT_TRUE(std::all_of(packed.begin() + static_cast<long>(want.size()),
                              packed.end(),
                              [](uint8_t b) { return b == 0xee; }));
      bytes back(values.size() + 16, 0xee);
      ASSERT_TRUE(
          bits_kernels::unpack(want.data(), n, bits, width, back.data()));
      ASSERT_TRUE(std::equal(values.begin(), values.end(), back.begin()))
          << "w " << width << " b " << bits << " n " << n << " cap " << cap;
      ASSERT_TRUE(std::all_of(back.begin() + static_cast<long>(values.size()),
                              back.end(), [](uint8_t b) { return b == 0xee; }));
    }
  }
}

TEST(bits_kernels, u8_lanes_every_b_every_length_to_4099) {
  for (unsigned bits = 1; bits <= 8; ++bits) {
    for (size_t n = 0; n <= 4099; n += n < 600 ? 1 : 37) {
      check_kernels(1, bits, n);
    }
    for (size_t n = 4090; n <= 4099; ++n) check_kernels(1, bits, n);
  }
}

TEST(bits_kernels, wide_lanes_every_b) {
  for (unsigned width : {2u, 4u, 8u}) {
    for (unsigned bits = 1; bits <= 8 * width; ++bits) {
      for (size_t n : testing::test_lengths()) {
        if (n > 300 && n % 2 == 0) continue;  // odd tails to 4099 suffice
        check_kernels(width, bits, n);
      }
    }
  }
}

TEST(bits_kernels, value_too_wide_is_refused_at_every_cap) {
  for (unsigned cap = 0; cap <= 3; ++cap) {
    cap_guard const g(cap);
    for (size_t n : {1u, 8u, 63u, 64u, 65u, 200u}) {
      for (size_t at : {size_t{0}, n / 2, n - 1}) {
        bytes values(n, 0x7f);
        values[at] = 0x80;
        bytes packed(bits_kernels::packed_size(n, 7));
        EXPECT_FALSE(bits_kernels::pack(values.data(), 1, n, 7, packed.data()))
            << n << " " << at << " cap " << cap;
      }
    }
  }
}

TEST(bits_kernels, padding_bits_are_refused_at_every_cap) {
  for (unsigned cap = 0; cap <= 3; ++cap) {
    cap_guard const g(cap);
    for (size_t n : {1u, 9u, 65u, 129u, 1001u}) {
      bytes payload(bits_kernels::packed_size(n, 7), 0);
      bytes out(n);
      EXPECT_TRUE(bits_kernels::unpack(payload.data(), n, 7, 1, out.data()));
      payload.back() = 0x80;  // n * 7 % 8 != 0 for these n: a padding bit
      EXPECT_FALSE(bits_kernels::unpack(payload.data(), n, 7, 1, out.data()))
          << n << " cap " << cap;
    }
  }
}

TEST(bits_leaf, format_example) {
  // FORMAT.md 4.8: b = 7, values 0x01, 0x7f, 0x00 -> 0x81 0x3f 0x00.
  node const n = make_leaf(opcode::bits, {7});
  bytes payload;
  encode_chunk(n, bytes{0x01, 0x7f, 0x00}, payload);
  EXPECT_EQ(payload, (bytes{3, 0x81, 0x3f, 0x00}));  // length, then payload
}

TEST(bits_leaf, roundtrips_under_bitfields_through_the_interpreter) {
  node const p =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_op(opcode::bitfields, {7, 9},
                       {make_leaf(opcode::bits, {7}), make_leaf(opcode::raw)}),
               make_leaf(opcode::raw)});
  node const parsed = parse_program(serialize_program(p));
  for (unsigned cap = 0; cap <= 3; ++cap) {
    cap_guard const g(cap);
    for (size_t n : testing::test_lengths()) {
      for (auto const& s : testing::adversarial(n, 2)) {
        ASSERT_TRUE(roundtrips(parsed, s.data)) << s.name << " " << n;
      }
    }
  }
}

TEST(bits_leaf, encode_refuses_values_wider_than_b) {
  node const n = make_leaf(opcode::bits, {3});
  bytes payload;
  EXPECT_EQ(code_of([&] {
              encode_chunk(n, bytes{1, 2, 8}, payload);
            }),
            errc::domain);
  EXPECT_FALSE(roundtrips(n, bytes{1, 2, 8}));
}

TEST(bits_leaf, ill_formed_nodes_are_bad_programs) {
  value_type const u8{1, meaning::uint};
  value_type const u16{2, meaning::uint};
  auto check = [](node const& n, value_type t) {
    return code_of([&] { check_program(n, t); });
  };
  EXPECT_EQ(check(make_leaf(opcode::bits, {}), u8), errc::bad_program);
  EXPECT_EQ(check(make_leaf(opcode::bits, {0}), u8), errc::bad_program);
  EXPECT_EQ(check(make_leaf(opcode::bits, {9}), u8), errc::bad_program);
  EXPECT_EQ(check(make_leaf(opcode::bits, {17}), u16), errc::bad_program);
  EXPECT_EQ(check(make_leaf(opcode::bits, {7, 1}), u8), errc::bad_program);
  node with_blob = make_leaf(opcode::bits, {7});
  with_blob.blob = {1};
  EXPECT_EQ(check(with_blob, u8), errc::bad_program);
  EXPECT_EQ(check(make_leaf(opcode::bits, {8}), u8), errc::ok);
  EXPECT_EQ(check(make_leaf(opcode::bits, {16}), u16), errc::ok);
  // A serialized program with b wider than its lanes fails to parse.
  EXPECT_EQ(code_of([&] {
              parse_program(serialize_program(make_leaf(opcode::bits, {9})));
            }),
            errc::bad_program);
}

TEST(bits_leaf, malformed_payloads_are_corrupt) {
  leaf_def const& leaf = *find_leaf(opcode::bits);
  node const n = make_leaf(opcode::bits, {7});
  value_type const u8{1, meaning::uint};
  value_type const u16{2, meaning::uint};
  bytes out(64);
  auto decode = [&](value_type t, bytes const& payload, size_t size) {
    return code_of([&] { leaf.decode(n, t, payload, size, out.data()); });
  };
  EXPECT_EQ(decode(u8, bytes(7, 0), 8), errc::ok);
  EXPECT_EQ(decode(u8, bytes(6, 0), 8), errc::corrupt);   // short
  EXPECT_EQ(decode(u8, bytes(8, 0), 8), errc::corrupt);   // long
  EXPECT_EQ(decode(u8, bytes{0x80}, 1), errc::corrupt);   // padding bit
  EXPECT_EQ(decode(u16, bytes(2, 0), 3), errc::corrupt);  // half a lane
  EXPECT_EQ(decode(u8, bytes{}, 0), errc::ok);
  EXPECT_EQ(decode(u8, bytes{0}, 0), errc::corrupt);
}

TEST(bits_leaf, interpreter_checks_the_payload_size_under_an_operator) {
  node const p =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::bf16)},
              {make_op(opcode::bitfields, {7, 9},
                       {make_leaf(opcode::bits, {7}), make_leaf(opcode::raw)}),
               make_leaf(opcode::raw)});
  bytes const data(2 * 100, 0x11);
  bytes payload;
  encode_chunk(p, data, payload);
  bytes back(data.size());
  decode_chunk(p, payload, back.size(), back.data());
  EXPECT_EQ(back, data);
  // The bits leaf's length (a varint, its first byte) one less: its payload
  // is short, and the rest no longer lines up.
  ASSERT_EQ(payload[0], 88);  // ceil(100 * 7 / 8)
  bytes bad = payload;
  bad[0] = 87;
  EXPECT_EQ(code_of([&] { decode_chunk(p, bad, back.size(), back.data()); }),
            errc::corrupt);
  bad = payload;
  bad[88] |= 0xf0;  // the last payload byte's 4 padding bits
  EXPECT_EQ(code_of([&] { decode_chunk(p, bad, back.size(), back.data()); }),
            errc::corrupt);
}

}  // namespace
}  // namespace brevis::codec
