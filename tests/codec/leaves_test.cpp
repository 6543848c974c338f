#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"
#include "codec/entropy/rans_static.h"
#include "codec/leaves/rans_static.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

using testing::adversarial;
using testing::test_lengths;

// Encodes `data` (whole lanes of `width`) with leaf `n`, decodes and compares.
// Width 1 goes through the interpreter with the leaf as the root program.
// Returns false when the leaf rejects the input as outside its domain.
bool roundtrip(node const& n, bytes const& data, unsigned width) {
  if (width == 1) {
    check_program(n);
    if (!roundtrips(n, data)) return false;
    bytes payload;
    encode_chunk(n, data, payload);
    bytes back(data.size());
    decode_chunk(parse_program(serialize_program(n)), payload, back.size(),
                 back.data());
    EXPECT_EQ(back, data);
    return true;
  }
  value_type const t{static_cast<uint8_t>(width), meaning::none};
  check_program(n, t);
  leaf_def const* leaf = find_leaf(n.op);
  bytes payload;
  try {
    leaf->encode(n, stream{data, t}, payload);
  } catch (error const& e) {
    if (e.code() == errc::domain) return false;
    throw;
  }
  bytes back(data.size());
  leaf->decode(n, t, payload, back.size(), back.data());
  EXPECT_EQ(back, data);
  return true;
}

bytes whole_lanes(bytes d, unsigned width) {
  d.resize(d.size() / width * width);
  return d;
}

bool all_zero(bytes const& d) {
  for (uint8_t b : d) {
    if (b) return false;
  }
  return true;
}

bool all_lanes_equal(bytes const& d, unsigned w) {
  for (size_t i = w; i < d.size(); ++i) {
    if (d[i] != d[i % w]) return false;
  }
  return true;
}

std::vector<node> general_leaves() {
  return {make_leaf(opcode::raw), make_leaf(opcode::rans0),
          make_leaf(opcode::rans1), make_leaf(opcode::zstd, {1}),
          make_leaf(opcode::zstd, {3})};
}

TEST(leaves_test, general_leaves_roundtrip_every_adversarial_input) {
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    for (size_t len : test_lengths()) {
      for (auto const& s : adversarial(len, w)) {
        bytes const d = whole_lanes(s.data, w);
        for (node const& n : general_leaves()) {
          SCOPED_TRACE(program_text(n) + " w=" + std::to_string(w) + " " +
                       s.name + " n=" + std::to_string(d.size()));
          EXPECT_TRUE(roundtrip(n, d, w));
        }
      }
    }
  }
}

TEST(leaves_test, zero_and_constant_roundtrip_or_reject_exactly_their_domain) {
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    for (size_t len : test_lengths()) {
      for (auto const& s : adversarial(len, w)) {
        bytes const d = whole_lanes(s.data, w);
        SCOPED_TRACE("w=" + std::to_string(w) + " " + s.name +
                     " n=" + std::to_string(d.size()));
        EXPECT_EQ(roundtrip(make_leaf(opcode::zero), d, w), all_zero(d));
        EXPECT_EQ(roundtrip(make_leaf(opcode::constant), d, w),
                  all_lanes_equal(d, w));
      }
    }
  }
}

// zero and constant check their domain in one compare of the value against
// itself shifted (by a byte, by a lane): one byte off anywhere, the first or
// the last included, is refused; the value itself is accepted.
TEST(leaves_test, zero_and_constant_refuse_one_byte_off_anywhere) {
  for (unsigned w : {1u, 2u, 4u, 8u}) {
    for (size_t lanes : {1u, 2u, 3u, 17u, 100u}) {
      bytes zeros(lanes * w, 0);
      bytes same(lanes * w);
      for (size_t i = 0; i < same.size(); ++i) {
        same[i] = static_cast<uint8_t>(0x51 + i % w);
      }
      EXPECT_TRUE(roundtrip(make_leaf(opcode::zero), zeros, w));
      EXPECT_TRUE(roundtrip(make_leaf(opcode::constant), same, w));
      for (size_t at = 0; at < zeros.size(); ++at) {
        SCOPED_TRACE("w=" + std::to_string(w) + " lanes=" +
                     std::to_string(lanes) + " at=" + std::to_string(at));
        bytes z = zeros;
        z[at] = 1;
        EXPECT_FALSE(roundtrip(make_leaf(opcode::zero), z, w));
        bytes c = same;
        c[at] ^= 0x80;
        EXPECT_EQ(roundtrip(make_leaf(opcode::constant), c, w), lanes == 1);
      }
    }
  }
}

// constant's decoder fills by copying what it wrote (doubling, then in
// blocks): every width and length around the block's size, exactly.
TEST(leaves_test, constant_fills_every_width_and_length_exactly) {
  leaf_def const* leaf = find_leaf(opcode::constant);
  node const n = make_leaf(opcode::constant);
  for (unsigned w : {1u, 2u, 3u, 4u, 5u, 8u, 16u, 255u}) {
    value_type const t{static_cast<uint8_t>(w), meaning::none};
    bytes lane(w);
    for (unsigned i = 0; i < w; ++i) lane[i] = static_cast<uint8_t>(7 * i + 1);
    for (size_t lanes :
         {size_t{1}, size_t{2}, size_t{3}, size_t{1000}, size_t{4096 / w},
          size_t{4096 / w + 1}, size_t{8192 / w + 3}, size_t{100003}}) {
      bytes want;
      for (size_t i = 0; i < lanes; ++i)
        want.insert(want.end(), lane.begin(), lane.end());
      bytes back(want.size() + 1, 0xee);  // one byte past: untouched
      leaf->decode(n, t, lane, want.size(), back.data());
      EXPECT_EQ(back.back(), 0xee) << w << " " << lanes;
      back.pop_back();
      EXPECT_EQ(back, want) << w << " " << lanes;
    }
  }
}

TEST(leaves_test, rans_static_roundtrips_with_its_own_table) {
  for (unsigned w : {1u, 2u}) {
    value_type const t{static_cast<uint8_t>(w), meaning::none};
    for (size_t len : test_lengths()) {
      for (auto const& s : adversarial(len, w)) {
        bytes const d = whole_lanes(s.data, w);
        SCOPED_TRACE("w=" + std::to_string(w) + " " + s.name +
                     " n=" + std::to_string(d.size()));
        if (d.empty()) {
          EXPECT_THROW(make_rans_static(stream{d, t}, w), error);
          continue;
        }
        node const n = make_rans_static(stream{d, t}, w);
        EXPECT_TRUE(roundtrip(n, d, w));
      }
    }
  }
}

// The leaf's parameter: payloads interleave 32 states from 2^p symbols on
// (FORMAT.md section 4.6). Every length and adversarial input roundtrips at
// each p, through the interpreter and a serialized program.
TEST(leaves_test, rans_static_wide_lanes_parameter_roundtrips) {
  for (unsigned w : {1u, 2u}) {
    value_type const t{static_cast<uint8_t>(w), meaning::none};
    for (size_t len : test_lengths()) {
      for (auto const& s : adversarial(len, w)) {
        bytes const d = whole_lanes(s.data, w);
        if (d.empty()) continue;
        for (uint64_t p : {0u, 1u, 3u, 12u, 16u}) {
          SCOPED_TRACE("w=" + std::to_string(w) + " " + s.name + " n=" +
                       std::to_string(d.size()) + " p=" + std::to_string(p));
          node n = make_rans_static(stream{d, t}, w);
          n.params = {p};
          EXPECT_TRUE(roundtrip(n, d, w));
        }
      }
    }
  }
}

// At p = 12 a payload of 4096 symbols or more carries 32 states, 96 bytes
// more than the default's 8; fewer symbols code as without the parameter.
TEST(leaves_test, rans_static_wide_lanes_parameter_sets_the_states) {
  for (unsigned w : {1u, 2u}) {
    value_type const t{static_cast<uint8_t>(w), meaning::none};
    for (size_t count : {4095u, 4096u, 4097u, 4127u, 4129u, 70000u}) {
      SCOPED_TRACE("w=" + std::to_string(w) + " n=" + std::to_string(count));
      bytes d;
      for (size_t i = 0; i < count; ++i) {
        uint16_t const v = static_cast<uint16_t>((i * 2654435761u) >> 27);
        d.push_back(static_cast<uint8_t>(v));
        if (w == 2) d.push_back(static_cast<uint8_t>(v >> 4));
      }
      node plain = make_rans_static(stream{d, t}, w);
      node wide = plain;
      wide.params = {12};
      bytes a, b;
      find_leaf(opcode::rans_static)->encode(plain, stream{d, t}, a);
      find_leaf(opcode::rans_static)->encode(wide, stream{d, t}, b);
      if (count < 4096 || count >= rans_static::wide_from) {
        EXPECT_EQ(a, b);
      } else {
        EXPECT_GE(b.size(), a.size() + 64);
        EXPECT_LE(b.size(), a.size() + 128);
      }
      EXPECT_TRUE(roundtrip(wide, d, w));
    }
  }
}

TEST(leaves_test, rans_static_rejects_symbols_outside_its_table) {
  bytes const sample = {1, 2, 3, 1, 2, 3};
  node const n = make_rans_static(stream{sample, bytes_type}, 1);
  EXPECT_TRUE(roundtrip(n, {3, 3, 1}, 1));
  bytes const other = {1, 2, 4};
  bytes payload;
  try {
    find_leaf(opcode::rans_static)
        ->encode(n, stream{other, bytes_type}, payload);
    FAIL();
  } catch (error const& e) {
    EXPECT_EQ(e.code(), errc::domain);
  }
  // Single-symbol tables too.
  node const one = make_rans_static(stream{bytes{7, 7}, bytes_type}, 1);
  EXPECT_TRUE(roundtrip(one, {7, 7, 7, 7}, 1));
  EXPECT_FALSE(roundtrip(one, {7, 8}, 1));
  // Lanes wider than 16 bits are ill-typed.
  EXPECT_THROW(check_program(n, value_type{4, meaning::none}), error);
}

TEST(leaves_test, bad_parameters_are_rejected) {
  EXPECT_THROW(check_program(make_leaf(opcode::zstd, {0})), error);
  EXPECT_THROW(check_program(make_leaf(opcode::zstd, {23})), error);
  EXPECT_THROW(check_program(make_leaf(opcode::zstd)), error);
  EXPECT_THROW(check_program(make_leaf(opcode::rans0, {1})), error);
  EXPECT_THROW(check_program(make_leaf(opcode::zero, {1})), error);
  EXPECT_THROW(check_program(make_leaf(opcode::rans_static)), error);
  // rans_static's one parameter is at most 16.
  node n = make_rans_static(stream{bytes{1, 2, 3}, bytes_type}, 1);
  n.params = {16};
  EXPECT_NO_THROW(check_program(n));
  n.params = {17};
  EXPECT_THROW(check_program(n), error);
  n.params = {12, 12};
  EXPECT_THROW(check_program(n), error);
}

// Every truncation and many random mutations of valid payloads must decode
// to an error or to some bytes, never crash or write past the output.
void hammer(node const& n, bytes const& data, unsigned width, uint32_t seed) {
  value_type const t{static_cast<uint8_t>(width), meaning::none};
  leaf_def const* leaf = find_leaf(n.op);
  bytes payload;
  leaf->encode(n, stream{data, t}, payload);
  bytes out(data.size());
  auto attempt = [&](bytes const& p, size_t size) {
    bytes o(size);
    try {
      leaf->decode(n, t, p, size, o.data());
    } catch (error const&) {
    }
  };
  // Every truncation of small payloads, a spread of them for large ones.
  size_t const step = payload.size() < 1000 ? 1 : payload.size() / 300;
  for (size_t k = 0; k < payload.size(); k += step) {
    attempt(bytes(payload.begin(), payload.begin() + k), data.size());
  }
  std::mt19937 rng(seed);
  // Fewer trials on large inputs keep the Debug+ASan run short.
  int const trials = data.size() >= 5000 ? 40 : 300;
  for (int i = 0; i < trials; ++i) {
    bytes p = payload;
    int const flips = 1 + rng() % 4;
    for (int f = 0; f < flips && !p.empty(); ++f) {
      p[rng() % p.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    }
    attempt(p, data.size());
  }
  for (int i = 0; i < trials / 3; ++i) {
    bytes p(rng() % 300);
    for (uint8_t& b : p) b = static_cast<uint8_t>(rng());
    if (!p.empty() && i % 2) p[0] = static_cast<uint8_t>(rng() % 2 ? 0 : 4);
    attempt(p, data.size());
    attempt(p, rng() % 5000);
  }
  // The real header (mode, size, part of the tables) followed by garbage.
  for (int i = 0; i < trials / 3 && payload.size() > 2; ++i) {
    bytes p(
        payload.begin(),
        payload.begin() + static_cast<long>(1 + rng() % (payload.size() - 1)));
    size_t const extra = rng() % (payload.size() + 64);
    for (size_t k = 0; k < extra; ++k) p.push_back(static_cast<uint8_t>(rng()));
    attempt(p, data.size());
  }
  // Wrong sizes.
  attempt(payload, data.size() + width);
  if (data.size() >= width) attempt(payload, data.size() - width);
}

TEST(leaves_test, order1_survives_single_successor_contexts) {
  // htscodecs 1.3's 4-way order-1 coder cannot decode its own stream here.
  for (size_t n : {2048u, 100000u}) {
    bytes d(n);
    for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i * 7);
    EXPECT_TRUE(roundtrip(make_leaf(opcode::rans1), d, 1));
  }
}

TEST(leaves_test, malformed_payloads_throw_and_never_crash) {
  std::mt19937 rng(5);
  for (size_t len : {1u, 37u, 600u, 5000u, 40000u}) {
    bytes d(len);
    std::normal_distribution<float> g(0, 0.02f);
    for (size_t i = 0; i + 1 < len; i += 2) {
      uint16_t const v = testing::to_bf16(g(rng));
      d[i] = static_cast<uint8_t>(v);
      d[i + 1] = static_cast<uint8_t>(v >> 8);
    }
    for (node const& n : general_leaves()) {
      SCOPED_TRACE(program_text(n) + " n=" + std::to_string(len));
      hammer(n, d, 1, static_cast<uint32_t>(len));
    }
    hammer(make_leaf(opcode::constant), bytes(len, 3), 1, 1);
    hammer(make_leaf(opcode::zero), bytes(len, 0), 1, 1);
    bytes const even = whole_lanes(d, 2);
    if (!even.empty()) {
      hammer(make_rans_static(stream{even, {2, meaning::none}}, 2), even, 2, 2);
    }
    hammer(make_rans_static(stream{d, bytes_type}, 1), d, 1, 3);
    node wide = make_rans_static(stream{d, bytes_type}, 1);
    wide.params = {12};
    hammer(wide, d, 1, 4);
  }
}

bytes gaussian_bf16(size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0, 0.02f);
  bytes d;
  d.reserve(2 * count);
  for (size_t i = 0; i < count; ++i)
    testing::append(d, testing::to_bf16(g(rng)));
  return d;
}

TEST(leaves_test, throughput_on_gaussian_bf16) {
  bytes const d = gaussian_bf16(512 * 1024, 11);
  value_type const t{2, meaning::bf16};
  std::vector<std::pair<std::string, node>> leaves = {
      {"rans0", make_leaf(opcode::rans0)},
      {"rans1", make_leaf(opcode::rans1)},
      {"zstd:3", make_leaf(opcode::zstd, {3})},
      {"rans_static", make_rans_static(stream{d, t}, 2)},
  };
  using clock = std::chrono::steady_clock;
  for (auto const& [name, n] : leaves) {
    leaf_def const* leaf = find_leaf(n.op);
    bytes payload;
    bytes back(d.size());
    int const reps = 3;
    double enc = 1e9, dec = 1e9;
    for (int r = 0; r < reps; ++r) {
      payload.clear();
      auto t0 = clock::now();
      leaf->encode(n, stream{d, t}, payload);
      auto t1 = clock::now();
      leaf->decode(n, t, payload, back.size(), back.data());
      auto t2 = clock::now();
      enc = std::min(enc, std::chrono::duration<double>(t1 - t0).count());
      dec = std::min(dec, std::chrono::duration<double>(t2 - t1).count());
    }
    ASSERT_EQ(back, d);
    std::cout << "  " << name << ": ratio "
              << static_cast<double>(d.size()) /
                     static_cast<double>(payload.size() + n.blob.size())
              << ", encode " << d.size() / enc / 1e6 << " MB/s, decode "
              << d.size() / dec / 1e6 << " MB/s\n";
  }
}

// A chunk can be the last bytes of a mapped file, and a leaf at a program's
// root reads the chunk in place when it can: no leaf may read past its
// input (htscodecs' vector coders do, so theirs gets a copy). The input
// here ends right before an inaccessible page.
TEST(leaves_test, leaves_at_the_root_read_no_byte_past_the_chunk) {
  size_t const page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t const size = 16 * page;
  void* const area = ::mmap(nullptr, size + page, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(area, MAP_FAILED);
  auto* const base = static_cast<uint8_t*>(area);
  ASSERT_EQ(::mprotect(base + size, page, PROT_NONE), 0);
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0, 0.02f);
  for (size_t n : {size_t{40000}, size_t{65536}, size_t{4097}}) {
    uint8_t* const in = base + size - n;
    uint16_t v = 0;
    for (size_t i = 0; i < n; ++i) {  // bf16 lanes, the last one cut if odd
      if (i % 2 == 0) v = testing::to_bf16(g(rng));
      in[i] = static_cast<uint8_t>(i % 2 == 0 ? v : v >> 8);
    }
    byte_view const chunk(in, n);
    for (opcode op : {opcode::rans0, opcode::rans1, opcode::raw}) {
      SCOPED_TRACE(std::string(opcode_name(op)) + " n=" + std::to_string(n));
      bytes payload;
      encode_chunk(make_leaf(op), chunk, payload);
      bytes back(n);
      decode_chunk(make_leaf(op), payload, n, back.data());
      EXPECT_TRUE(std::equal(back.begin(), back.end(), chunk.begin()));
    }
    stream const whole{bytes(chunk.begin(), chunk.end()), {2, meaning::uint}};
    node const view =
        make_op(opcode::view, {2, static_cast<uint64_t>(meaning::uint)},
                {make_rans_static(whole, 2), make_leaf(opcode::raw)});
    bytes payload;
    encode_chunk(view, chunk, payload);
    bytes back(n);
    decode_chunk(view, payload, n, back.data());
    EXPECT_TRUE(std::equal(back.begin(), back.end(), chunk.begin()));
  }
  ::munmap(area, size + page);
}

// The leaf keeps the coders it built from its nodes' blobs, bounded by the
// decode tables they have built. Six 16-bit tables at 2^16 slots (384 KiB of
// decode tables each, more than the bound holds of them) that only encode,
// in turn, as a file's shared tables do for its small tensors: each is built
// once. Decoded in turn, their tables are charged and evict each other.
TEST(leaves_test, rans_static_coders_that_only_encode_stay_cached) {
  value_type const t{2, meaning::none};
  std::vector<node> nodes;
  std::vector<bytes> data;
  for (uint32_t k = 0; k < 6; ++k) {
    bytes d(size_t{2} * 40000);
    uint64_t x = 0x9e3779b97f4a7c15ull * (k + 1);
    for (size_t i = 0; i < d.size(); i += 2) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      // ~3,000 symbols, a different range for each table.
      uint32_t const v = 1000 * k + static_cast<uint32_t>(x % 3000);
      d[i] = static_cast<uint8_t>(v);
      d[i + 1] = static_cast<uint8_t>(v >> 8);
    }
    nodes.push_back(make_rans_static(stream{d, t}, 2));
    data.push_back(std::move(d));
  }
  leaf_def const* const leaf = find_leaf(opcode::rans_static);
  std::vector<bytes> coded(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    leaf->encode(nodes[i], stream{data[i], t}, coded[i]);
  uint64_t const built = rans_static_coders_built();
  for (int round = 0; round < 4; ++round) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      bytes again;
      leaf->encode(nodes[i], stream{data[i], t}, again);
      EXPECT_EQ(again, coded[i]);
    }
  }
  EXPECT_EQ(rans_static_coders_built(), built);
  for (int round = 0; round < 2; ++round) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      bytes back(data[i].size());
      leaf->decode(nodes[i], t, coded[i], back.size(), back.data());
      EXPECT_EQ(back, data[i]);
    }
  }
  // After each look at most two keep their 384 KiB (the bound is 1 MiB):
  // the second round rebuilds at least four.
  EXPECT_GE(rans_static_coders_built(), built + 4);
}

// Encoders have a bound of their own (4 MiB): four with tables of 49,152
// symbols up to 2^16 (1.25 MiB each, most of it their index and entries)
// that only encode, in turn, evict each other.
TEST(leaves_test, rans_static_encoders_past_their_bound_are_evicted) {
  value_type const t{2, meaning::none};
  std::vector<node> nodes;
  std::vector<bytes> data;
  for (uint32_t k = 0; k < 4; ++k) {
    bytes d;
    for (uint32_t v = 0; v < 65536; ++v) {
      if (v % 4 == k) continue;  // a different set of symbols for each
      for (int twice = 0; twice < 2; ++twice) {
        d.push_back(static_cast<uint8_t>(v));
        d.push_back(static_cast<uint8_t>(v >> 8));
      }
    }
    nodes.push_back(make_rans_static(stream{d, t}, 2));
    data.push_back(std::move(d));
  }
  leaf_def const* const leaf = find_leaf(opcode::rans_static);
  uint64_t const built = rans_static_coders_built();
  std::vector<bytes> first(nodes.size());
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      bytes coded;
      leaf->encode(nodes[i], stream{data[i], t}, coded);
      if (round == 0) first[i] = coded;
      EXPECT_EQ(coded, first[i]);
    }
  }
  // Kept, each would be built at most once (4); at most three encoders fit,
  // so the rounds after the first rebuild some.
  EXPECT_GT(rans_static_coders_built(), built + 4);
}

}  // namespace
}  // namespace brevis::codec
