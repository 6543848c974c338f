// Property and robustness tests of the operators palette, runs, low_zero,
// split, bitfields, bitplanes and repeat: roundtrips over adversarial inputs
// at every width, domain rejection, typing, and malformed payloads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "tests/codec/error_code.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

using testing::adversarial;
using testing::code_of;
using testing::test_lengths;

value_type lane(unsigned width, meaning m = meaning::none) {
  return value_type{static_cast<uint8_t>(width), m};
}

bytes whole(bytes data, unsigned width) {
  data.resize(data.size() / width * width);
  return data;
}

template <typename T>
T get(bytes const& b, size_t i) {
  return load_le<T>(b.data() + i * sizeof(T));
}

uint64_t get_lane(bytes const& b, size_t i, unsigned width) {
  uint64_t v = 0;
  std::memcpy(&v, b.data() + i * width, width);
  return v;
}

void set_lane(bytes& b, size_t i, unsigned width, uint64_t v) {
  std::memcpy(b.data() + i * width, &v, width);
}

node op_node(opcode op, std::vector<uint64_t> params = {}) {
  node n;
  n.op = op;
  n.params = std::move(params);
  return n;
}

struct encoded {
  std::vector<stream> kids;
  bytes side;
};

// Encodes one node on `data` of type `t`, checking what the interpreter
// relies on: one value per child type, of that type, whole elements.
encoded encode_op(node const& n, value_type t, bytes const& data) {
  op_def const* op = find_op(n.op);
  EXPECT_NE(op, nullptr);
  std::vector<value_type> const types = op->child_types(n, t);
  encoded e;
  op->encode(n, stream{data, t}, e.kids, e.side);
  EXPECT_EQ(e.kids.size(), types.size());
  for (size_t i = 0; i < e.kids.size() && i < types.size(); ++i) {
    EXPECT_EQ(e.kids[i].type, types[i]);
    EXPECT_EQ(e.kids[i].data.size() % types[i].width, 0u);
  }
  return e;
}

// Decodes like codec/dsl/interpreter.cpp does: sizes from child_sizes (under
// the same memory budget), each child "leaf payload" must match its size
// (as the raw leaf checks), then decode.
bytes decode_op(node const& n, value_type t, encoded const& e,
                size_t out_size) {
  op_def const* op = find_op(n.op);
  std::vector<value_type> const types = op->child_types(n, t);
  byte_reader r(e.side);
  std::vector<size_t> const sizes = op->child_sizes(n, t, out_size, r);
  fail_if(!r.empty(), errc::corrupt, "side data not consumed");
  fail_if(sizes.size() != types.size() || e.kids.size() != types.size(),
          errc::corrupt, "child count");
  size_t budget = decode_budget(out_size);
  for (size_t i = 0; i < sizes.size(); ++i) {
    fail_if(sizes[i] % types[i].width != 0, errc::corrupt, "partial element");
    fail_if(sizes[i] > budget, errc::limit, "over budget");
    budget -= sizes[i];
    fail_if(e.kids[i].data.size() != sizes[i], errc::corrupt, "leaf size");
  }
  bytes out(out_size, 0xcc);
  op->decode(n, t, e.kids, out_size, e.side, out.data());
  return out;
}

// Roundtrips `data` through the node; returns false on errc::domain.
bool op_roundtrips(node const& n, value_type t, bytes const& data,
                   encoded* keep = nullptr) {
  encoded e;
  try {
    e = encode_op(n, t, data);
  } catch (error const& err) {
    EXPECT_EQ(err.code(), errc::domain) << err.what();
    return false;
  }
  bytes const back = decode_op(n, t, e, data.size());
  EXPECT_EQ(back, data) << program_text(n) << " on " << type_name(t) << ", "
                        << data.size() << " bytes";
  if (keep) *keep = std::move(e);
  return true;
}

// Every adversarial sample of every test length, cut to whole elements of
// `width`; generated once per width (generation dominates otherwise).
std::vector<testing::sample> const& samples(unsigned width) {
  static std::map<unsigned, std::vector<testing::sample>> cache;
  auto [it, fresh] = cache.try_emplace(width);
  if (fresh) {
    for (size_t n : test_lengths()) {
      for (auto& s : adversarial(n, width)) {
        s.name += " n=" + std::to_string(n);
        s.data = whole(std::move(s.data), width);
        it->second.push_back(std::move(s));
      }
    }
  }
  return it->second;
}

template <typename F>
void for_samples(unsigned width, F&& f) {
  for (testing::sample const& s : samples(width)) {
    SCOPED_TRACE(s.name);
    f(s.data);
  }
}

// A width-1 program `op(raw, raw, ...)` run through the real interpreter.
node chunk_program(opcode op, std::vector<uint64_t> params) {
  node n = op_node(op, std::move(params));
  size_t const kids = find_op(op)->child_types(n, bytes_type).size();
  for (size_t i = 0; i < kids; ++i)
    n.children.push_back(make_leaf(opcode::raw));
  check_program(n);
  return n;
}

unsigned const widths[] = {1, 2, 4, 8};

// ---------------------------------------------------------------- palette

size_t distinct(bytes const& data, unsigned width) {
  std::vector<uint64_t> v(data.size() / width);
  for (size_t i = 0; i < v.size(); ++i) v[i] = get_lane(data, i, width);
  std::sort(v.begin(), v.end());
  return static_cast<size_t>(std::unique(v.begin(), v.end()) - v.begin());
}

TEST(ops_b_palette, roundtrips_adversarial) {
  for (unsigned w : widths) {
    for (std::vector<uint64_t> params :
         {std::vector<uint64_t>{}, std::vector<uint64_t>{1}}) {
      node const n = op_node(opcode::palette, params);
      for_samples(w, [&](bytes const& data) {
        encoded e;
        size_t const k = distinct(data, w);
        unsigned const iw = params.empty() && w > 1 ? 2 : 1;
        bool const fits = k <= (iw == 1 ? 256u : 65536u);
        ASSERT_EQ(op_roundtrips(n, lane(w), data, &e), fits);
        if (!fits) return;
        // Dictionary: the distinct values, strictly ascending.
        ASSERT_EQ(e.kids[0].data.size(), k * w);
        bool ascending = true;
        for (size_t i = 1; i < k; ++i) {
          ascending = ascending && get_lane(e.kids[0].data, i - 1, w) <
                                       get_lane(e.kids[0].data, i, w);
        }
        EXPECT_TRUE(ascending);
        EXPECT_EQ(e.kids[1].type, lane(iw, meaning::uint));
      });
    }
  }
}

TEST(ops_b_palette, planted_distinct_counts) {
  std::mt19937_64 rng(5);
  for (unsigned w : {2u, 4u, 8u}) {
    for (size_t k : {1u, 256u, 257u, 65536u, 65537u}) {
      SCOPED_TRACE("w=" + std::to_string(w) + " k=" + std::to_string(k));
      std::vector<uint64_t> values;
      for (size_t i = 0; i < k; ++i) {
        values.push_back(w == 2 ? i : rng() >> (64 - 8 * w));
      }
      if (w == 2 && k > 65536) continue;  // u16 has only 65536 values
      size_t const n = k + 2000;
      bytes data(n * w);
      for (size_t i = 0; i < n; ++i) {
        set_lane(data, i, w, values[i < k ? i : rng() % k]);
      }
      size_t const real_k = distinct(data, w);
      EXPECT_EQ(op_roundtrips(op_node(opcode::palette), lane(w), data),
                real_k <= 65536);
      EXPECT_EQ(op_roundtrips(op_node(opcode::palette, {1}), lane(w), data),
                real_k <= 256);
    }
  }
  // A small u16 input takes the hash path, a large one the table path: both
  // at the boundary 256 / 257 with u8 indices.
  for (size_t n : {300u, 40000u}) {
    for (size_t k : {256u, 257u}) {
      bytes data(n * 2);
      for (size_t i = 0; i < n; ++i) set_lane(data, i, 2, (i % k) * 251);
      EXPECT_EQ(op_roundtrips(op_node(opcode::palette, {1}), lane(2), data),
                k <= 256);
    }
  }
}

TEST(ops_b_palette, through_the_interpreter) {
  node const p = chunk_program(opcode::palette, {});
  for_samples(1, [&](bytes const& data) { EXPECT_TRUE(roundtrips(p, data)); });
}

TEST(ops_b_palette, malformed_payloads) {
  node const p = chunk_program(opcode::palette, {});
  bytes const input = {5, 9, 5, 5, 9};
  auto decode = [&](bytes const& payload) {
    return code_of([&] {
      bytes out(input.size());
      decode_chunk(p, payload, out.size(), out.data());
    });
  };
  auto payload = [](uint64_t k, bytes dict, bytes indices) {
    bytes out;
    put_varint(out, k);
    put_blob(out, dict);
    put_blob(out, indices);
    return out;
  };
  EXPECT_EQ(decode(payload(2, {5, 9}, {0, 1, 0, 0, 1})), errc::ok);
  EXPECT_NE(decode(payload(uint64_t{1} << 60, {5, 9}, {0, 1, 0, 0, 1})),
            errc::ok);
  EXPECT_EQ(decode(payload(6, {5, 9}, {0, 1, 0, 0, 1})), errc::corrupt);
  EXPECT_EQ(decode(payload(0, {}, {0, 1, 0, 0, 1})), errc::corrupt);
  EXPECT_EQ(decode(payload(2, {5, 9}, {0, 1, 2, 0, 1})), errc::corrupt);
  EXPECT_EQ(decode(payload(2, {5, 9}, {0, 1, 0, 0})), errc::corrupt);
  // Wide lanes: u16 values, u16 indices, index == k.
  node const n = op_node(opcode::palette);
  bytes data(2 * 100);
  for (size_t i = 0; i < 100; ++i) set_lane(data, i, 2, i % 3 * 1000);
  encoded e = encode_op(n, lane(2), data);
  set_lane(e.kids[1].data, 57, 2, 3);
  EXPECT_EQ(code_of([&] { decode_op(n, lane(2), e, data.size()); }),
            errc::corrupt);
  e.side.clear();
  put_varint(e.side, uint64_t{1} << 60);
  EXPECT_NE(code_of([&] { decode_op(n, lane(2), e, data.size()); }), errc::ok);
  // An output size that is not whole elements.
  byte_reader r(e.side);
  EXPECT_EQ(
      code_of([&] { find_op(opcode::palette)->child_sizes(n, lane(4), 7, r); }),
      errc::corrupt);
}

// ------------------------------------------------------------------- runs

TEST(ops_b_runs, roundtrips_adversarial) {
  for (unsigned w : widths) {
    node const n = op_node(opcode::runs);
    for_samples(w, [&](bytes const& data) {
      encoded e;
      ASSERT_TRUE(op_roundtrips(n, lane(w), data, &e));
      size_t const count = data.size() / w;
      size_t r = count > 0;
      for (size_t i = 1; i < count; ++i) {
        r += get_lane(data, i, w) != get_lane(data, i - 1, w);
      }
      EXPECT_EQ(e.kids[1].data.size(), 4 * r);
      EXPECT_EQ(e.kids[1].type, lane(4, meaning::uint));
    });
  }
}

// The values and lengths, element by element, of runs a few elements long
// (the search's fields) and of one long run, at every width.
TEST(ops_b_runs, outputs_equal_the_runs_counted_one_by_one) {
  std::mt19937 rng(7);
  for (unsigned w : widths) {
    for (size_t count : {size_t{1}, size_t{2}, size_t{5000}}) {
      bytes data;
      for (size_t i = 0; i < count; ++i) {
        uint8_t const v = static_cast<uint8_t>(rng() % 3);
        for (unsigned b = 0; b < w; ++b) data.push_back(b == w - 1 ? v : 0);
      }
      bytes const constant(w * count, 9);
      for (bytes const& d : {data, constant}) {
        bytes values, lengths;
        size_t j = 0;
        while (j < count) {
          size_t end = j + 1;
          while (end < count && get_lane(d, end, w) == get_lane(d, j, w)) ++end;
          values.insert(values.end(), d.begin() + static_cast<ptrdiff_t>(j * w),
                        d.begin() + static_cast<ptrdiff_t>((j + 1) * w));
          put_le(lengths, static_cast<uint32_t>(end - j));
          j = end;
        }
        encoded const e = encode_op(op_node(opcode::runs), lane(w), d);
        ASSERT_EQ(e.kids.size(), 2u);
        EXPECT_EQ(e.kids[0].data, values) << w << " " << count;
        EXPECT_EQ(e.kids[1].data, lengths) << w << " " << count;
      }
    }
  }
}

TEST(ops_b_runs, through_the_interpreter) {
  node const p = chunk_program(opcode::runs, {});
  for_samples(1, [&](bytes const& data) { EXPECT_TRUE(roundtrips(p, data)); });
}

TEST(ops_b_runs, malformed_payloads) {
  node const p = chunk_program(opcode::runs, {});
  size_t const size = 10;
  auto decode = [&](uint64_t r, bytes values, std::vector<uint32_t> lengths) {
    bytes payload;
    put_varint(payload, r);
    put_blob(payload, values);
    bytes l;
    for (uint32_t x : lengths) put_le(l, x);
    put_blob(payload, l);
    return code_of([&] {
      bytes out(size);
      decode_chunk(p, payload, out.size(), out.data());
    });
  };
  EXPECT_EQ(decode(2, {1, 2}, {4, 6}), errc::ok);
  EXPECT_EQ(decode(uint64_t{1} << 60, {1, 2}, {4, 6}), errc::corrupt);
  EXPECT_EQ(decode(11, {1, 2}, {4, 6}), errc::corrupt);
  EXPECT_EQ(decode(2, {1, 2}, {4, 5}), errc::corrupt);
  EXPECT_EQ(decode(2, {1, 2}, {4, 7}), errc::corrupt);
  EXPECT_EQ(decode(3, {1, 2, 3}, {4, 0, 6}), errc::corrupt);
  EXPECT_EQ(decode(3, {1, 2, 3}, {0xffffffff, 0xffffffff, 12}), errc::corrupt);
  EXPECT_EQ(decode(0, {}, {}), errc::corrupt);
  // Wide lanes.
  node const n = op_node(opcode::runs);
  bytes data(8 * 50, 0);
  encoded e = encode_op(n, lane(8), data);
  ASSERT_EQ(e.kids[1].data.size(), 4u);
  store_le<uint32_t>(e.kids[1].data.data(), 49);
  EXPECT_EQ(code_of([&] { decode_op(n, lane(8), e, data.size()); }),
            errc::corrupt);
}

// --------------------------------------------------------------- low_zero

TEST(ops_b_low_zero, roundtrips_adversarial) {
  for (unsigned w : widths) {
    for (unsigned k : {1u, 3u, 8u, 13u, 16u, 52u, 63u}) {
      if (k >= 8 * w) continue;
      node const n = op_node(opcode::low_zero, {k});
      unsigned const rest = 8 * w - k;
      value_type const child{static_cast<uint8_t>(rest <= 8    ? 1
                                                  : rest <= 16 ? 2
                                                  : rest <= 32 ? 4
                                                               : 8),
                             meaning::uint};
      ASSERT_EQ(find_op(opcode::low_zero)->child_types(n, lane(w))[0], child);
      for_samples(w, [&](bytes data) {
        // As is: in the domain only when every low bit is zero.
        uint64_t const low = (uint64_t{1} << k) - 1;
        bool clean = true;
        for (size_t i = 0; i < data.size() / w; ++i) {
          clean = clean && (get_lane(data, i, w) & low) == 0;
        }
        EXPECT_EQ(op_roundtrips(n, lane(w), data), clean);
        // Planted: low bits cleared.
        for (size_t i = 0; i < data.size() / w; ++i) {
          set_lane(data, i, w, get_lane(data, i, w) & ~low);
        }
        EXPECT_TRUE(op_roundtrips(n, lane(w), data));
      });
    }
  }
}

TEST(ops_b_low_zero, fp32_from_bf16) {
  node const n = op_node(opcode::low_zero, {16});
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 0.02f);
  bytes data;
  for (int i = 0; i < 5000; ++i) {
    float f = g(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    put_le<uint32_t>(data, u & 0xffff0000u);
  }
  for (uint32_t u : testing::special_f32())
    put_le<uint32_t>(data, u & 0xffff0000u);
  encoded e;
  ASSERT_TRUE(op_roundtrips(n, lane(4, meaning::fp32), data, &e));
  EXPECT_EQ(e.kids[0].type, lane(2, meaning::uint));
  EXPECT_EQ(e.kids[0].data.size(), data.size() / 2);
  data[0] |= 1;
  EXPECT_FALSE(op_roundtrips(n, lane(4, meaning::fp32), data));
}

TEST(ops_b_low_zero, through_the_interpreter) {
  node const p = chunk_program(opcode::low_zero, {2});
  for_samples(1, [&](bytes data) {
    for (uint8_t& b : data) b &= 0xfc;
    EXPECT_TRUE(roundtrips(p, data));
  });
  EXPECT_FALSE(roundtrips(p, bytes{4, 8, 1}));
}

TEST(ops_b_low_zero, malformed_payloads) {
  // u32 with k = 13: 19 bits in a u32 lane; a wider value cannot be undone.
  node const n = op_node(opcode::low_zero, {13});
  bytes data(4 * 20, 0);
  encoded e = encode_op(n, lane(4), data);
  ASSERT_EQ(e.kids[0].type, lane(4, meaning::uint));
  set_lane(e.kids[0].data, 7, 4, uint64_t{1} << 19);
  EXPECT_EQ(code_of([&] { decode_op(n, lane(4), e, data.size()); }),
            errc::corrupt);
  set_lane(e.kids[0].data, 7, 4, (uint64_t{1} << 19) - 1);
  EXPECT_EQ(code_of([&] { decode_op(n, lane(4), e, data.size()); }), errc::ok);
  // Width-1 program: k = 3 leaves 5 bits.
  node const p = chunk_program(opcode::low_zero, {3});
  bytes payload;
  put_blob(payload, bytes{1, 31, 32});
  bytes out(3);
  EXPECT_EQ(code_of([&] { decode_chunk(p, payload, 3, out.data()); }),
            errc::corrupt);
}

// ------------------------------------------------------------------ split

TEST(ops_b_split, roundtrips_adversarial) {
  for (uint64_t at :
       {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{1000},
        uint64_t{4099}, uint64_t{1} << 40, ~uint64_t{0}}) {
    node const n = op_node(opcode::split, {at});
    node const p = chunk_program(opcode::split, {at});
    for_samples(1, [&](bytes const& data) {
      encoded e;
      ASSERT_TRUE(op_roundtrips(n, bytes_type, data, &e));
      EXPECT_EQ(e.kids[0].data.size(), std::min<uint64_t>(at, data.size()));
      EXPECT_TRUE(roundtrips(p, data));
    });
  }
}

TEST(ops_b_split, malformed_payloads) {
  node const p = chunk_program(opcode::split, {3});
  bytes payload;
  put_blob(payload, bytes{1, 2});
  put_blob(payload, bytes{3, 4, 5});
  bytes out(5);
  EXPECT_EQ(code_of([&] { decode_chunk(p, payload, 5, out.data()); }),
            errc::corrupt);
}

// -------------------------------------------------------------- bitfields

TEST(ops_b_bitfields, roundtrips_adversarial) {
  std::vector<std::vector<uint64_t>> const layouts[] = {
      {{3, 5}, {1, 1, 1, 1, 4}, {8}, {4, 3, 1}},
      {{10, 5, 1}, {7, 8, 1}, {16}, {4, 4, 4, 4}, {12, 4}},
      {{23, 8, 1}, {16, 16}, {9, 17, 6}, {32}, {1, 31}},
      {{52, 11, 1}, {64}, {33, 31}, {8, 8, 16, 32}, {40, 24}},
  };
  for (size_t wi = 0; wi < 4; ++wi) {
    unsigned const w = widths[wi];
    for (auto const& fields : layouts[wi]) {
      node const n = op_node(opcode::bitfields, fields);
      for_samples(w, [&](bytes const& data) {
        encoded e;
        ASSERT_TRUE(op_roundtrips(n, lane(w), data, &e));
        // Field 0 holds the low bits of element 0.
        if (data.size() >= w) {
          uint64_t const low =
              fields[0] >= 64 ? ~uint64_t{0} : (uint64_t{1} << fields[0]) - 1;
          EXPECT_EQ(get_lane(e.kids[0].data, 0, e.kids[0].type.width),
                    get_lane(data, 0, w) & low);
        }
      });
    }
  }
}

TEST(ops_b_bitfields, malformed_payloads) {
  node const n = op_node(opcode::bitfields, {10, 5, 1});
  bytes data(2 * 30, 0xff);
  encoded e = encode_op(n, lane(2), data);
  ASSERT_EQ(e.kids[1].type, lane(1, meaning::uint));
  e.kids[1].data[4] = 32;  // 6 bits in a 5-bit field
  EXPECT_EQ(code_of([&] { decode_op(n, lane(2), e, data.size()); }),
            errc::corrupt);
  node const p = chunk_program(opcode::bitfields, {4, 4});
  bytes payload;
  put_blob(payload, bytes{1, 2});
  put_blob(payload, bytes{15, 16});
  bytes out(2);
  EXPECT_EQ(code_of([&] { decode_chunk(p, payload, 2, out.data()); }),
            errc::corrupt);
}

// -------------------------------------------------------------- bitplanes

TEST(ops_b_bitplanes, roundtrips_adversarial_and_matches_layout) {
  for (unsigned w : widths) {
    node const n = op_node(opcode::bitplanes);
    for_samples(w, [&](bytes const& data) {
      encoded e;
      ASSERT_TRUE(op_roundtrips(n, lane(w), data, &e));
      size_t const count = data.size() / w;
      ASSERT_EQ(e.kids.size(), 8u * w);
      for (unsigned i = 0; i < 8 * w; ++i) {
        bytes plane((count + 7) / 8, 0);
        for (size_t j = 0; j < count; ++j) {
          plane[j / 8] |= ((get_lane(data, j, w) >> i) & 1) << (j % 8);
        }
        ASSERT_EQ(e.kids[i].data, plane) << "plane " << i;
      }
    });
  }
}

TEST(ops_b_bitplanes, through_the_interpreter) {
  node const p = chunk_program(opcode::bitplanes, {});
  for_samples(1, [&](bytes const& data) { EXPECT_TRUE(roundtrips(p, data)); });
}

TEST(ops_b_bitplanes, nonzero_padding_is_rejected) {
  node const n = op_node(opcode::bitplanes);
  for (unsigned w : widths) {
    bytes data(11 * w, 0xff);
    encoded e = encode_op(n, lane(w), data);
    EXPECT_EQ(code_of([&] { decode_op(n, lane(w), e, data.size()); }),
              errc::ok);
    e.kids[5].data.back() |= 0x08;  // element 11 does not exist
    EXPECT_EQ(code_of([&] { decode_op(n, lane(w), e, data.size()); }),
              errc::corrupt);
  }
}

// ----------------------------------------------------------------- repeat

TEST(ops_b_repeat, roundtrips_adversarial) {
  for (unsigned w : widths) {
    for (uint64_t p : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{7},
                       uint64_t{64}, uint64_t{5000}, uint64_t{1} << 62}) {
      node const n = op_node(opcode::repeat, {p});
      for_samples(w, [&](bytes data) {
        size_t const count = data.size() / w;
        bool periodic = true;
        for (size_t i = p; i < count && periodic; ++i) {
          periodic = get_lane(data, i, w) == get_lane(data, i % p, w);
        }
        EXPECT_EQ(op_roundtrips(n, lane(w), data), periodic);
        // Planted: tile the first period.
        for (size_t i = p; i < count; ++i) {
          set_lane(data, i, w, get_lane(data, i % p, w));
        }
        encoded e;
        ASSERT_TRUE(op_roundtrips(n, lane(w), data, &e));
        EXPECT_EQ(e.kids[0].data.size(), std::min<uint64_t>(p, count) * w);
      });
    }
  }
}

TEST(ops_b_repeat, through_the_interpreter) {
  node const p = chunk_program(opcode::repeat, {5});
  bytes data;
  for (int i = 0; i < 1003; ++i)
    data.push_back(static_cast<uint8_t>(i % 5 * 9));
  EXPECT_TRUE(roundtrips(p, data));
  data[1002] ^= 1;
  EXPECT_FALSE(roundtrips(p, data));
  bytes payload;
  put_blob(payload, bytes{1, 2, 3, 4});  // one short of a period
  bytes out(12);
  EXPECT_EQ(code_of([&] { decode_chunk(p, payload, 12, out.data()); }),
            errc::corrupt);
}

// ----------------------------------------------------------------- typing

TEST(ops_b_typing, ill_formed_nodes_are_rejected) {
  auto bad = [](opcode op, std::vector<uint64_t> params, value_type t,
                bytes blob = {}) {
    node n = op_node(op, std::move(params));
    n.blob = std::move(blob);
    return code_of([&] { find_op(op)->child_types(n, t); }) ==
           errc::bad_program;
  };
  for (opcode op : {opcode::palette, opcode::runs, opcode::bitplanes}) {
    EXPECT_TRUE(bad(op, {}, lane(3))) << opcode_name(op);
    EXPECT_TRUE(bad(op, {}, lane(2), {1})) << opcode_name(op);
  }
  EXPECT_TRUE(bad(opcode::palette, {3}, lane(4)));
  EXPECT_TRUE(bad(opcode::palette, {0}, lane(4)));
  EXPECT_TRUE(bad(opcode::palette, {1, 1}, lane(4)));
  EXPECT_TRUE(bad(opcode::palette, {2}, lane(1)));
  EXPECT_FALSE(bad(opcode::palette, {2}, lane(2)));
  EXPECT_TRUE(bad(opcode::runs, {1}, lane(2)));
  EXPECT_TRUE(bad(opcode::bitplanes, {1}, lane(2)));
  for (unsigned w : widths) {
    EXPECT_TRUE(bad(opcode::low_zero, {0}, lane(w)));
    EXPECT_TRUE(bad(opcode::low_zero, {8 * w}, lane(w)));
    EXPECT_FALSE(bad(opcode::low_zero, {8 * w - 1}, lane(w)));
    EXPECT_TRUE(bad(opcode::bitfields, {8 * w - 1}, lane(w)));
    EXPECT_TRUE(bad(opcode::bitfields, {8 * w, 1}, lane(w)));
    EXPECT_TRUE(bad(opcode::bitfields, {0, 8 * w}, lane(w)));
    EXPECT_FALSE(bad(opcode::bitfields, {8 * w}, lane(w)));
  }
  EXPECT_TRUE(bad(opcode::low_zero, {}, lane(4)));
  EXPECT_TRUE(bad(opcode::low_zero, {16, 1}, lane(4)));
  EXPECT_TRUE(bad(opcode::low_zero, {uint64_t{1} << 63}, lane(4)));
  EXPECT_TRUE(bad(opcode::low_zero, {4}, lane(3)));
  EXPECT_TRUE(bad(opcode::bitfields, {}, lane(2)));
  EXPECT_TRUE(bad(opcode::bitfields, {65, 63}, lane(16)));
  EXPECT_TRUE(bad(opcode::bitfields, {8, 8}, lane(1)));
  EXPECT_TRUE(bad(opcode::bitfields, {uint64_t{1} << 63, uint64_t{1} << 63, 16},
                  lane(2)));
  EXPECT_TRUE(bad(opcode::split, {4}, lane(2)));
  EXPECT_TRUE(bad(opcode::split, {4}, lane(4, meaning::fp32)));
  EXPECT_TRUE(bad(opcode::split, {}, bytes_type));
  EXPECT_TRUE(bad(opcode::split, {1, 2}, bytes_type));
  EXPECT_FALSE(bad(opcode::split, {4}, bytes_type));
  EXPECT_TRUE(bad(opcode::repeat, {0}, lane(2)));
  EXPECT_TRUE(bad(opcode::repeat, {}, lane(2)));
  EXPECT_TRUE(bad(opcode::repeat, {1, 1}, lane(2)));
  // Through parse_program: a serialized ill-typed program is rejected.
  node prog = make_op(opcode::bitfields, {3, 4},
                      {make_leaf(opcode::raw), make_leaf(opcode::raw)});
  EXPECT_EQ(code_of([&] { parse_program(serialize_program(prog)); }),
            errc::bad_program);
  node wrong_kids = make_op(opcode::runs, {}, {make_leaf(opcode::raw)});
  EXPECT_EQ(code_of([&] { check_program(wrong_kids); }), errc::bad_program);
}

// ------------------------------------------------- mutated payloads (fuzz)

TEST(ops_b_fuzz, mutated_payloads_fail_cleanly) {
  std::vector<node> const programs = {
      chunk_program(opcode::palette, {}),
      chunk_program(opcode::runs, {}),
      chunk_program(opcode::low_zero, {1}),
      chunk_program(opcode::split, {9}),
      chunk_program(opcode::bitfields, {2, 6}),
      chunk_program(opcode::bitplanes, {}),
      chunk_program(opcode::repeat, {4}),
  };
  std::mt19937_64 rng(11);
  bytes input;
  for (int i = 0; i < 40; ++i) input.push_back(static_cast<uint8_t>(i % 4 * 2));
  for (node const& p : programs) {
    bytes payload;
    encode_chunk(p, input, payload);
    for (int iter = 0; iter < 400; ++iter) {
      bytes m = payload;
      switch (rng() % 3) {
        case 0:
          m[rng() % m.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
          break;
        case 1:
          m.resize(rng() % m.size());
          break;
        default:
          m.insert(m.begin() + static_cast<ptrdiff_t>(rng() % m.size()),
                   static_cast<uint8_t>(rng()));
      }
      size_t const out_size = rng() % 4 == 0 ? rng() % 80 : input.size();
      bytes out(out_size);
      try {
        decode_chunk(p, m, out.size(), out.data());
      } catch (error const&) {
      }
    }
  }
}

}  // namespace
}  // namespace brevis::codec
