// The sparse operator: nonzero mask + nonzero elements. Roundtrips over
// adversarial inputs at every width, typing, and malformed payloads.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "codec/ops/sparse_kernels.h"
#include "tests/codec/error_code.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

using testing::adversarial;
using testing::code_of;
using testing::test_lengths;

// view<w>(sparse(mask leaf, values leaf), raw tail) over bytes.
node program(unsigned width, node mask = make_leaf(opcode::raw),
             node values = make_leaf(opcode::raw)) {
  node p = make_op(
      opcode::view, {width, static_cast<uint64_t>(meaning::uint)},
      {make_op(opcode::sparse, {}, {std::move(mask), std::move(values)}),
       make_leaf(opcode::raw)});
  check_program(p);
  return p;
}

size_t nonzero_lanes(bytes const& d, unsigned w) {
  size_t k = 0;
  for (size_t i = 0; i + w <= d.size(); i += w) {
    bool nz = false;
    for (unsigned b = 0; b < w; ++b) nz = nz || d[i + b] != 0;
    k += nz;
  }
  return k;
}

TEST(sparse_test, roundtrips_every_adversarial_input_at_every_width) {
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    node const raw = program(w);
    node const values =
        w == 1 ? make_leaf(opcode::rans0)
               : make_op(opcode::planes, {},
                         std::vector<node>(w, make_leaf(opcode::rans0)));
    node const coded = program(w, make_leaf(opcode::rans0), values);
    for (size_t len : test_lengths()) {
      for (auto const& s : adversarial(len, w)) {
        SCOPED_TRACE("w=" + std::to_string(w) + " " + s.name +
                     " n=" + std::to_string(len));
        EXPECT_TRUE(roundtrips(raw, s.data));
        EXPECT_TRUE(roundtrips(coded, s.data));
      }
    }
  }
}

// The vectorized expand (8 lanes a mask byte while 8 values remain) and the
// portable one give the input back at every density, at lengths around the
// 8-lane steps, and where the last values are crowded at the end (the
// vector loop must hand over to the portable one with values left).
TEST(sparse_test, every_expand_path_roundtrips_every_density) {
  std::mt19937 rng(31);
  for (unsigned cap : {0u, 1u}) {
    sparse_kernels::set_cap(cap);
    for (unsigned w : {1u, 2u, 4u, 8u}) {
      node const p = program(w);
      for (double density : {0.0, 0.05, 0.5, 0.95, 1.0}) {
        for (size_t n : {1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 200, 1001}) {
          std::bernoulli_distribution nonzero(density);
          bytes data(n * w, 0);
          for (size_t i = 0; i < n; ++i) {
            if (!nonzero(rng)) continue;
            for (unsigned b = 0; b < w; ++b) {
              data[i * w + b] = static_cast<uint8_t>(rng());
            }
            data[i * w + rng() % w] |= 1;  // never all zero bits
          }
          SCOPED_TRACE("cap=" + std::to_string(cap) +
                       " w=" + std::to_string(w) + " density=" +
                       std::to_string(density) + " n=" + std::to_string(n));
          EXPECT_TRUE(roundtrips(p, data));
          // Zeros first, then every value at the end.
          bytes crowded(data.size(), 0);
          size_t const k = nonzero_lanes(data, w);
          for (size_t i = 0; i < k * w; ++i) {
            crowded[crowded.size() - k * w + i] = static_cast<uint8_t>(i | 1);
          }
          EXPECT_TRUE(roundtrips(p, crowded));
        }
      }
    }
  }
  sparse_kernels::set_cap(1);
}

// The vectorized compact (8 lanes a compare and a shuffle) and the portable
// one write the same mask and values, those a lane-by-lane reading gives,
// at every density and at lengths around the 8-lane steps.
TEST(sparse_test, every_compact_path_writes_the_mask_and_the_values) {
  std::mt19937 rng(37);
  op_def const* op = find_op(opcode::sparse);
  node const n = make_op(opcode::sparse, {}, {});
  for (unsigned cap : {0u, 1u}) {
    sparse_kernels::set_cap(cap);
    for (unsigned w : {1u, 2u, 4u, 8u}) {
      value_type const t{static_cast<uint8_t>(w), meaning::uint};
      for (double density : {0.0, 0.05, 0.5, 0.95, 1.0}) {
        for (size_t count : {1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 200, 1001}) {
          std::bernoulli_distribution nonzero(density);
          bytes data(count * w, 0);
          for (size_t i = 0; i < count; ++i) {
            if (!nonzero(rng)) continue;
            // One nonzero byte anywhere in the lane (the high byte alone
            // too: a lane is zero only when all its bits are).
            data[i * w + rng() % w] = static_cast<uint8_t>(rng() | 1);
          }
          bytes mask((count + 7) / 8, 0), values;
          for (size_t i = 0; i < count; ++i) {
            bool nz = false;
            for (unsigned b = 0; b < w; ++b) nz = nz || data[i * w + b] != 0;
            if (!nz) continue;
            mask[i / 8] |= static_cast<uint8_t>(1u << (i % 8));
            values.insert(values.end(), data.begin() + i * w,
                          data.begin() + (i + 1) * w);
          }
          SCOPED_TRACE("cap=" + std::to_string(cap) +
                       " w=" + std::to_string(w) + " density=" +
                       std::to_string(density) + " n=" + std::to_string(count));
          std::vector<stream> kids;
          bytes side;
          op->encode(n, stream{data, t}, kids, side);
          ASSERT_EQ(kids.size(), 2u);
          EXPECT_EQ(kids[0].data, mask);
          EXPECT_EQ(kids[1].data, values);
        }
      }
    }
  }
  sparse_kernels::set_cap(1);
}

TEST(sparse_test, children_are_the_mask_and_the_nonzero_elements) {
  op_def const* op = find_op(opcode::sparse);
  node const n = make_op(opcode::sparse, {}, {});
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    value_type const t{static_cast<uint8_t>(w), meaning::uint};
    for (size_t len : {0u, 1u, 7u, 8u, 9u, 100u, 4099u}) {
      for (auto const& s : adversarial(len * w, w)) {
        std::vector<stream> kids;
        bytes side;
        op->encode(n, stream{s.data, t}, kids, side);
        ASSERT_EQ(kids.size(), 2u);
        size_t const k = nonzero_lanes(s.data, w);
        EXPECT_EQ(kids[0].data.size(), (len + 7) / 8);
        EXPECT_EQ(kids[0].type, (value_type{1, meaning::uint}));
        EXPECT_EQ(kids[1].data.size(), k * w);
        EXPECT_EQ(kids[1].type, t);
        byte_reader r(side);
        EXPECT_EQ(r.varint(), k);
      }
    }
  }
}

TEST(sparse_test, ill_formed_nodes_are_rejected) {
  op_def const* op = find_op(opcode::sparse);
  node with_param = make_op(opcode::sparse, {1}, {});
  node with_blob = make_op(opcode::sparse, {}, {});
  with_blob.blob = {1};
  value_type const u2{2, meaning::uint};
  EXPECT_EQ(code_of([&] { op->child_types(with_param, u2); }),
            errc::bad_program);
  EXPECT_EQ(code_of([&] { op->child_types(with_blob, u2); }),
            errc::bad_program);
  EXPECT_EQ(code_of([&] {
              op->child_types(make_op(opcode::sparse, {}, {}),
                              value_type{3, meaning::uint});
            }),
            errc::bad_program);
}

TEST(sparse_test, malformed_payloads_are_rejected) {
  node const p = program(2);  // view<u16>(sparse(raw, raw), raw)
  // 10 elements (20 bytes): k, mask (2 bytes), values, empty tail.
  auto decode = [&](uint64_t k, bytes mask, bytes values, size_t size = 20) {
    bytes payload;
    put_varint(payload, k);
    put_blob(payload, mask);
    put_blob(payload, values);
    put_blob(payload, {});
    return code_of([&] {
      bytes out(size);
      decode_chunk(p, payload, out.size(), out.data());
    });
  };
  EXPECT_EQ(decode(2, {0x05, 0x00}, {1, 0, 2, 0}), errc::ok);
  EXPECT_EQ(decode(0, {0x00, 0x00}, {}), errc::ok);
  EXPECT_EQ(decode(2, {0x05, 0x04}, {1, 0, 2, 0}), errc::corrupt);   // past n
  EXPECT_EQ(decode(2, {0x07, 0x00}, {1, 0, 2, 0}), errc::corrupt);   // 3 bits
  EXPECT_EQ(decode(2, {0x05, 0x00}, {1, 0, 0, 0}), errc::corrupt);   // a zero
  EXPECT_EQ(decode(11, {0xff, 0x03}, bytes(22, 1)), errc::corrupt);  // k > n
  EXPECT_EQ(decode(uint64_t{1} << 62, {0x05, 0x00}, {1, 0, 2, 0}),
            errc::corrupt);
  EXPECT_NE(decode(2, {0x05}, {1, 0, 2, 0}), errc::ok);  // short mask
  // A mask of whole words and a tail (80 elements, 10 bytes; the count
  // runs 8 bytes at a time): one bit more or less than k is caught anywhere.
  bytes wide_mask(10, 0);
  wide_mask[0] = 0x01, wide_mask[7] = 0x80, wide_mask[9] = 0x40;
  EXPECT_EQ(decode(3, wide_mask, bytes(6, 1), 160), errc::ok);
  EXPECT_EQ(decode(2, wide_mask, bytes(4, 1), 160), errc::corrupt);
  wide_mask[3] = 0x10;
  EXPECT_EQ(decode(3, wide_mask, bytes(6, 1), 160), errc::corrupt);
  EXPECT_EQ(decode(4, wide_mask, bytes(8, 1), 160), errc::ok);
  EXPECT_NE(decode(2, {0x05, 0x00}, {1, 0, 2}), errc::ok);  // short values
  // Random payloads: an error or some bytes, never a crash.
  std::mt19937 rng(16);
  node const coded =
      program(2, make_leaf(opcode::rans0),
              make_op(opcode::planes, {},
                      {make_leaf(opcode::rans0), make_leaf(opcode::rans0)}));
  bytes data(4000);
  for (size_t i = 0; i < data.size(); i += 2) {
    if (rng() % 4 == 0) data[i] = static_cast<uint8_t>(rng()), data[i + 1] = 1;
  }
  bytes good;
  encode_chunk(coded, data, good);
  for (int i = 0; i < 400; ++i) {
    bytes q = good;
    if (i % 3 == 0) q.resize(rng() % q.size());
    for (int f = 0; f < 1 + i % 4 && !q.empty(); ++f) {
      q[rng() % q.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    bytes out(data.size());
    code_of([&] { decode_chunk(coded, q, out.size(), out.data()); });
  }
}

}  // namespace
}  // namespace brevis::codec
