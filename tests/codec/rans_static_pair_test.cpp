// rans_static::coder::decode_pair and decode_siblings (and the
// interpreter's pairing of sibling rans_static leaves) decode exactly what
// separate decode calls do, on every vector path, and throw where they
// throw.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "codec/core/error.h"
#include "codec/dsl/interpreter.h"
#include "codec/entropy/rans_static.h"
#include "codec/leaves/rans_static.h"

namespace brevis::codec {
namespace {

namespace rs = rans_static;

// The kinds of CPU whose kernels the tuned level picks (rs::tune_for).
constexpr std::array<rs::tuning, 4> every_tuning = {
    rs::tuning::detected, rs::tuning::other, rs::tuning::zen, rs::tuning::zen4};

// `count` symbols of `width` bytes from `symbols` distinct values, skewed.
bytes skewed(size_t count, unsigned width, unsigned symbols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<unsigned> g(std::min(0.9, 4.0 / symbols));
  bytes d(count * width);
  for (size_t i = 0; i < count; ++i) {
    unsigned v = g(rng) % symbols;
    if (width == 2) v = v * 251 % 65536;  // spread over the 16-bit range
    d[width * i] = static_cast<uint8_t>(v);
    if (width == 2) d[width * i + 1] = static_cast<uint8_t>(v >> 8);
  }
  return d;
}

struct coded {
  std::unique_ptr<rs::coder> c;
  bytes payload;
  size_t count;
};

coded code(bytes const& d, unsigned width, unsigned scale) {
  std::vector<uint64_t> hist;
  rs::histogram(d, width, hist);
  size_t present = 0;
  for (uint64_t h : hist) present += h != 0;
  coded r{nullptr, {}, d.size() / width};
  if (present == 0) hist[0] = 1;  // an empty value still needs a table
  r.c = std::make_unique<rs::coder>(
      rs::normalize(hist, std::max(scale, static_cast<unsigned>(
                                              std::bit_width(present)))),
      width);
  r.c->encode(d, r.payload);
  return r;
}

// What decoding `a` then `b` alone gives: their outputs, or that one threw.
struct outcome {
  bytes a, b;
  bool threw = false;
  friend bool operator==(outcome const&, outcome const&) = default;
};

outcome alone(coded const& a, bytes const& pa, coded const& b,
              bytes const& pb) {
  outcome o{bytes(a.count * a.c->width()), bytes(b.count * b.c->width())};
  try {
    a.c->decode(pa, a.count, o.a.data());
    b.c->decode(pb, b.count, o.b.data());
  } catch (error const&) {
    o = outcome{{}, {}, true};
  }
  return o;
}

outcome paired(coded const& a, bytes const& pa, coded const& b,
               bytes const& pb) {
  outcome o{bytes(a.count * a.c->width()), bytes(b.count * b.c->width())};
  try {
    rs::coder::decode_pair({a.c.get(), pa, a.count, o.a.data()},
                           {b.c.get(), pb, b.count, o.b.data()});
  } catch (error const&) {
    o = outcome{{}, {}, true};
  }
  return o;
}

TEST(rans_static_pair_test, pairs_decode_like_two_decodes_on_every_path) {
  // Counts below and past wide_from, with odd tails, so that either stream
  // of a pair runs out of rounds first.
  size_t const w = rs::wide_from;
  std::vector<size_t> const counts = {0, 1,     31,     4099,    w - 1,
                                      w, w + 1, w + 33, w + 4099};
  struct shape {
    unsigned width, symbols, scale;
  };
  // Slot tables (8-bit below 2^15, 16-bit below 2^14 or past 256 symbols),
  // compact ones, one-symbol and full byte alphabets.
  std::vector<shape> const shapes = {{1, 100, 10}, {2, 60, 13}, {1, 256, 12},
                                     {2, 900, 16}, {1, 40, 15}, {2, 200, 14},
                                     {1, 1, 10},   {2, 1, 12}};
  uint32_t seed = 1;
  for (unsigned simd = 0; simd <= rs::simd_tuned; ++simd) {
    rs::limit_simd(simd);
    for (size_t k = 0; k < shapes.size(); ++k) {
      shape const sa = shapes[k];
      for (size_t m = 0; m < shapes.size(); ++m) {
        shape const sb = shapes[m];
        // Both wide with odd tails (the pair kernel's case), then counts
        // from the list.
        size_t const c = (k * shapes.size() + m + simd) % counts.size();
        for (auto const& [na, nb] :
             {std::pair{w + 2 * k + 1, w + 4099 - 3 * m},
              std::pair{counts[c], counts[(c * 7 + 3) % counts.size()]}}) {
          bytes const da = skewed(na, sa.width, sa.symbols, seed++);
          bytes const db = skewed(nb, sb.width, sb.symbols, seed++);
          coded const a = code(da, sa.width, sa.scale);
          coded const b = code(db, sb.width, sb.scale);
          outcome const p = paired(a, a.payload, b, b.payload);
          ASSERT_FALSE(p.threw) << simd << " " << k << " " << m << " " << na;
          EXPECT_EQ(p.a, da) << simd << " " << k << " " << m << " " << na;
          EXPECT_EQ(p.b, db) << simd << " " << k << " " << m << " " << nb;
        }
      }
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

// Cut and corrupted payloads of `n` and `n + 77` symbols, paired at every
// vector level: the same outputs or errors as decoding each alone.
void cut_and_corrupted_pairs_fail_like_two_decodes(size_t n) {
  unsigned const states = rs::lanes_for(n);
  bytes const da = skewed(n, 1, 120, 7);
  bytes const db = skewed(n + 77, 2, 50, 8);
  coded const a = code(da, 1, 11);
  coded const b = code(db, 2, 12);
  std::mt19937 rng(9);
  for (unsigned trial = 0; trial < 60; ++trial) {
    // Levels 0 to 3 and the tuned default (every level with every damage:
    // 60 trials cover the 20 pairs of trial % 5 and trial % 4).
    rs::limit_simd(trial % 5 == 4 ? rs::simd_tuned : trial % 5);
    bytes pa = a.payload, pb = b.payload;
    bytes& victim = trial % 2 ? pa : pb;
    switch (trial % 4) {
      case 0:  // cut at an even length, inside or past the states
        victim.resize(std::uniform_int_distribution<size_t>(
                          0, victim.size() / 2 - 1)(rng) *
                      2);
        break;
      case 1:  // cut by one byte
        victim.pop_back();
        break;
      case 2:  // a state below 2^16
        victim[4 * (trial % states) + 2] = 0;
        victim[4 * (trial % states) + 3] = 0;
        break;
      default:  // flipped words
        for (int f = 0; f < 4; ++f) {
          victim[std::uniform_int_distribution<size_t>(
              0, victim.size() - 1)(rng)] ^= 0x5a;
        }
    }
    outcome const want = alone(a, pa, b, pb);
    EXPECT_EQ(paired(a, pa, b, pb), want) << n << " " << trial;
    if (trial % 4 != 3) {
      EXPECT_TRUE(want.threw) << n << " " << trial;
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

TEST(rans_static_pair_test, cut_and_corrupted_pairs_fail_like_two_decodes) {
  cut_and_corrupted_pairs_fail_like_two_decodes(rs::wide_from + 1000);
}

// Narrow pairs (8 states each) take the AVX2 pair kernel on AMD CPUs, at
// the tuned level only (narrow_pair_rounds); elsewhere the narrow scalar
// loop.
TEST(rans_static_pair_test, cut_and_corrupted_narrow_pairs_fail_alike) {
  for (size_t n : {size_t{9}, size_t{5000}, rs::wide_from - 78}) {
    cut_and_corrupted_pairs_fail_like_two_decodes(n);
  }
}

// Payloads of 4096 to 65535 symbols coded wide (32 states from 2^12 on, the
// leaf's parameter), beside one coded wide too or narrow (the default):
// paired where both are wide, alone otherwise, they decode as alone, on
// every vector path.
TEST(rans_static_pair_test, pairs_follow_each_payloads_own_lane_count) {
  uint64_t const at = uint64_t{1} << 12;
  for (unsigned simd = 0; simd <= rs::simd_tuned; ++simd) {
    rs::limit_simd(simd);
    for (size_t na : {size_t{4096}, size_t{5001}, size_t{40000}}) {
      for (uint64_t wide_b : {at, rs::wide_from}) {
        bytes const da = skewed(na, 1, 120, static_cast<uint32_t>(na));
        bytes const db = skewed(na + 77, 2, 50, static_cast<uint32_t>(simd));
        coded a = code(da, 1, 11);
        coded b = code(db, 2, 12);
        a.payload.clear();
        a.c->encode(da, a.payload, at);
        b.payload.clear();
        b.c->encode(db, b.payload, wide_b);
        EXPECT_GE(a.payload.size(), 4 * rs::wide_lanes);
        outcome p{bytes(da.size()), bytes(db.size())};
        rs::coder::decode_pair(
            {a.c.get(), a.payload, a.count, p.a.data(), at},
            {b.c.get(), b.payload, b.count, p.b.data(), wide_b});
        EXPECT_EQ(p.a, da) << simd << " " << na << " " << wide_b;
        EXPECT_EQ(p.b, db) << simd << " " << na << " " << wide_b;
        // Decoded with the other lane count, a payload fails or differs.
        bytes wrong(da.size());
        bool threw = false;
        try {
          a.c->decode(a.payload, a.count, wrong.data());
        } catch (error const&) {
          threw = true;
        }
        EXPECT_TRUE(threw || wrong != da);
      }
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

// Sibling leaves of different parameters (one wide from 2^12 symbols, one
// at the default) through the interpreter: each decodes with its own lane
// count, whichever of them the interpreter pairs.
TEST(rans_static_pair_test, siblings_of_different_parameters_roundtrip) {
  for (size_t count : {size_t{4096}, size_t{9001}}) {
    bytes chunk(count * 2);
    std::mt19937 rng(static_cast<uint32_t>(count));
    std::geometric_distribution<unsigned> g(0.05);
    for (uint8_t& b : chunk) b = static_cast<uint8_t>(g(rng));
    std::vector<node> kids;
    for (unsigned k = 0; k < 2; ++k) {
      bytes plane(count);
      for (size_t i = 0; i < count; ++i) plane[i] = chunk[i * 2 + k];
      kids.push_back(make_rans_static(stream{plane, bytes_type}, 1));
    }
    for (unsigned wide_kid = 0; wide_kid < 2; ++wide_kid) {
      std::vector<node> planes = kids;
      planes[wide_kid].params = {12};
      node const program =
          make_op(opcode::view, {2, 0},
                  {make_op(opcode::planes, {}, std::move(planes)),
                   make_leaf(opcode::raw)});
      check_program(program);
      for (unsigned simd = 0; simd <= rs::simd_tuned; ++simd) {
        rs::limit_simd(simd);
        EXPECT_TRUE(roundtrips(program, chunk))
            << count << " " << wide_kid << " " << simd;
      }
      rs::limit_simd(rs::simd_tuned);
    }
  }
}

// Decodes every coded value of `set` from `payloads`, with
// decode_siblings (`together`) or one decode() each: the outputs, or none
// where it threw. The outputs start filled with 0xa5, so that a value never
// decoded cannot pass for one of zeros.
std::vector<bytes> decode_each(std::vector<coded> const& set,
                               std::vector<bytes> const& payloads,
                               bool together) {
  std::vector<bytes> out;
  std::vector<rs::coder::decode_job> jobs;
  out.reserve(set.size());
  jobs.reserve(set.size());
  for (coded const& c : set) out.emplace_back(c.count * c.c->width(), 0xa5);
  for (size_t k = 0; k < set.size(); ++k) {
    jobs.push_back({set[k].c.get(), payloads[k], set[k].count, out[k].data()});
  }
  try {
    if (together) {
      rs::coder::decode_siblings(jobs);
    } else {
      for (rs::coder::decode_job const& j : jobs) {
        j.c->decode(j.payload, j.count, j.out);
      }
    }
  } catch (error const&) {
    return {};  // threw
  }
  return out;
}

// Siblings of every kind at once (wide and narrow of both widths, a
// one-symbol table, an empty value, lengths that leave tails), at every
// level and, at the tuned one, as tuned for each kind of CPU: every kind
// encodes the same payloads, and decode_siblings, which pairs those it can,
// decodes exactly what decoding each alone does; with one payload damaged
// it throws where that does. Seven siblings, so some kind has one left over.
TEST(rans_static_pair_test, siblings_decode_like_separate_decodes) {
  size_t const w = rs::wide_from;
  struct sibling {
    size_t count;
    unsigned width, symbols, scale;
  };
  std::vector<sibling> const kinds = {{30000, 1, 100, 10}, {w + 999, 2, 60, 13},
                                      {5003, 2, 60, 13},   {w - 1, 1, 256, 12},
                                      {0, 2, 60, 13},      {w + 33, 1, 40, 10},
                                      {12345, 2, 1, 12}};
  std::vector<coded> set;
  std::vector<bytes> values;
  uint32_t seed = 40;
  for (sibling const& k : kinds) {
    values.push_back(skewed(k.count, k.width, k.symbols, seed++));
    set.push_back(code(values.back(), k.width, k.scale));
  }
  std::vector<bytes> payloads;
  payloads.reserve(set.size());
  for (coded const& c : set) payloads.push_back(c.payload);
  std::mt19937 rng(41);
  struct setting {
    unsigned simd;
    rs::tuning kind;
  };
  std::vector<setting> settings;
  for (unsigned simd = 0; simd < rs::simd_tuned; ++simd) {
    settings.push_back({simd, rs::tuning::detected});
  }
  for (rs::tuning kind : every_tuning) {
    settings.push_back({rs::simd_tuned, kind});
  }
  for (setting const& at : settings) {
    rs::limit_simd(at.simd);
    rs::tune_for(at.kind);
    std::string const where = std::to_string(at.simd) + " " +
                              std::to_string(static_cast<int>(at.kind));
    for (size_t k = 0; k < set.size(); ++k) {
      bytes again;
      set[k].c->encode(values[k], again);
      EXPECT_EQ(again, payloads[k]) << where << " " << k;
    }
    EXPECT_EQ(decode_each(set, payloads, true), values) << where;
    for (unsigned trial = 0; trial < 12; ++trial) {
      std::vector<bytes> damaged = payloads;
      bytes& victim = damaged[trial % set.size()];
      if (victim.empty()) continue;
      if (trial % 2 == 0) {
        victim.resize(victim.size() / 2 & ~size_t{1});
      } else {
        victim[std::uniform_int_distribution<size_t>(
            0, victim.size() - 1)(rng)] ^= 0x5a;
      }
      std::vector<bytes> const want = decode_each(set, damaged, false);
      EXPECT_EQ(decode_each(set, damaged, true), want) << where << " " << trial;
    }
  }
  rs::limit_simd(rs::simd_tuned);
  rs::tune_for(rs::tuning::detected);
}

// Six wide siblings, each with a 16-bit table of 2^16 slots (384 KiB of
// decode tables each): the leaf decodes them in batches of at most 1.5 MiB
// of tables, at every level and tuning, and the chunk comes back exactly.
TEST(rans_static_pair_test, many_large_tables_decode_in_batches) {
  unsigned const k = 6;
  size_t const per_class = 40000;  // >= 2^15 symbols: tables at 2^16
  bytes chunk(k * per_class * 2);
  std::mt19937 rng(6);
  std::geometric_distribution<unsigned> g(0.002);  // ~1,000 distinct values
  for (size_t i = 0; i < chunk.size() / 2; ++i) {
    uint16_t const v = static_cast<uint16_t>(g(rng) * 7 + 1000 * (i % k));
    chunk[2 * i] = static_cast<uint8_t>(v);
    chunk[2 * i + 1] = static_cast<uint8_t>(v >> 8);
  }
  value_type const u16{2, meaning::uint};
  std::vector<node> kids;
  for (unsigned c = 0; c < k; ++c) {
    bytes value(per_class * 2);
    for (size_t i = 0; i < per_class; ++i) {
      std::memcpy(&value[2 * i], &chunk[2 * (i * k + c)], 2);
    }
    kids.push_back(make_rans_static(stream{value, u16}, 2));
  }
  node classes = make_op(opcode::classes, {1, k}, std::move(kids));
  classes.blob = {0, 1, 2, 3, 4, 5};
  node const program =
      make_op(opcode::view, {2, static_cast<uint64_t>(meaning::uint)},
              {std::move(classes), make_leaf(opcode::raw)});
  check_program(program);
  for (unsigned simd = 0; simd <= rs::simd_tuned; ++simd) {
    rs::limit_simd(simd);
    for (rs::tuning kind : every_tuning) {
      rs::tune_for(kind);
      EXPECT_TRUE(roundtrips(program, chunk))
          << simd << " " << static_cast<int>(kind);
    }
  }
  rs::limit_simd(rs::simd_tuned);
  rs::tune_for(rs::tuning::detected);
}

// The interpreter pairs sibling rans_static leaves (planes of 2 or 4 bytes:
// one pair, two pairs, or a pair and a leaf alone beside a raw plane) and
// decodes chunks exactly.
TEST(rans_static_pair_test, sibling_leaves_roundtrip_through_the_interpreter) {
  for (unsigned variant = 0; variant < 3; ++variant) {
    unsigned const width = variant == 0 ? 2 : 4;
    size_t const count = rs::wide_from + 4099;
    bytes chunk(count * width);
    std::mt19937 rng(variant);
    std::geometric_distribution<unsigned> g(0.05);
    for (uint8_t& b : chunk) b = static_cast<uint8_t>(g(rng));
    std::vector<node> kids;
    for (unsigned k = 0; k < width; ++k) {
      bytes plane(count);
      for (size_t i = 0; i < count; ++i) plane[i] = chunk[i * width + k];
      kids.push_back(variant == 2 && k == 3
                         ? make_leaf(opcode::raw)
                         : make_rans_static(stream{plane, bytes_type}, 1));
    }
    node const program = make_op(
        opcode::view, {width, 0},
        {make_op(opcode::planes, {}, std::move(kids)), make_leaf(opcode::raw)});
    check_program(program);
    for (unsigned simd = 0; simd <= rs::simd_tuned; ++simd) {
      rs::limit_simd(simd);
      EXPECT_TRUE(roundtrips(program, chunk)) << variant << " " << simd;
    }
    rs::limit_simd(rs::simd_tuned);
  }
}

}  // namespace
}  // namespace brevis::codec
