#include "codec/entropy/rans_static.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <numeric>
#include <queue>
#include <random>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/entropy/rans_static_simd.h"
#include "codec/leaves/rans_static.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

namespace rs = rans_static;

bytes gaussian_bf16(size_t count, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0, 0.02f);
  bytes d;
  d.reserve(2 * count);
  for (size_t i = 0; i < count; ++i)
    testing::append(d, testing::to_bf16(g(rng)));
  return d;
}

// Builds the table from `d` itself, codes, decodes, compares; returns the
// payload size in bytes.
size_t roundtrip(bytes const& d, unsigned width) {
  value_type const t{static_cast<uint8_t>(width), meaning::none};
  node const n = make_rans_static(stream{d, t}, width);
  check_program(n, t);
  leaf_def const* leaf = find_leaf(opcode::rans_static);
  bytes payload;
  leaf->encode(n, stream{d, t}, payload);
  bytes back(d.size());
  leaf->decode(n, t, payload, back.size(), back.data());
  EXPECT_EQ(back, d);
  return payload.size();
}

// Slot tables of finished coders are pooled and taken by later ones, larger
// than they need (a 2^16-slot table for a 2^10 one) or of other widths:
// every decode is exact whatever table it lands in, at every vector level.
TEST(rans_static_test, coders_decode_exactly_from_recycled_tables) {
  struct shape {
    unsigned width, scale;
    size_t count;
  };
  // 16-bit symbols past 256 keep slot tables at 2^14 and up.
  std::vector<shape> const shapes = {
      {2, 16, rs::wide_from + 9},   {1, 10, 5000},
      {2, 13, rs::wide_from},       {2, 16, 3000},
      {1, 12, rs::wide_from + 100}, {2, 15, 40000}};
  uint32_t seed = 5;
  for (unsigned simd : {0u, 1u, 2u, 3u, rs::simd_tuned}) {
    rs::limit_simd(simd);
    for (int round = 0; round < 3; ++round) {
      for (shape const& s : shapes) {
        bytes const g = gaussian_bf16(s.count, seed++);
        bytes d;
        for (size_t i = 0; i < s.count; ++i) {
          d.push_back(g[2 * i + (s.width == 1 ? 1 : 0)]);
          if (s.width == 2) d.push_back(g[2 * i + 1]);
        }
        std::vector<uint64_t> hist;
        rs::histogram(d, s.width, hist);
        rs::coder const c(rs::normalize(hist, s.scale), s.width);
        bytes payload;
        c.encode(d, payload);
        bytes back(d.size());
        c.decode(payload, s.count, back.data());
        EXPECT_EQ(back, d) << simd << " " << s.width << " " << s.scale;
      }
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

// Alphabets of up to 256 symbols get 2^12-slot tables (which decode from
// L1) where that costs at most fast_table_margin more; a skew whose rare
// symbols would each take far more than their share at 2^12 keeps the
// larger table, and so do larger alphabets.
TEST(rans_static_test, small_alphabets_get_fast_tables_unless_they_cost) {
  std::mt19937 rng(7);
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
  // The chosen table's scale; choose_rans_static gives the same table with
  // its blob, whichever precision won.
  auto chosen_scale = [&] {
    rs::table const t = choose_rans_static_table(symbols, counts);
    rans_static_choice const c = choose_rans_static(symbols, counts);
    EXPECT_TRUE(c.table == t);
    EXPECT_EQ(c.blob, serialize_rans_static_table(t));
    return t.scale;
  };
  for (uint32_t s = 0; s < 128; ++s) {  // bf16's mantissa: near uniform
    symbols.push_back(s);
    counts.push_back(8000 + rng() % 400);
  }
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  ASSERT_GT(rans_static_scale_for(symbols.size(), n), fast_table_scale);
  EXPECT_EQ(chosen_scale(), fast_table_scale);

  symbols.clear(), counts.clear();  // one dominant symbol, 200 singletons
  for (uint32_t s = 0; s < 201; ++s) {
    symbols.push_back(s);
    counts.push_back(s == 100 ? 10000000 : 1);
  }
  EXPECT_EQ(chosen_scale(), rs::max_scale);

  symbols.clear(), counts.clear();  // past the small alphabets
  for (uint32_t s = 0; s < 4000; ++s) {
    symbols.push_back(3 * s);
    counts.push_back(100 + rng() % 100);
  }
  EXPECT_EQ(chosen_scale(), rs::max_scale);

  // The fast tables code what they were made from, on every path.
  bytes d;
  for (size_t i = 0; i < 3 * rs::wide_from; ++i) {
    d.push_back(static_cast<uint8_t>(rng() % 128));
  }
  std::vector<uint64_t> hist;
  rs::histogram(d, 1, hist);
  rs::table const t = choose_rans_static_table(hist);
  ASSERT_EQ(t.scale, fast_table_scale);
  rs::coder const c(t, 1);
  bytes payload;
  c.encode(d, payload);
  for (unsigned simd : {0u, 1u, 2u, 3u, rs::simd_tuned}) {
    rs::limit_simd(simd);
    bytes back(d.size());
    c.decode(payload, d.size(), back.data());
    EXPECT_EQ(back, d) << simd;
  }
  rs::limit_simd(rs::simd_tuned);
}

// The AVX2 slot fill writes whole vectors that spill into the next symbols'
// slots: every layout (single symbols, runs of 1s, a large last symbol,
// frequencies around multiples of 8, every precision) gives exactly the
// slots the definition gives, and nothing past the table.
TEST(rans_static_test, avx2_slot_fill_writes_exactly_the_slots) {
  if (!rs::simd::avx2()) GTEST_SKIP() << "no AVX2";
  std::mt19937 rng(31);
  auto check = [](rs::table const& t) {
    uint32_t const total = 1u << t.scale;
    std::vector<uint32_t> step(total + 16, 0xdeadbeef);
    std::vector<uint16_t> symbol(total + 17, 0xbeef);
    rs::simd::fill_slots_avx2(t, step.data(), symbol.data());
    uint32_t start = 0;
    for (size_t i = 0; i < t.symbols.size(); ++i) {
      for (uint32_t k = 0; k < t.freqs[i]; ++k) {
        ASSERT_EQ(step[start + k], t.freqs[i] | k << 16) << start + k;
        ASSERT_EQ(symbol[start + k], t.symbols[i]) << start + k;
      }
      start += t.freqs[i];
    }
    for (uint32_t j = total; j < total + 16; ++j) {
      ASSERT_EQ(step[j], 0xdeadbeef);
      ASSERT_EQ(symbol[j], 0xbeef);
    }
  };
  for (unsigned scale = 1; scale <= rs::max_scale; ++scale) {
    uint32_t const total = 1u << scale;
    for (int round = 0; round < 12; ++round) {
      // Random cuts of [0, total) into runs, with many tiny ones; symbols
      // spread over 16 bits.
      rs::table t;
      t.scale = scale;
      uint32_t left = total, sym = rng() % 50;
      while (left > 0) {
        uint32_t f = 1;
        switch (round % 4) {
          case 0:
            f = 1;
            break;
          case 1:
            f = 1 + rng() % 17;
            break;
          case 2:
            f = (rng() % 4 ? 1 + rng() % 9 : 1 + rng() % 300);
            break;
          default:
            f = 8 * (1 + rng() % 4) + (rng() % 3) - 1;
            break;
        }
        if (round % 3 == 2 && t.symbols.size() == 3) f = left;  // big last
        f = std::min(f, left);
        t.symbols.push_back(sym);
        t.freqs.push_back(f);
        sym += 1 + (rng() % 3 == 0 ? rng() % 20 : 0);
        left -= f;
        if (sym >= 65536 - 1) break;
      }
      if (left > 0) t.freqs.back() += left;
      ASSERT_NO_THROW(rs::validate(t, 16));
      check(t);
    }
    check(rs::table{scale, {77}, {total}});  // one symbol owns every slot
  }
}

// The branch-free pass of validate accepts exactly the valid tables; each
// defect still gets its own error.
TEST(rans_static_test, validate_rejects_each_defect) {
  rs::table const good{4, {1, 5, 9, 200}, {3, 5, 7, 1}};
  EXPECT_NO_THROW(rs::validate(good, 8));
  auto rejects = [](rs::table const& t, unsigned bits) {
    EXPECT_THROW(rs::validate(t, bits), error);
  };
  rs::table t = good;
  t.symbols[3] = 256;  // past the alphabet
  rejects(t, 8);
  EXPECT_NO_THROW(rs::validate(t, 16));
  t = good;
  t.symbols[2] = 5;  // repeated
  rejects(t, 8);
  t = good;
  t.symbols = {5, 1, 9, 200};  // decreasing
  rejects(t, 8);
  t = good;
  t.freqs = {3, 0, 12, 1};  // zero, sum right
  rejects(t, 8);
  t = good;
  t.freqs = {3, 5, 7, 2};  // sum over
  rejects(t, 8);
  t = good;
  t.freqs = {3, 5, 6, 1};  // sum under
  rejects(t, 8);
  t = good;
  t.freqs = {0xffffffffu, 5, 7, 1};  // a u32 that would wrap a 32-bit sum
  rejects(t, 8);
  t = good;
  t.freqs.pop_back();  // ragged
  rejects(t, 8);
}

TEST(rans_static_test, decode_table_bytes_follow_the_layout) {
  rs::table t;
  t.scale = 16;
  for (uint32_t s = 0; s < 300; ++s) t.symbols.push_back(s);
  t.freqs.assign(300, 1);
  t.freqs[0] = (1u << 16) - 299;
  // Slots of a 4-byte step and a 2-byte symbol, the symbol padded.
  EXPECT_EQ(rs::coder(t, 2).decode_table_bytes(), 6 * ((size_t{1} << 16) + 1));
  t.symbols.resize(200), t.freqs.resize(200);
  t.freqs[0] = (1u << 16) - 199;
  // Compact: a byte a slot, 3 of padding.
  EXPECT_EQ(rs::coder(t, 2).decode_table_bytes(), (size_t{1} << 16) + 3);
  t.symbols.resize(1), t.freqs.assign(1, 1u << 16);
  EXPECT_EQ(rs::coder(t, 2).decode_table_bytes(), 0u);
}

TEST(rans_static_test, gaussian_bf16_is_within_half_a_percent_of_entropy) {
  bytes const d = gaussian_bf16(512 * 1024, 3);
  std::vector<uint64_t> hist;
  rs::histogram(d, 2, hist);
  double const h = rs::entropy_bits(hist);
  size_t const payload = roundtrip(d, 2);
  node const n = make_rans_static(stream{d, {2, meaning::bf16}}, 2);
  double const excess = 8.0 * static_cast<double>(payload) / h - 1;
  std::cout << "  entropy " << h / 8 << " B, payload " << payload << " B (+"
            << 100 * excess << "%), table blob " << n.blob.size()
            << " B, scale " << unsigned{n.blob[0]} << "\n";
  EXPECT_LT(excess, 0.005);
  // The estimate matches the real size closely.
  double const est = estimate_rans_static_bits(hist);
  EXPECT_NEAR(est, 8.0 * static_cast<double>(payload + n.blob.size()),
              0.001 * est);
}

TEST(rans_static_test, exponent_bytes_code_near_entropy) {
  bytes const d = gaussian_bf16(200000, 4);
  bytes hi;
  for (size_t i = 1; i < d.size(); i += 2) hi.push_back(d[i]);
  std::vector<uint64_t> hist;
  rs::histogram(hi, 1, hist);
  double const h = rs::entropy_bits(hist);
  size_t const payload = roundtrip(hi, 1);
  EXPECT_LT(8.0 * static_cast<double>(payload), h * 1.005 + 400);
}

TEST(rans_static_test, single_symbol_costs_nothing) {
  bytes const d(1000, 0x42);
  EXPECT_EQ(roundtrip(d, 1), 0u);
  bytes d2;
  for (int i = 0; i < 1000; ++i) testing::append<uint16_t>(d2, 0xbeef);
  EXPECT_EQ(roundtrip(d2, 2), 0u);
}

TEST(rans_static_test, extreme_skew_roundtrips_and_stays_small) {
  bytes d(1000001, 9);
  d[123457] = 200;
  size_t const payload = roundtrip(d, 1);
  // The rare symbol costs ~16 bits, the common one ~2^-16 bits each; the
  // rest is the final states.
  size_t const states = 4 * rs::lanes_for(1000001);
  EXPECT_LT(payload, states + 100);
  bytes d2;
  for (size_t i = 0; i < 1000001; ++i) {
    testing::append<uint16_t>(d2, i == 777 ? 0xffff : 0x3c00);
  }
  EXPECT_LT(roundtrip(d2, 2), states + 100);
}

TEST(rans_static_test, all_65536_symbols_present) {
  bytes d;
  std::mt19937 rng(1);
  for (uint32_t s = 0; s < 65536; ++s) testing::append<uint16_t>(d, s);
  for (int i = 0; i < 100000; ++i) {
    testing::append<uint16_t>(d, static_cast<uint16_t>(rng() % 512));
  }
  roundtrip(d, 2);
  bytes b;
  for (int i = 0; i < 5000; ++i) b.push_back(static_cast<uint8_t>(i));
  roundtrip(b, 1);
}

// Counts on both sides of the switch to wide_lanes states, with tails that
// do not fill a round, for 8- and 16-bit symbols, through every decoding
// path (scalar, AVX2, AVX-512 where the CPU has them; the vector rounds
// hand over to scalar ones near the payload's end).
TEST(rans_static_test, lane_counts_switch_at_wide_from) {
  EXPECT_EQ(rs::lanes_for(rs::wide_from - 1), rs::lanes);
  EXPECT_EQ(rs::lanes_for(rs::wide_from), rs::wide_lanes);
  bytes const g = gaussian_bf16(rs::wide_from + 40, 11);
  for (unsigned simd : {0u, 1u, 2u, 3u, rs::simd_tuned}) {
    rs::limit_simd(simd);
    for (size_t count : {rs::wide_from - 1, rs::wide_from, rs::wide_from + 1,
                         rs::wide_from + 31, rs::wide_from + 33}) {
      bytes const d(g.begin(), g.begin() + static_cast<ptrdiff_t>(2 * count));
      size_t const payload = roundtrip(d, 2);
      EXPECT_GE(payload, 4 * rs::lanes_for(count)) << count;
      bytes lo;  // low bytes of bf16: near-uniform, 8-bit symbols
      for (size_t i = 0; i < count; ++i) lo.push_back(d[2 * i]);
      roundtrip(lo, 1);
    }
    // Extreme skew at every scale the chooser picks: many states end a
    // round without a word, so the renormalization sees every mask.
    for (unsigned scale = 10; scale <= 16; ++scale) {
      bytes d;
      std::mt19937 rng(scale);
      for (size_t i = 0; i < rs::wide_from + 100; ++i) {
        testing::append<uint16_t>(d, rng() % 64 == 0 ? rng() % 700 : 5);
      }
      std::vector<uint64_t> hist;
      rs::histogram(d, 2, hist);
      rs::coder const c(rs::normalize(hist, scale), 2);
      bytes payload;
      c.encode(d, payload);
      bytes back(d.size());
      c.decode(payload, d.size() / 2, back.data());
      EXPECT_EQ(back, d) << scale << " " << simd;
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

// A symbol the table lacks is refused wherever it falls (a vector round or
// the scalar tail), for both widths and on every path; the vector encoder
// finds 8-bit symbols by value, absent ones by their zero limit.
TEST(rans_static_test, absent_symbols_are_refused_on_every_path) {
  for (unsigned width : {1u, 2u}) {
    bytes d;
    std::mt19937 rng(width);
    for (size_t i = 0; i < rs::wide_from + 45; ++i) {
      uint32_t const v = 2 * (rng() % 100) + 1;  // odd symbols only
      width == 1 ? d.push_back(static_cast<uint8_t>(v))
                 : testing::append<uint16_t>(d, static_cast<uint16_t>(v));
    }
    std::vector<uint64_t> hist;
    rs::histogram(d, width, hist);
    rs::coder const c(rs::normalize(hist, 12), width);
    for (unsigned simd : {0u, 1u, 2u, 3u, rs::simd_tuned}) {
      rs::limit_simd(simd);
      bytes payload;
      c.encode(d, payload);  // all present: codes
      bytes back(d.size());
      c.decode(payload, d.size() / width, back.data());
      EXPECT_EQ(back, d);
      for (size_t at : {size_t{0}, size_t{1000}, rs::wide_from + 44}) {
        bytes bad = d;
        bad[at * width] = 2;  // even: absent
        payload.clear();
        try {
          c.encode(bad, payload);
          ADD_FAILURE() << width << " " << simd << " " << at;
        } catch (error const& e) {
          EXPECT_EQ(e.code(), errc::domain);
        }
      }
    }
    rs::limit_simd(rs::simd_tuned);
  }
}

// Every encoding path writes the same payload (the vector encoder divides
// in float and corrects the quotient, which must always land exactly).
TEST(rans_static_test, vector_and_scalar_encoders_agree) {
  std::mt19937 rng(17);
  for (unsigned width : {1u, 2u}) {
    for (unsigned scale : {10u, 13u, 16u}) {
      bytes d;
      size_t const count = rs::wide_from + 77;
      for (size_t i = 0; i < count; ++i) {
        // A few huge and many tiny frequencies: quotients near 2^16 and 1.
        uint32_t const v = rng() % 8 == 0 ? rng() % 250 : rng() % 3;
        if (width == 1) {
          d.push_back(static_cast<uint8_t>(v));
        } else {
          testing::append<uint16_t>(d, static_cast<uint16_t>(v * 251));
        }
      }
      std::vector<uint64_t> hist;
      rs::histogram(d, width, hist);
      rs::table const t = rs::normalize(hist, scale);
      bytes payload[4];
      for (unsigned simd : {0u, 1u, 2u, 3u}) {
        rs::limit_simd(simd);
        rs::coder(t, width).encode(d, payload[simd]);
      }
      rs::limit_simd(rs::simd_tuned);
      EXPECT_EQ(payload[0], payload[2]) << width << " " << scale;
      EXPECT_EQ(payload[1], payload[2]) << width << " " << scale;
      EXPECT_EQ(payload[3], payload[2]) << width << " " << scale;
      // A symbol outside the table, deep inside the vector rounds.
      bytes bad = d;
      bad[width * 1000] = width == 1 ? 255 : 0xff;
      for (unsigned simd : {0u, 2u, 3u, rs::simd_tuned}) {
        rs::limit_simd(simd);
        bytes out;
        EXPECT_THROW(rs::coder(t, width).encode(bad, out), error);
      }
      rs::limit_simd(rs::simd_tuned);
    }
  }
}

TEST(rans_static_test, wide_payloads_that_are_cut_or_random_throw) {
  bytes const d = gaussian_bf16(rs::wide_from + 7, 12);
  node const n = make_rans_static(stream{d, {2, meaning::bf16}}, 2);
  leaf_def const* leaf = find_leaf(opcode::rans_static);
  value_type const t{2, meaning::bf16};
  bytes payload;
  leaf->encode(n, stream{d, t}, payload);
  bytes out(d.size());
  for (size_t k :
       {size_t{0}, size_t{4}, size_t{127}, size_t{128}, size_t{130},
        payload.size() / 2, payload.size() - 64, payload.size() - 2}) {
    bytes const p(payload.begin(), payload.begin() + static_cast<ptrdiff_t>(k));
    EXPECT_THROW(leaf->decode(n, t, p, out.size(), out.data()), error) << k;
  }
  std::mt19937 rng(3);
  int accepted = 0;
  for (int i = 0; i < 30; ++i) {
    rs::limit_simd(i % (rs::simd_tuned + 1));
    bytes p = payload;
    if (i % 2) {
      p[rng() % p.size()] ^= static_cast<uint8_t>(1 + rng() % 255);
    } else {
      for (uint8_t& b : p) b = static_cast<uint8_t>(rng());
    }
    try {
      leaf->decode(n, t, p, out.size(), out.data());
      ++accepted;
    } catch (error const&) {
    }
  }
  rs::limit_simd(rs::simd_tuned);
  EXPECT_LT(accepted, 2);
}

TEST(rans_static_test, empty_input_is_empty_payload) {
  node const n = make_rans_static(stream{bytes{1, 2, 3}, bytes_type}, 1);
  leaf_def const* leaf = find_leaf(opcode::rans_static);
  bytes payload;
  leaf->encode(n, stream{bytes{}, bytes_type}, payload);
  EXPECT_TRUE(payload.empty());
  leaf->decode(n, bytes_type, payload, 0, nullptr);
  EXPECT_THROW(leaf->decode(n, bytes_type, bytes{1}, 0, nullptr), error);
}

TEST(rans_static_test, normalization_is_optimal_on_small_cases) {
  // Exhaustive check against every split of 2^4 for three symbols.
  std::mt19937 rng(9);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint64_t> hist(256, 0);
    hist[1] = 1 + rng() % 1000;
    hist[5] = 1 + rng() % 30;
    hist[200] = 1 + rng() % 3;
    rs::table const t = rs::normalize(hist, 4);
    double const got = rs::coded_bits(hist, t);
    double best = 1e300;
    for (uint32_t a = 1; a < 16; ++a) {
      for (uint32_t b = 1; a + b < 16; ++b) {
        rs::table u{4, {1, 5, 200}, {a, b, 16 - a - b}};
        best = std::min(best, rs::coded_bits(hist, u));
      }
    }
    EXPECT_LE(got, best + 1e-6);
  }
}

// The optimum by the plain greedy: every symbol at 1, then each unit to the
// symbol it saves most bits (separable and concave: this is optimal).
double greedy_optimum_bits(std::vector<uint64_t> const& counts,
                           unsigned scale) {
  std::vector<uint32_t> f(counts.size(), 1);
  auto gain = [&](size_t i) {
    return static_cast<double>(counts[i]) *
           std::log2((f[i] + 1.0) / static_cast<double>(f[i]));
  };
  std::priority_queue<std::pair<double, size_t>> best;
  for (size_t i = 0; i < counts.size(); ++i) best.push({gain(i), i});
  for (uint64_t left = (uint64_t{1} << scale) - counts.size(); left > 0;
       --left) {
    size_t const i = best.top().second;
    best.pop();
    ++f[i];
    best.push({gain(i), i});
  }
  double bits = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    bits += static_cast<double>(counts[i]) *
            (scale - std::log2(static_cast<double>(f[i])));
  }
  return bits;
}

// Histograms where the one slot each symbol gets at least overshoots the
// precision by far (many rare symbols, as in 16-bit tables of fp16 values),
// start from the floor-aware proportional share: the table stays valid and
// optimal, no unit move saves a bit, up to the extremes (every symbol at
// one slot, counts near 2^40).
TEST(rans_static_test, normalization_is_optimal_where_the_floor_overshoots) {
  std::mt19937_64 rng(23);
  struct shape {
    unsigned scale;
    size_t symbols;
    uint64_t rare_max;   // most symbols: counts 1..rare_max
    uint64_t large_max;  // one in eight: counts up to this
  };
  for (shape const s :
       {shape{16, 40000, 3, 5000}, shape{16, 65536, 2, 1000},
        shape{16, 30000, 1, uint64_t{1} << 40}, shape{12, 4000, 1, 1000000000},
        shape{10, 1024, 5, 100000}, shape{10, 1023, 1, 50},
        shape{14, 9000, 4, 300}}) {
    std::vector<uint32_t> symbols(s.symbols);
    std::vector<uint64_t> counts(s.symbols);
    for (size_t i = 0; i < s.symbols; ++i) {
      symbols[i] = static_cast<uint32_t>(i);
      counts[i] =
          rng() % 8 == 0 ? 1 + rng() % s.large_max : 1 + rng() % s.rare_max;
    }
    rs::table const t = rs::normalize(symbols, counts, s.scale);
    SCOPED_TRACE(::testing::Message() << s.scale << " " << s.symbols);
    ASSERT_NO_THROW(rs::validate(t, 16));
    ASSERT_EQ(t.symbols, symbols);
    double bits = 0, most_gain = 0, least_cost = 1e300;
    for (size_t i = 0; i < s.symbols; ++i) {
      double const c = static_cast<double>(counts[i]);
      double const f = t.freqs[i];
      bits += c * (s.scale - std::log2(f));
      most_gain = std::max(most_gain, c * std::log2((f + 1) / f));
      if (f > 1) least_cost = std::min(least_cost, c * std::log2(f / (f - 1)));
    }
    EXPECT_LE(most_gain, least_cost * (1 + 1e-9) + 1e-6);
    double const optimum = greedy_optimum_bits(counts, s.scale);
    EXPECT_NEAR(bits, optimum, 1e-9 * optimum + 1e-6);
  }
}

// normalize_near, for tables quantized afterwards: valid, and within a
// hair of the optimum on the same shapes, on dense ones (every frequency far
// from the floor: one pass settles them) and where only a few symbols can
// give units up (the passes run out and the heaps finish).
TEST(rans_static_test, near_normalization_is_valid_and_near_the_optimum) {
  std::mt19937_64 rng(29);
  struct shape {
    unsigned scale;
    size_t symbols;
    uint64_t rare_max;
    uint64_t large_max;
    unsigned large_one_in;
  };
  for (shape const s :
       {shape{16, 40000, 3, 5000, 8}, shape{16, 65536, 2, 1000, 8},
        shape{16, 30000, 1, uint64_t{1} << 40, 8},
        shape{12, 4000, 1, 1000000000, 8}, shape{10, 1023, 1, 50, 8},
        shape{14, 9000, 4, 300, 8}, shape{16, 3000, 100000, 100000, 1},
        shape{16, 60000, 1, 1000000, 20000}, shape{13, 300, 7, 9, 2}}) {
    std::vector<uint32_t> symbols(s.symbols);
    std::vector<uint64_t> counts(s.symbols);
    for (size_t i = 0; i < s.symbols; ++i) {
      symbols[i] = static_cast<uint32_t>(i);
      counts[i] = rng() % s.large_one_in == 0 ? 1 + rng() % s.large_max
                                              : 1 + rng() % s.rare_max;
    }
    rs::table const t = rs::normalize_near(symbols, counts, s.scale);
    SCOPED_TRACE(::testing::Message() << s.scale << " " << s.symbols);
    ASSERT_NO_THROW(rs::validate(t, 16));
    ASSERT_EQ(t.symbols, symbols);
    double bits = 0;
    for (size_t i = 0; i < s.symbols; ++i) {
      bits += static_cast<double>(counts[i]) *
              (s.scale - std::log2(static_cast<double>(t.freqs[i])));
    }
    double const optimum = greedy_optimum_bits(counts, s.scale);
    EXPECT_GE(bits, optimum * (1 - 1e-12));
    EXPECT_LE(bits, optimum * (1 + 1e-5)) << bits / optimum - 1;
  }
  // 250 symbols at the floor overshoot by 250 units, and only the two large
  // ones can give units up: two a pass, so the heaps finish it.
  std::vector<uint32_t> symbols(252);
  std::iota(symbols.begin(), symbols.end(), 0u);
  std::vector<uint64_t> counts(252, 1);
  counts[0] = 1000000000, counts[1] = 2000000000;
  rs::table const t = rs::normalize_near(symbols, counts, 16);
  ASSERT_NO_THROW(rs::validate(t, 8));
  EXPECT_EQ(t.freqs[0] + t.freqs[1], 65536u - 250);
  double bits = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    bits += static_cast<double>(counts[i]) *
            (16 - std::log2(static_cast<double>(t.freqs[i])));
  }
  double const optimum = greedy_optimum_bits(counts, 16);
  EXPECT_LE(bits, optimum * (1 + 1e-5)) << bits / optimum - 1;
}

// Up to exact_table_symbols symbols a quantized table comes from the exact
// normalization, above from the near one.
TEST(rans_static_test, quantized_tables_normalize_exactly_up_to_the_bound) {
  std::mt19937_64 rng(31);
  for (size_t k : {exact_table_symbols, exact_table_symbols + 1}) {
    std::vector<uint32_t> symbols(k);
    std::iota(symbols.begin(), symbols.end(), 0u);
    std::vector<uint64_t> counts(k);
    for (uint64_t& c : counts) c = 1 + rng() % 3000;
    rs::table const q = quantized_rans_static_table(symbols, counts, 14);
    rs::table const exact =
        quantize_rans_static_table(rs::normalize(symbols, counts, 14));
    rs::table const near =
        quantize_rans_static_table(rs::normalize_near(symbols, counts, 14));
    EXPECT_EQ(q, k <= exact_table_symbols ? exact : near) << k;
  }
}

// 16-bit values with tens of thousands of rare symbols, as fp16 weights
// have: their own table (its start the floor-aware share) roundtrips.
TEST(rans_static_test, many_rare_16bit_symbols_roundtrip) {
  std::mt19937_64 rng(5);
  bytes d;
  for (size_t i = 0; i < 200000; ++i) {
    uint16_t const v = rng() % 4 == 0 ? static_cast<uint16_t>(rng())
                                      : static_cast<uint16_t>(rng() % 300);
    testing::append<uint16_t>(d, v);
  }
  std::vector<uint64_t> hist;
  rs::histogram(d, 2, hist);
  size_t present = 0;
  for (uint64_t c : hist) present += c > 0;
  ASSERT_GT(present, 30000u);  // the floor overshoots 2^16 by thousands
  EXPECT_GT(roundtrip(d, 2), 0u);
}

TEST(rans_static_test, truncated_and_random_payloads_throw) {
  bytes d;
  std::mt19937 rng(2);
  for (int i = 0; i < 300; ++i) d.push_back(static_cast<uint8_t>(rng() % 7));
  node const n = make_rans_static(stream{d, bytes_type}, 1);
  leaf_def const* leaf = find_leaf(opcode::rans_static);
  bytes payload;
  leaf->encode(n, stream{d, bytes_type}, payload);
  bytes out(d.size());
  for (size_t k = 0; k < payload.size(); ++k) {
    bytes const p(payload.begin(), payload.begin() + k);
    EXPECT_THROW(leaf->decode(n, bytes_type, p, out.size(), out.data()), error)
        << k;
  }
  bytes longer = payload;
  longer.push_back(0);
  longer.push_back(0);
  EXPECT_THROW(leaf->decode(n, bytes_type, longer, out.size(), out.data()),
               error);
  int accepted = 0;
  for (int i = 0; i < 2000; ++i) {
    bytes p(32 + rng() % 200);
    for (uint8_t& b : p) b = static_cast<uint8_t>(rng());
    try {
      leaf->decode(n, bytes_type, p, out.size(), out.data());
      ++accepted;
    } catch (error const&) {
    }
  }
  EXPECT_LT(accepted, 5);  // the final-state check catches almost all
}

// A mode-0 blob: scale, mode, runs (gap, length - 1), remainder, codes.
bytes table_blob(unsigned scale,
                 std::vector<std::pair<uint64_t, uint64_t>> runs, uint64_t rem,
                 std::vector<uint8_t> codes) {
  bytes b{static_cast<uint8_t>(scale), 0};
  put_varint(b, runs.size());
  for (auto [gap, len] : runs) put_varint(b, gap), put_varint(b, len);
  put_varint(b, rem);
  for (uint8_t c : codes) b.push_back(c);
  return b;
}

TEST(rans_static_test, table_blob_layout_is_as_documented) {
  // Symbols 3, 4 and 10..12; the remainder is symbol 4 (index 1).
  bytes const b = table_blob(8, {{3, 1}, {5, 2}}, 1, {5, 0x10, 0x21, 0x35});
  rs::table const t = parse_rans_static_table(b, 1);
  EXPECT_EQ(t.symbols, (std::vector<uint32_t>{3, 4, 10, 11, 12}));
  // 5; 16; (16 + 1) << 1 = 34; (16 + 5) << 2 = 84; 256 - 139 = 117.
  EXPECT_EQ(t.freqs, (std::vector<uint32_t>{5, 117, 16, 34, 84}));
  EXPECT_EQ(serialize_rans_static_table(t),
            table_blob(8, {{3, 1}, {5, 2}}, 1, {5, 0x10, 0x21, 0x35}));
}

TEST(rans_static_test, quantized_tables_serialize_exactly_and_cost_little) {
  bytes const d = gaussian_bf16(300000, 7);
  std::vector<uint64_t> hist;
  rs::histogram(d, 2, hist);
  rs::table const exact = rs::normalize(hist, 16);
  rs::table const q = choose_rans_static_table(hist);
  EXPECT_EQ(q, quantize_rans_static_table(q));  // idempotent
  bytes const blob = serialize_rans_static_table(q);
  EXPECT_EQ(parse_rans_static_table(blob, 2), q);
  double const loss = rs::coded_bits(hist, q) - rs::coded_bits(hist, exact);
  std::cout << "  " << q.symbols.size() << " symbols, blob " << blob.size()
            << " B, quantization loss " << loss / 300000 << " bits/symbol\n";
  EXPECT_LT(loss / 300000, 0.001);
  EXPECT_LT(blob.size(), q.symbols.size() * 3 / 4 + 64);  // codes rANS-coded
  EXPECT_EQ(blob[0], 16);
  // A table that is not quantized is refused, not silently changed.
  rs::table bad{16, {1, 2, 3}, {1001, 1003, 65536 - 2004}};
  EXPECT_THROW(serialize_rans_static_table(bad), error);
  EXPECT_NO_THROW(serialize_rans_static_table(quantize_rans_static_table(bad)));
}

// The symbol count read from the set alone is the parsed table's, for
// plain (mode 0) and packed (mode 1) blobs, and a blob whose set or
// head is malformed throws, as its parse does.
TEST(rans_static_test, symbol_counts_read_from_the_set_alone) {
  EXPECT_EQ(rans_static_table_symbols(
                table_blob(8, {{3, 1}, {5, 2}}, 1, {5, 0x10, 0x21, 0x35}), 1),
            5u);
  for (size_t k : {2u, 300u, 5000u, 40000u}) {
    std::vector<uint64_t> hist(65536, 0);
    for (size_t i = 0; i < k; ++i) hist[(i * 7919) % 65536] = 1 + i % 50;
    bytes const blob =
        serialize_rans_static_table(choose_rans_static_table(hist));
    EXPECT_EQ(rans_static_table_symbols(blob, 2), k);
    EXPECT_EQ(rans_static_table_symbols(blob, 2),
              parse_rans_static_table(blob, 2).symbols.size());
  }
  EXPECT_THROW(rans_static_table_symbols(table_blob(4, {}, 0, {}), 1), error);
  EXPECT_THROW(rans_static_table_symbols(table_blob(4, {{3, 1}}, 2, {8}), 1),
               error);  // remainder >= K
  EXPECT_THROW(rans_static_table_symbols(bytes{4, 1, 3}, 1), error);
  EXPECT_THROW(rans_static_table_symbols(table_blob(4, {{3, 1}}, 0, {8}), 4),
               error);
}

TEST(rans_static_test, quantization_keeps_every_frequency_positive) {
  // Near-uniform tables round up everywhere: the remainder must stay >= 1.
  std::mt19937 rng(5);
  for (int trial = 0; trial < 60; ++trial) {
    unsigned const scale = 8 + rng() % 9;
    size_t const k = 2 + rng() % std::min<size_t>(4000, (1u << scale) - 2);
    std::vector<uint64_t> hist(65536, 0);
    for (size_t i = 0; i < k; ++i) hist[i * 65536 / k] = 20 + rng() % 3;
    rs::table const q = quantize_rans_static_table(rs::normalize(hist, scale));
    EXPECT_NO_THROW(rs::validate(q, 16));
    EXPECT_EQ(parse_rans_static_table(serialize_rans_static_table(q), 2), q);
  }
  // Frequencies that do not sum to the precision are refused.
  rs::table const over{8, {1, 2, 3}, {100, 100, 57}};
  EXPECT_THROW(quantize_rans_static_table(over), error);
  rs::table const under{8, {1, 2, 3}, {100, 100, 55}};
  EXPECT_THROW(quantize_rans_static_table(under), error);
  rs::table const single{8, {7}, {200}};
  EXPECT_THROW(quantize_rans_static_table(single), error);
  EXPECT_EQ(quantize_rans_static_table(rs::table{8, {7}, {256}}).freqs[0],
            256u);
  rs::table const ragged{8, {1, 2, 3}, {128, 128}};
  EXPECT_THROW(quantize_rans_static_table(ragged), error);
}

// Symbol sets of runs of every length around the parse's 8-symbol writes
// (1, 7, 8, 9, 20, and a short one last), with few symbols (mode 0) and
// many (mode 1), parse back to exactly their symbols.
TEST(rans_static_test, symbol_runs_of_every_length_parse_back) {
  for (size_t repeats : {1u, 12u}) {
    std::vector<uint32_t> symbols;
    uint32_t next = 3;
    for (size_t r = 0; r < repeats; ++r) {
      for (uint32_t length : {1u, 7u, 8u, 9u, 20u, 2u}) {
        for (uint32_t j = 0; j < length; ++j) symbols.push_back(next + j);
        next += length + 1 + static_cast<uint32_t>(r % 3);
      }
    }
    std::vector<uint64_t> counts(symbols.size());
    for (size_t i = 0; i < counts.size(); ++i) counts[i] = 1 + (i * 7) % 13;
    rs::table const q = quantized_rans_static_table(symbols, counts, 12);
    bytes const blob = serialize_rans_static_table(q);
    EXPECT_EQ(blob[1], repeats == 1 ? 0 : 1) << "mode";
    rs::table const back = parse_rans_static_table(blob, 2);
    EXPECT_EQ(back.symbols, symbols);
    EXPECT_EQ(back, q);
  }
}

TEST(rans_static_test, corrupt_tables_are_rejected) {
  node n = make_leaf(opcode::rans_static);
  auto rejects = [&](bytes blob, unsigned width) {
    n.blob = std::move(blob);
    value_type const t{static_cast<uint8_t>(width), meaning::none};
    EXPECT_THROW(check_program(n, t), error);
    bytes out(2 * width);
    EXPECT_THROW(find_leaf(opcode::rans_static)
                     ->decode(n, t, bytes(40, 1), out.size(), out.data()),
                 error);
  };
  n.blob = table_blob(4, {{3, 1}}, 0, {8});  // symbols 3, 4; 8 + 8 = 16
  check_program(n, bytes_type);
  rejects(table_blob(4, {{3, 1}}, 0, {16}), 1);           // others fill 16
  rejects(table_blob(4, {{3, 1}}, 0, {0}), 1);            // zero code
  rejects(table_blob(4, {{3, 2}}, 2, {0, 8}), 1);         // zero before rem
  rejects(table_blob(4, {{3, 1}}, 2, {8}), 1);            // remainder >= K
  rejects(table_blob(4, {{3, 1}}, 0, {8, 1}), 1);         // a code too many
  rejects(table_blob(4, {{3, 1}}, 0, {}), 1);             // a code too few
  rejects(table_blob(4, {{3, 0}, {300, 0}}, 0, {8}), 1);  // symbol 304
  rejects(table_blob(4, {{255, 1}}, 0, {8}), 1);          // 255 then 256
  rejects(table_blob(4, {{0, 16}}, 0, bytes(16, 1)), 1);  // 17 symbols > 2^4
  rejects(table_blob(17, {{3, 1}}, 0, {8}), 2);           // precision too high
  rejects(table_blob(0, {{3, 0}}, 0, {}), 1);             // precision zero
  rejects(table_blob(4, {}, 0, {}), 1);                   // no runs
  rejects(bytes{4, 0x80, 0x80, 0x80, 0x80, 0x10}, 2);     // 2^32 runs
  rejects(bytes{4, 1, 3}, 1);                             // truncated
  rejects(table_blob(4, {{3, 1}}, 0, {8}), 4);            // width 4
  // Random blobs never crash.
  std::mt19937 rng(4);
  for (int i = 0; i < 3000; ++i) {
    bytes b(rng() % 20);
    for (uint8_t& x : b)
      x = static_cast<uint8_t>(rng() % 4 ? rng() % 20 : rng());
    unsigned const width = 1 + rng() % 2;
    try {
      parse_rans_static_table(b, width);
    } catch (error const&) {
    }
    try {
      rans_static_table_symbols(b, width);
    } catch (error const&) {
    }
  }
  // Mutations of a real blob never crash and parse only into valid tables.
  bytes const good = serialize_rans_static_table(choose_rans_static_table([] {
    std::vector<uint64_t> h(65536, 0);
    for (size_t i = 0; i < 700; ++i) h[(i * 37) % 65536] = 1 + i % 90;
    return h;
  }()));
  for (int i = 0; i < 1000; ++i) {
    bytes b = good;
    for (int m = 0; m < 1 + static_cast<int>(rng() % 3); ++m) {
      b[rng() % b.size()] = static_cast<uint8_t>(rng());
    }
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    try {
      rs::table const t = parse_rans_static_table(b, 2);
      rs::validate(t, 16);
      EXPECT_EQ(rans_static_table_symbols(b, 2), t.symbols.size());
    } catch (error const&) {
    }
    try {
      rans_static_table_symbols(b, 2);  // the set alone: never crashes either
    } catch (error const&) {
    }
  }
}

}  // namespace
}  // namespace brevis::codec

namespace brevis::codec {
namespace {

// 8-bit symbols at 2^15 and 2^16 slots decode from compact tables; the
// AVX-512 kernel keeps the per-symbol table in 1 to 8 register pairs (by the
// largest symbol). Every alphabet end around those limits, at small and
// large precisions, on every path, with a tail after the rounds.
TEST(rans_static_test, byte_alphabets_of_every_reach_decode_on_every_path) {
  std::mt19937 rng(23);
  for (unsigned top :
       {1u, 31u, 32u, 63u, 64u, 95u, 96u, 127u, 128u, 129u, 200u, 255u}) {
    bytes d(rs::wide_from + 45);
    for (uint8_t& b : d) {
      // Skewed toward small symbols, with the largest one present.
      uint32_t const v = rng() % 4 == 0 ? rng() % (top + 1) : rng() % 3;
      b = static_cast<uint8_t>(std::min(v, top));
    }
    d[d.size() / 2] = static_cast<uint8_t>(top);
    std::vector<uint64_t> hist;
    rs::histogram(d, 1, hist);
    // Slots below 2^15; compact tables at 2^15 and 2^16.
    for (unsigned scale : {10u, 12u, 14u, 15u, 16u}) {
      rs::coder const c(rs::normalize(hist, scale), 1);
      bytes payload;
      c.encode(d, payload);
      for (unsigned simd : {0u, 1u, 2u, 3u, rs::simd_tuned}) {
        rs::limit_simd(simd);
        bytes back(d.size());
        c.decode(payload, d.size(), back.data());
        EXPECT_EQ(back, d) << top << " " << scale << " " << simd;
        // A cut payload is refused on the same path.
        bytes out(d.size());
        EXPECT_THROW(c.decode(byte_view(payload).first(payload.size() - 2),
                              d.size(), out.data()),
                     error);
      }
      rs::limit_simd(rs::simd_tuned);
    }
  }
}

}  // namespace
}  // namespace brevis::codec

namespace brevis::codec {
namespace {

// Wide payloads at every precision, both widths, alphabets from two symbols
// to the whole 16-bit range, decode alike on every path (the vector rounds
// compute the state's step with IFMA where the CPU has it, and at every
// precision the products must stay exact), and a cut one is refused.
TEST(rans_static_test, wide_payloads_decode_on_every_path_at_every_scale) {
  std::mt19937 rng(29);
  auto check = [&](bytes const& d, unsigned width, unsigned scale) {
    std::vector<uint64_t> hist;
    rs::histogram(d, width, hist);
    rs::coder const c(rs::normalize(hist, scale), width);
    bytes payload;
    c.encode(d, payload);
    size_t const count = d.size() / width;
    for (unsigned simd : {0u, 1u, 2u, 3u, rs::simd_tuned}) {
      rs::limit_simd(simd);
      bytes back(d.size());
      c.decode(payload, count, back.data());
      EXPECT_EQ(back, d) << width << " " << scale << " " << simd;
      EXPECT_THROW(c.decode(byte_view(payload).first(payload.size() - 2), count,
                            back.data()),
                   error);
    }
    rs::limit_simd(rs::simd_tuned);
  };
  for (unsigned width : {1u, 2u}) {
    for (unsigned scale = 1; scale <= rs::max_scale; ++scale) {
      // At most 2^scale symbols (and 256 of 8 bits), one of them dominant.
      uint32_t const alphabet =
          std::min<uint32_t>(1u << std::min(scale, 8u * width), 1u << 12);
      bytes d;
      for (size_t i = 0; i < rs::wide_from + 45; ++i) {
        uint32_t const v = rng() % 3 == 0 ? rng() % alphabet : 1;
        if (width == 1) {
          d.push_back(static_cast<uint8_t>(v));
        } else {
          testing::append<uint16_t>(d, static_cast<uint16_t>(v * 13));
        }
      }
      check(d, width, scale);
    }
  }
  bytes all;  // every 16-bit symbol, then a skewed tail
  for (uint32_t s = 0; s < 65536; ++s) testing::append<uint16_t>(all, s);
  for (int i = 0; i < 30000; ++i) {
    testing::append<uint16_t>(all, static_cast<uint16_t>(rng() % 64));
  }
  check(all, 2, 16);
}

}  // namespace
}  // namespace brevis::codec

namespace brevis::codec {
namespace {

// 16-bit symbols of tables of at most 256 decode from compact tables (by
// their index) from 2^14 slots; the AVX-512 kernel keeps the per-index
// tables in 1 to 8 register pairs. Every alphabet size around those limits
// (and past 256, where the slots take over), at every such precision, on
// every path, with a tail after the rounds; then every short length.
TEST(rans_static_test, small_16bit_alphabets_decode_on_every_path) {
  std::mt19937 rng(31);
  for (uint32_t n :
       {2u, 31u, 32u, 33u, 64u, 100u, 128u, 129u, 200u, 255u, 256u, 257u}) {
    // Distinct values spread over the whole range, both ends included.
    std::vector<uint16_t> values{0, 65535};
    while (values.size() < n) {
      auto const v = static_cast<uint16_t>(rng());
      if (std::find(values.begin(), values.end(), v) == values.end())
        values.push_back(v);
    }
    bytes d;
    for (uint16_t v : values) testing::append<uint16_t>(d, v);
    while (d.size() < 2 * (rs::wide_from + 45)) {
      uint32_t const k = rng() % 4 == 0 ? rng() % n : rng() % std::min(n, 3u);
      testing::append<uint16_t>(d, values[k]);
    }
    std::vector<uint64_t> hist;
    rs::histogram(d, 2, hist);
    for (unsigned scale : {12u, 14u, 15u, 16u}) {
      rs::coder const c(rs::normalize(hist, scale), 2);
      bytes payload;
      c.encode(d, payload);
      for (unsigned simd : {0u, 1u, 2u, 3u, rs::simd_tuned}) {
        rs::limit_simd(simd);
        bytes back(d.size());
        c.decode(payload, d.size() / 2, back.data());
        EXPECT_EQ(back, d) << n << " " << scale << " " << simd;
        EXPECT_THROW(c.decode(byte_view(payload).first(payload.size() - 2),
                              d.size() / 2, back.data()),
                     error);
      }
      rs::limit_simd(rs::simd_tuned);
    }
  }
  // Every length up to 4099 (8 states, scalar rounds and tails).
  bytes d;
  for (int i = 0; i < 4099; ++i) {
    testing::append<uint16_t>(d, static_cast<uint16_t>(rng() % 40 * 1601));
  }
  std::vector<uint64_t> hist;
  rs::histogram(d, 2, hist);
  for (unsigned scale : {14u, 16u}) {
    rs::coder const c(rs::normalize(hist, scale), 2);
    for (size_t count = 0; count <= 4099; ++count) {
      byte_view const part = byte_view(d).first(2 * count);
      bytes payload;
      c.encode(part, payload);
      bytes back(part.size());
      c.decode(payload, count, back.data());
      ASSERT_TRUE(std::equal(back.begin(), back.end(), part.begin()))
          << scale << " " << count;
    }
  }
}

}  // namespace
}  // namespace brevis::codec
