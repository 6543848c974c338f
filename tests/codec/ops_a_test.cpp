// Operators view, fields, planes, delta, xor_prev, xor_row, transpose, map:
// roundtrips over adversarial inputs through the real interpreter, typing,
// malformed payloads, and a throughput measurement (printed, not asserted).
#include <gtest/gtest.h>

#include <chrono>
#include <iostream>
#include <map>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

using testing::adversarial;
using testing::sample;
using testing::test_lengths;

uint64_t m(meaning k) { return static_cast<uint64_t>(k); }

node raw() { return make_leaf(opcode::raw); }

std::vector<node> raws(size_t k) { return std::vector<node>(k, raw()); }

/// view:width:kind(inner, raw)
node viewed(unsigned width, meaning kind, node inner) {
  return make_op(opcode::view, {width, m(kind)}, {std::move(inner), raw()});
}

/// All adversarial samples of every test length for a lane width, built once.
std::vector<sample> const& corpus(unsigned width) {
  static std::map<unsigned, std::vector<sample>> cache;
  auto it = cache.find(width);
  if (it == cache.end()) {
    std::vector<sample> all;
    for (size_t n : test_lengths()) {
      for (sample& s : adversarial(n, width)) {
        s.name += " n=" + std::to_string(n);
        all.push_back(std::move(s));
      }
    }
    it = cache.emplace(width, std::move(all)).first;
  }
  return it->second;
}

/// Every meaning a lane of `width` bytes may carry.
std::vector<meaning> meanings_of(unsigned width) {
  std::vector<meaning> out;
  for (unsigned k = 0; k <= m(meaning::uint); ++k) {
    auto const kind = static_cast<meaning>(k);
    unsigned const mw = meaning_width(kind);
    if (mw == 0 || mw == width) out.push_back(kind);
  }
  return out;
}

/// Checks serialization and text, then the roundtrip of every sample.
void expect_roundtrips(node const& p, unsigned width) {
  std::string const text = program_text(p);
  SCOPED_TRACE(text);
  ASSERT_NO_THROW(check_program(p));
  EXPECT_EQ(parse_program(serialize_program(p)), p);
  EXPECT_EQ(text.find("op#"), std::string::npos);
  for (sample const& s : corpus(width)) {
    bytes payload;
    encode_chunk(p, s.data, payload);
    bytes back(s.data.size());
    decode_chunk(p, payload, back.size(), back.data());
    if (back != s.data) {
      ADD_FAILURE() << "mismatch on " << s.name;
      return;
    }
  }
}

TEST(ops_a_test, view_roundtrips) {
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    for (meaning kind : meanings_of(w)) {
      expect_roundtrips(viewed(w, kind, raw()), w);
    }
  }
  EXPECT_EQ(program_text(viewed(2, meaning::bf16, raw())),
            "view:2:1(raw, raw)");
}

TEST(ops_a_test, fields_roundtrips) {
  for (meaning kind : {meaning::bf16, meaning::fp16, meaning::fp32,
                       meaning::fp64, meaning::f8e4m3, meaning::f8e5m2}) {
    unsigned const w = meaning_width(kind);
    expect_roundtrips(viewed(w, kind, make_op(opcode::fields, {}, raws(3))), w);
  }
}

TEST(ops_a_test, fields_child_types) {
  op_def const* op = find_op(opcode::fields);
  ASSERT_NE(op, nullptr);
  node const n = make_op(opcode::fields, {}, raws(3));
  struct want {
    meaning kind;
    uint8_t exp_width, man_width;
  };
  for (want w : {want{meaning::bf16, 1, 1}, want{meaning::fp16, 1, 2},
                 want{meaning::fp32, 1, 4}, want{meaning::fp64, 2, 8},
                 want{meaning::f8e4m3, 1, 1}, want{meaning::f8e5m2, 1, 1}}) {
    auto const t = op->child_types(
        n, {static_cast<uint8_t>(meaning_width(w.kind)), w.kind});
    ASSERT_EQ(t.size(), 3u);
    EXPECT_EQ(t[0], (value_type{1, meaning::uint}));
    EXPECT_EQ(t[1], (value_type{w.exp_width, meaning::uint}));
    EXPECT_EQ(t[2], (value_type{w.man_width, meaning::uint}));
  }
}

TEST(ops_a_test, fields_splits_bf16) {
  // -1.5 in bf16 is 0xbfc0: sign 1, exponent 127, mantissa 0x40.
  op_def const* op = find_op(opcode::fields);
  node const n = make_op(opcode::fields, {}, raws(3));
  stream in{{0xc0, 0xbf}, {2, meaning::bf16}};
  std::vector<stream> kids;
  bytes side;
  op->encode(n, in, kids, side);
  ASSERT_EQ(kids.size(), 3u);
  EXPECT_EQ(kids[0].data, bytes{1});
  EXPECT_EQ(kids[1].data, bytes{127});
  EXPECT_EQ(kids[2].data, bytes{0x40});
  EXPECT_TRUE(side.empty());
}

TEST(ops_a_test, planes_roundtrips) {
  for (unsigned w : {2u, 4u, 8u}) {
    for (meaning kind : meanings_of(w)) {
      expect_roundtrips(viewed(w, kind, make_op(opcode::planes, {}, raws(w))),
                        w);
    }
  }
}

TEST(ops_a_test, planes_splits_little_endian) {
  op_def const* op = find_op(opcode::planes);
  node const n = make_op(opcode::planes, {}, raws(4));
  stream in{{1, 2, 3, 4, 5, 6, 7, 8}, {4, meaning::none}};
  std::vector<stream> kids;
  bytes side;
  op->encode(n, in, kids, side);
  ASSERT_EQ(kids.size(), 4u);
  EXPECT_EQ(kids[0].data, (bytes{1, 5}));
  EXPECT_EQ(kids[3].data, (bytes{4, 8}));
}

// Inputs meaningful for the element-wise operators at a width: untyped,
// signed, and the float of that width.
std::vector<meaning> elem_meanings(unsigned w) {
  std::vector<meaning> out = {meaning::none, meaning::sint};
  for (meaning kind : meanings_of(w)) {
    if (is_float(kind)) {
      out.push_back(kind);
      break;
    }
  }
  return out;
}

// The input meaning changes only the output type of these operators, so the
// parameter sweeps (many programs) run on untyped lanes to keep tests fast.
void expect_elementwise_roundtrips(opcode op, std::vector<uint64_t> params,
                                   bool every_meaning = false) {
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    std::vector<meaning> const kinds =
        every_meaning ? elem_meanings(w) : std::vector{meaning::none};
    for (meaning kind : kinds) {
      expect_roundtrips(viewed(w, kind, make_op(op, params, raws(1))), w);
    }
  }
}

TEST(ops_a_test, delta_roundtrips) {
  expect_elementwise_roundtrips(opcode::delta, {}, true);
}

TEST(ops_a_test, xor_prev_roundtrips) {
  expect_elementwise_roundtrips(opcode::xor_prev, {}, true);
}

TEST(ops_a_test, xor_row_roundtrips) {
  for (uint64_t cols : {1ull, 3ull, 64ull, 5000ull, 1ull << 62}) {
    expect_elementwise_roundtrips(opcode::xor_row, {cols});
  }
}

TEST(ops_a_test, transpose_roundtrips) {
  for (uint64_t cols : {1ull, 2ull, 5ull, 33ull, 1000ull, 1ull << 40}) {
    expect_elementwise_roundtrips(opcode::transpose, {cols});
  }
}

TEST(ops_a_test, map_roundtrips) {
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    unsigned const bits = 8 * w;
    uint64_t const max = bits == 64 ? ~0ull : (1ull << bits) - 1;
    std::vector<std::vector<uint64_t>> params = {
        {0, 0},   {1, 0x5a & max},  {1, max}, {2, 1},
        {2, max}, {2, 12345 & max}, {3, 1},   {3, bits - 1}};
    for (auto const& p : params) {
      expect_roundtrips(
          viewed(w, meaning::none, make_op(opcode::map, p, raws(1))), w);
    }
    // Zigzag's usual input: signed lanes.
    expect_roundtrips(
        viewed(w, meaning::sint, make_op(opcode::map, {0, 0}, raws(1))), w);
  }
}

TEST(ops_a_test, map_zigzag_values) {
  op_def const* op = find_op(opcode::map);
  node const n = make_op(opcode::map, {0, 0}, raws(1));
  // int16: 0, -1, 1, -2, 32767, -32768 -> 0, 1, 2, 3, 65534, 65535.
  stream in{{0, 0, 0xff, 0xff, 1, 0, 0xfe, 0xff, 0xff, 0x7f, 0, 0x80},
            {2, meaning::sint}};
  std::vector<stream> kids;
  bytes side;
  op->encode(n, in, kids, side);
  ASSERT_EQ(kids.size(), 1u);
  EXPECT_EQ(kids[0].type, (value_type{2, meaning::uint}));
  EXPECT_EQ(kids[0].data,
            (bytes{0, 0, 1, 0, 2, 0, 3, 0, 0xfe, 0xff, 0xff, 0xff}));
}

TEST(ops_a_test, transpose_orders_by_column) {
  op_def const* op = find_op(opcode::transpose);
  node const n = make_op(opcode::transpose, {3}, raws(1));
  // 2 x 3 matrix plus one leftover element.
  stream in{{1, 2, 3, 4, 5, 6, 7}, bytes_type};
  std::vector<stream> kids;
  bytes side;
  op->encode(n, in, kids, side);
  ASSERT_EQ(kids.size(), 1u);
  EXPECT_EQ(kids[0].data, (bytes{1, 4, 2, 5, 3, 6, 7}));
}

TEST(ops_a_test, composed_programs_roundtrip) {
  node const bf16 =
      viewed(2, meaning::bf16,
             make_op(opcode::fields, {},
                     {raw(), make_op(opcode::delta, {}, {raw()}), raw()}));
  expect_roundtrips(bf16, 2);
  node const fp32 = viewed(
      4, meaning::fp32,
      make_op(
          opcode::planes, {},
          {make_op(opcode::delta, {}, {make_op(opcode::map, {0, 0}, {raw()})}),
           raw(), make_op(opcode::transpose, {3}, {raw()}),
           make_op(opcode::xor_row, {5}, {raw()})}));
  expect_roundtrips(fp32, 4);
  node const fp64 =
      viewed(8, meaning::fp64,
             make_op(opcode::fields, {},
                     {raw(), make_op(opcode::xor_prev, {}, {raw()}),
                      make_op(opcode::planes, {}, raws(8))}));
  expect_roundtrips(fp64, 8);
  EXPECT_EQ(program_text(bf16), "view:2:1(fields(raw, delta(raw), raw), raw)");
}

// --- Typing -----------------------------------------------------------------

void expect_bad_program(node const& p) {
  SCOPED_TRACE(program_text(p));
  try {
    check_program(p);
    ADD_FAILURE() << "accepted";
  } catch (error const& e) {
    EXPECT_EQ(e.code(), errc::bad_program) << e.what();
  }
}

TEST(ops_a_test, ill_typed_programs_are_rejected) {
  // fields on non-floats.
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::fields, {}, raws(3))));
  expect_bad_program(
      viewed(4, meaning::sint, make_op(opcode::fields, {}, raws(3))));
  expect_bad_program(make_op(opcode::fields, {}, raws(3)));
  // planes on one-byte lanes.
  expect_bad_program(
      viewed(1, meaning::none, make_op(opcode::planes, {}, raws(1))));
  expect_bad_program(make_op(opcode::planes, {}, raws(1)));
  // view: bad widths, meanings, params, input.
  expect_bad_program(viewed(3, meaning::none, raw()));
  expect_bad_program(viewed(0, meaning::none, raw()));
  expect_bad_program(viewed(16, meaning::none, raw()));
  expect_bad_program(viewed(4, meaning::bf16, raw()));
  expect_bad_program(viewed(2, meaning::fp32, raw()));
  expect_bad_program(viewed(1, meaning::fp16, raw()));
  expect_bad_program(viewed(8, meaning::f8e4m3, raw()));
  expect_bad_program(make_op(opcode::view, {2, 9}, raws(2)));
  expect_bad_program(make_op(opcode::view, {2}, raws(2)));
  expect_bad_program(make_op(opcode::view, {2, 0, 0}, raws(2)));
  expect_bad_program(viewed(2, meaning::none, viewed(2, meaning::none, raw())));
  // transpose and xor_row need cols > 0.
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::transpose, {0}, raws(1))));
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::transpose, {}, raws(1))));
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::xor_row, {0}, raws(1))));
  // map: unknown kinds and arguments that do not fit the lane.
  for (auto p : std::vector<std::vector<uint64_t>>{
           {4, 0}, {0, 1}, {1, 256}, {2, 256}, {3, 8}, {3, 1000}, {0}, {}}) {
    expect_bad_program(
        viewed(1, meaning::none, make_op(opcode::map, p, raws(1))));
  }
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::map, {2, 65536}, raws(1))));
  expect_bad_program(
      viewed(4, meaning::none, make_op(opcode::map, {1, 1ull << 32}, raws(1))));
  expect_bad_program(
      viewed(8, meaning::none, make_op(opcode::map, {3, 64}, raws(1))));
  // Parameters where none are taken.
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::delta, {1}, raws(1))));
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::xor_prev, {1}, raws(1))));
  expect_bad_program(
      viewed(2, meaning::bf16, make_op(opcode::fields, {1}, raws(3))));
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::planes, {2}, raws(2))));
  node with_blob = make_op(opcode::delta, {}, raws(1));
  with_blob.blob = {1};
  expect_bad_program(viewed(2, meaning::none, with_blob));
  // Wrong child counts.
  expect_bad_program(
      viewed(2, meaning::bf16, make_op(opcode::fields, {}, raws(2))));
  expect_bad_program(
      viewed(4, meaning::none, make_op(opcode::planes, {}, raws(2))));
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::delta, {}, raws(2))));
  expect_bad_program(
      viewed(2, meaning::none, make_op(opcode::transpose, {3}, raws(0))));
  expect_bad_program(make_op(opcode::view, {2, 0}, raws(1)));
  expect_bad_program(make_op(opcode::view, {2, 0}, raws(3)));
}

// --- Malformed payloads -----------------------------------------------------

/// Decodes and accepts either a codec::error or a complete output; anything
/// else (another exception, a sanitizer report) is a bug.
void decode_untrusted(node const& p, byte_view payload, size_t out_size) {
  bytes out(out_size);
  try {
    decode_chunk(p, payload, out_size, out.data());
  } catch (error const&) {
  } catch (std::exception const& e) {
    ADD_FAILURE() << "non-codec exception: " << e.what();
  }
}

TEST(ops_a_test, malformed_payloads_fail_cleanly) {
  std::vector<std::pair<node, unsigned>> programs = {
      {viewed(2, meaning::bf16, make_op(opcode::fields, {}, raws(3))), 2},
      {viewed(8, meaning::fp64, make_op(opcode::fields, {}, raws(3))), 8},
      {viewed(4, meaning::fp32, make_op(opcode::planes, {}, raws(4))), 4},
      {viewed(
           2, meaning::none,
           make_op(opcode::delta, {}, {make_op(opcode::map, {0, 0}, raws(1))})),
       2},
      {viewed(4, meaning::none,
              make_op(opcode::transpose, {7},
                      {make_op(opcode::xor_row, {3}, raws(1))})),
       4},
      {viewed(1, meaning::f8e5m2, make_op(opcode::fields, {}, raws(3))), 1},
  };
  std::mt19937 rng(7);
  for (auto const& [p, w] : programs) {
    SCOPED_TRACE(program_text(p));
    for (size_t n : {0u, 1u, 7u, 37u, 130u}) {
      for (sample const& s : adversarial(n, w)) {
        bytes payload;
        encode_chunk(p, s.data, payload);
        // Wrong output sizes.
        decode_untrusted(p, payload, n + 1);
        if (n > 0) decode_untrusted(p, payload, n - 1);
        decode_untrusted(p, payload, n + w);
        // Truncations.
        for (size_t cut = 0; cut < payload.size(); ++cut) {
          decode_untrusted(p, byte_view(payload).first(cut), n);
        }
        // Bit flips and random bytes at every position (few per sample).
        for (size_t i = 0; i < payload.size(); ++i) {
          bytes bad = payload;
          bad[i] ^= static_cast<uint8_t>(1u << (rng() % 8));
          decode_untrusted(p, bad, n);
          bad[i] = static_cast<uint8_t>(rng());
          decode_untrusted(p, bad, n);
        }
        // Appended bytes.
        bytes longer = payload;
        longer.push_back(0);
        decode_untrusted(p, longer, n);
      }
    }
  }
}

/// Payload of view:w:kind(fields(raw, raw, raw), raw) from the given field
/// streams and an empty tail.
bytes fields_payload(bytes const& sign, bytes const& exp, bytes const& man) {
  bytes out;
  put_blob(out, sign);
  put_blob(out, exp);
  put_blob(out, man);
  put_blob(out, {});
  return out;
}

TEST(ops_a_test, fields_decode_rejects_out_of_range_fields) {
  struct format {
    meaning kind;
    unsigned ew, mw;  // field lane widths
    uint64_t bad_exp, bad_man;
  };
  for (format f : {format{meaning::bf16, 1, 1, 0, 0x80},
                   format{meaning::fp16, 1, 2, 32, 1024},
                   format{meaning::fp32, 1, 4, 0, 1u << 23},
                   format{meaning::fp64, 2, 8, 2048, 1ull << 52},
                   format{meaning::f8e4m3, 1, 1, 16, 8},
                   format{meaning::f8e5m2, 1, 1, 32, 4}}) {
    unsigned const w = meaning_width(f.kind);
    node const p = viewed(w, f.kind, make_op(opcode::fields, {}, raws(3)));
    SCOPED_TRACE(program_text(p));
    size_t const count = 5;
    bytes const sign(count, 1);
    bytes const exp(count * f.ew, 0);
    bytes const man(count * f.mw, 0);
    auto lane = [](bytes v, unsigned width, size_t i, uint64_t x) {
      for (unsigned k = 0; k < width; ++k) {
        v[i * width + k] = static_cast<uint8_t>(x >> (8 * k));
      }
      return v;
    };
    auto expect_corrupt = [&](bytes const& payload) {
      bytes out(count * w);
      try {
        decode_chunk(p, payload, out.size(), out.data());
        ADD_FAILURE() << "accepted";
      } catch (error const& e) {
        EXPECT_EQ(e.code(), errc::corrupt) << e.what();
      }
    };
    // The valid payload decodes (to -0.0 five times).
    bytes out(count * w);
    decode_chunk(p, fields_payload(sign, exp, man), out.size(), out.data());
    EXPECT_EQ(out[w - 1], 0x80);
    expect_corrupt(fields_payload(lane(sign, 1, 3, 2), exp, man));
    expect_corrupt(fields_payload(lane(sign, 1, 0, 0xff), exp, man));
    if (f.bad_exp != 0) {
      expect_corrupt(fields_payload(sign, lane(exp, f.ew, 4, f.bad_exp), man));
    }
    expect_corrupt(fields_payload(sign, exp, lane(man, f.mw, 2, f.bad_man)));
    expect_corrupt(fields_payload(sign, exp, lane(man, f.mw, 1, ~0ull)));
  }
}

// --- Throughput (printed, not asserted) --------------------------------------

double mb_per_s(size_t bytes_per_rep, auto&& body) {
  using clock = std::chrono::steady_clock;
  body();  // warm up: the first large allocations fault their pages in
  auto const start = clock::now();
  size_t reps = 0;
  double secs = 0;
  do {
    body();
    ++reps;
    secs = std::chrono::duration<double>(clock::now() - start).count();
  } while (secs < 0.15 && reps < 200);
  return static_cast<double>(bytes_per_rep) * reps / secs / 1e6;
}

TEST(ops_a_test, throughput_fields_planes) {
  size_t const size = 1 << 20;  // one chunk
  std::mt19937_64 rng(3);
  std::normal_distribution<float> g(0.0f, 0.02f);
  bytes f32(size), bf16(size);
  for (size_t i = 0; i < size / 4; ++i) {
    float const v = g(rng);
    std::memcpy(&f32[4 * i], &v, 4);
  }
  for (size_t i = 0; i < size / 2; ++i) {
    uint16_t const v = testing::to_bf16(g(rng));
    std::memcpy(&bf16[2 * i], &v, 2);
  }
  for (opcode code : {opcode::fields, opcode::planes}) {
    op_def const* op = find_op(code);
    for (auto const& [data, lane] :
         {std::pair{&bf16, value_type{2, meaning::bf16}},
          std::pair{&f32, value_type{4, meaning::fp32}}}) {
      value_type const type = lane;  // captured below: not a binding
      node const n =
          make_op(code, {}, raws(code == opcode::fields ? 3 : type.width));
      stream const in{*data, type};
      std::vector<stream> kids;
      bytes side;
      double const enc = mb_per_s(size, [&] {
        kids.clear();
        op->encode(n, in, kids, side);
      });
      bytes out(size);
      double const dec = mb_per_s(
          size, [&] { op->decode(n, type, kids, size, side, out.data()); });
      EXPECT_EQ(out, *data);
      std::cout << "[ throughput ] " << op->name() << " " << type_name(type)
                << ": encode " << static_cast<int>(enc) << " MB/s, decode "
                << static_cast<int>(dec) << " MB/s\n";
    }
  }
}

TEST(ops_a_test, throughput_elementwise) {
  size_t const size = 1 << 20;
  std::mt19937_64 rng(5);
  bytes data(size);
  for (uint8_t& b : data) b = static_cast<uint8_t>(rng());
  value_type const type{4, meaning::none};
  for (auto const& [code, params] :
       std::vector<std::pair<opcode, std::vector<uint64_t>>>{
           {opcode::delta, {}},
           {opcode::xor_row, {1024}},
           {opcode::transpose, {1024}},
           {opcode::map, {0, 0}}}) {
    op_def const* op = find_op(code);
    node const n = make_op(code, params, raws(1));
    stream const in{data, type};
    std::vector<stream> kids;
    bytes side;
    double const enc = mb_per_s(size, [&] {
      kids.clear();
      op->encode(n, in, kids, side);
    });
    bytes out(size);
    double const dec = mb_per_s(
        size, [&] { op->decode(n, type, kids, size, side, out.data()); });
    EXPECT_EQ(out, data);
    std::cout << "[ throughput ] " << program_text(n) << " u32: encode "
              << static_cast<int>(enc) << " MB/s, decode "
              << static_cast<int>(dec) << " MB/s\n";
  }
}

}  // namespace
}  // namespace brevis::codec
