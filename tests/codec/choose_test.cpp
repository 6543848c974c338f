#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "codec/choose/chooser.h"
#include "codec/choose/entropy_terms.h"
#include "codec/choose/histogram.h"
#include "codec/choose/shared_tables.h"
#include "codec/dsl/interpreter.h"
#include "codec/dsl/operator.h"
#include "codec/leaves/rans_static.h"
#include "codec/search/search_chooser.h"
#include "generators.h"
#include "tests/codec/uses_op.h"

namespace brevis::codec {
namespace {

using testing::uses_op;

region tensor_region(dtype t, size_t bytes) {
  region r;
  r.kind = region_kind::tensor;
  r.type = t;
  r.length = bytes;
  r.name = "w";
  return r;
}

bytes gaussian_f32(size_t n, uint32_t mask, uint32_t seed = 3) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 0.05f);
  bytes out;
  for (size_t i = 0; i < n; ++i) {
    float f = g(rng);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    testing::append(out, u & mask);
  }
  return out;
}

bytes gaussian_bf16(size_t n) {
  bytes f32 = gaussian_f32(n, 0xffffffff);
  bytes out;
  for (size_t i = 0; i < n; ++i) {
    testing::append(
        out, static_cast<uint16_t>(load_le<uint32_t>(&f32[4 * i]) >> 16));
  }
  return out;
}

// Whatever the chooser picks must roundtrip the whole region.
node choose_and_check(region const& r, bytes const& data) {
  auto chooser = make_search_chooser();
  node p = chooser->choose(r, data);
  check_program(p);
  EXPECT_TRUE(roundtrips(p, data)) << program_text(p);
  return p;
}

// The search costs own static tables by estimates instead of building
// them: they must follow the built table (payload within 0.5%, blob within
// 15% and a few bytes) on weights of several sizes and alphabets.
TEST(choose_test, own_table_estimates_follow_the_built_table) {
  std::mt19937 rng(11);
  for (size_t n : {size_t{3000}, size_t{40000}, size_t{400000}}) {
    for (float sd : {0.002f, 0.05f, 1.0f}) {
      std::normal_distribution<float> g(0.0f, sd);
      bytes d;
      for (size_t i = 0; i < n; ++i)
        testing::append(d, testing::to_bf16(g(rng)));
      for (bool mantissa : {false, true}) {
        sparse_hist h = sparse_histogram(d);
        if (mantissa) {  // a small alphabet: the bf16 mantissas
          std::vector<uint64_t> m(128, 0);
          for (auto const& [s, c] : h) m[s & 127] += c;
          h.clear();
          for (uint32_t s = 0; s < 128; ++s) {
            if (m[s]) h.emplace_back(s, m[s]);
          }
        }
        own_table const t = own_table_leaf(h);
        double const blob = static_cast<double>(t.leaf.blob.size());
        EXPECT_NEAR(estimate_table_payload_bytes(h), t.payload_bytes,
                    0.005 * t.payload_bytes + 8)
            << n << " " << sd << " " << mantissa;
        EXPECT_NEAR(estimate_table_blob_bytes(h), blob, 0.15 * blob + 16)
            << n << " " << sd << " " << mantissa << " symbols " << h.size();
      }
    }
  }
}

// The one-pass blob estimate from counts equals the estimate from the
// frequencies it stands for, on alphabets with runs, gaps, one dominant
// symbol (in the middle, first or last: the remainder, whose code the blob
// skips) and many rare ones.
TEST(choose_test, blob_estimate_from_counts_equals_the_one_from_frequencies) {
  std::mt19937 rng(17);
  for (size_t k :
       {size_t{2}, size_t{40}, size_t{300}, size_t{5000}, size_t{40000}}) {
    for (int shape = 0; shape < 5; ++shape) {
      sparse_hist h;
      uint32_t s = rng() % 50;
      size_t const dominant = shape == 2 ? k / 2 : shape == 3 ? 0 : k - 1;
      for (size_t i = 0; i < k && s < 65536; ++i) {
        uint64_t c = shape == 0   ? 1 + rng() % 3
                     : shape == 1 ? 1 + (rng() % 1000) * (rng() % 1000)
                                  : (i == dominant ? 1000000 : 1 + rng() % 5);
        h.emplace_back(s, c);
        s += rng() % 4 == 0 ? 1 + rng() % 9 : 1;  // runs and gaps
      }
      uint64_t n = 0;
      for (auto const& [sym, c] : h) n += c;
      unsigned const scale = rans_static_scale_for(h.size(), n);
      std::vector<uint32_t> symbols, freqs;
      for (auto const& [sym, c] : h) {
        symbols.push_back(sym);
        freqs.push_back(static_cast<uint32_t>(
            std::max<uint64_t>(1, (c * (uint64_t{1} << scale) + n / 2) / n)));
      }
      EXPECT_DOUBLE_EQ(estimate_rans_static_blob_bytes(h, n, scale),
                       estimate_rans_static_blob_bytes(symbols, freqs))
          << k << " " << shape;
    }
  }
}

// The one-pass estimate (four symbols a round) gives exactly the plain
// per-symbol computation, payload bits included: every length to 70 (each
// tail of a round), symbols 0 and 65535, lone symbols and long runs, counts
// under one slot, near it, and large enough to leave the small codes' table.
TEST(choose_test, blob_estimate_equals_the_plain_per_symbol_computation) {
  std::mt19937 rng(41);
  for (size_t k = 0; k <= 70; ++k) {
    for (int shape = 0; shape < 4; ++shape) {
      sparse_hist h;
      uint32_t s = shape == 1 ? 0 : static_cast<uint32_t>(rng() % 3);
      for (size_t i = 0; i < k; ++i) {
        uint32_t const c = shape == 0   ? 1 + rng() % 2
                           : shape == 1 ? 1 + rng() % 40
                           : shape == 2 ? (rng() % 8 == 0 ? 3000000 : 1)
                                        : 1 + rng() % 100000;
        h.emplace_back(s, c);
        s += rng() % 3 == 0 ? 2 + rng() % 7 : 1;
      }
      if (shape == 3 && k > 0) h.back().first = 65535;
      if (shape == 3 && k > 1) h[k - 2].first = 65534;
      uint64_t n = 0;
      for (auto const& [sym, c] : h) n += c;
      if (n == 0) n = 1;
      for (unsigned scale : {10u, 12u, 16u}) {
        double const per_count =
            std::ldexp(1.0, static_cast<int>(scale)) / static_cast<double>(n);
        double sum_f = 0, terms = 0, scaled = 0;
        std::vector<uint32_t> symbols, freqs;
        for (auto const& [sym, c] : h) {
          double const exact = static_cast<double>(c) * per_count;
          bool const large = exact > 1;
          sum_f += large ? exact : 1.0;
          terms += large ? c_log2_c(c) : 0.0;
          scaled += large ? static_cast<double>(c) : 0.0;
          symbols.push_back(sym);
          freqs.push_back(large ? static_cast<uint32_t>(exact + 0.5) : 1);
        }
        double const payload = -terms - scaled * std::log2(per_count) +
                               static_cast<double>(n) * std::log2(sum_f) +
                               32.0 * rans_static::lanes;
        double got_payload = -1;
        double const blob =
            estimate_rans_static_blob_bytes(h, n, scale, &got_payload);
        SCOPED_TRACE(::testing::Message() << k << " " << shape << " " << scale);
        if (k <= 1) {
          EXPECT_EQ(blob, 6);
          EXPECT_EQ(got_payload, 0);
          continue;
        }
        EXPECT_EQ(blob, estimate_rans_static_blob_bytes(symbols, freqs));
        EXPECT_EQ(got_payload, payload);
        EXPECT_EQ(estimate_rans_static_blob_bytes(h, n, scale), blob);
      }
    }
  }
}

// The search costs byte planes and float fields from the marginals of the
// 16-bit histogram: they must equal the histograms of what the operators
// produce, on values that reach every bit (both signs, zero, infinities and
// NaNs, the extreme exponents and mantissas) and on weights.
TEST(choose_test, split_histogram_equals_the_operators_outputs) {
  std::mt19937 rng(29);
  std::vector<bytes> inputs(3);
  for (uint32_t v : {0u, 0x8000u, 0x7fffu, 0xffffu, 0x7f80u, 0x7c00u, 0x0001u,
                     0x8001u, 0x03ffu, 0xfc00u}) {
    testing::append(inputs[0], static_cast<uint16_t>(v));
  }
  for (int i = 0; i < 20000; ++i) {
    testing::append(inputs[1], static_cast<uint16_t>(rng()));
  }
  std::normal_distribution<float> g(0.0f, 0.05f);
  for (int i = 0; i < 20000; ++i) {
    testing::append(inputs[2], testing::to_bf16(g(rng)));
  }
  for (bytes const& data : inputs) {
    sparse_hist const h = sparse_histogram(data);
    for (meaning m : {meaning::bf16, meaning::fp16}) {
      for (opcode op : {opcode::planes, opcode::fields}) {
        auto const split = split_histogram(h, op, m);
        node n = make_op(op, {}, {});
        stream in{data, value_type{2, m}};
        std::vector<stream> kids;
        bytes side;
        op_for(op).encode(n, in, kids, side);
        ASSERT_EQ(split.size(), kids.size());
        for (size_t i = 0; i < kids.size(); ++i) {
          std::vector<uint64_t> direct;
          rans_static::histogram(kids[i].data, kids[i].type.width, direct);
          direct.resize(std::max(direct.size(), split[i].size()), 0);
          std::vector<uint64_t> marginal = split[i];
          marginal.resize(direct.size(), 0);
          EXPECT_EQ(marginal, direct) << opcode_name(op) << " child " << i;
        }
      }
    }
    EXPECT_TRUE(split_histogram(h, opcode::fields, meaning::uint).empty());
  }
}

// The marginals derive some histograms from others (fp16's low byte from
// the mantissa, bf16's mantissa from the low byte, the high byte and the
// sign and exponent from one another): each must equal split_histogram's,
// and the sign and exponent together the elements' bits above the mantissa.
TEST(choose_test, float16_marginals_equal_the_split_histograms) {
  std::mt19937 rng(31);
  std::vector<bytes> inputs(2);
  for (uint32_t v : {0u, 0x8000u, 0x7fffu, 0xffffu, 0x7f80u, 0x7c00u, 0x0001u,
                     0x8001u, 0x03ffu, 0xfc00u, 0x0001u}) {
    testing::append(inputs[0], static_cast<uint16_t>(v));
  }
  for (int i = 0; i < 20000; ++i) {
    testing::append(inputs[1], static_cast<uint16_t>(rng()));
  }
  for (bytes const& data : inputs) {
    sparse_hist const h = sparse_histogram(data);
    for (meaning m : {meaning::bf16, meaning::fp16}) {
      unsigned const mbits = m == meaning::bf16 ? 7 : 10;
      float16_marginals const mg = float16_marginals_of(h, m);
      EXPECT_EQ(mg.planes, split_histogram(h, opcode::planes, m));
      EXPECT_EQ(mg.fields, split_histogram(h, opcode::fields, m));
      std::vector<uint64_t> se(size_t{1} << (16 - mbits), 0);
      uint64_t n = 0;
      uint32_t ored = 0;
      bool once = false;
      for (auto const& [s, c] : h) {
        se[s >> mbits] += c, n += c, ored |= s, once |= c == 1;
      }
      EXPECT_EQ(mg.sign_exponent, se);
      EXPECT_EQ(mg.count, n);
      EXPECT_EQ(mg.ored, ored);
      EXPECT_EQ(mg.zeros, h.front().first == 0 ? h.front().second : 0u);
      EXPECT_EQ(mg.singleton, once);
    }
  }
}

// The code lengths estimated for a histogram's own table follow the built
// table's: the bits of the histogram under them within 0.5% (and a few
// bytes) of its payload under the table.
TEST(choose_test, estimated_code_lengths_follow_the_built_table) {
  std::mt19937 rng(23);
  std::vector<double> bits(65536, -1);
  for (size_t n : {size_t{3000}, size_t{400000}}) {
    for (float sd : {0.002f, 1.0f}) {
      std::normal_distribution<float> g(0.0f, sd);
      bytes d;
      for (size_t i = 0; i < n; ++i)
        testing::append(d, testing::to_bf16(g(rng)));
      sparse_hist const h = sparse_histogram(d);
      table_estimate const e = estimate_table_code_bits(h, bits);
      own_table const t = own_table_leaf(h);
      EXPECT_NEAR(e.payload_bytes, t.payload_bytes,
                  0.005 * t.payload_bytes + 8);
      EXPECT_NEAR(e.payload_bytes, estimate_table_payload_bytes(h),
                  1e-9 * e.payload_bytes);
      EXPECT_DOUBLE_EQ(e.blob_bytes, estimate_table_blob_bytes(h));
      EXPECT_NEAR(estimate_table_bytes(h), e.payload_bytes + e.blob_bytes,
                  1e-9 * e.payload_bytes);
      double sum = 32.0 * rans_static::lanes;
      for (auto const& [s, c] : h) {
        EXPECT_GE(bits[s], 0);
        sum += static_cast<double>(c) * bits[s];
      }
      EXPECT_NEAR(sum / 8, e.payload_bytes, 1e-6 * e.payload_bytes);
      // The code lengths alone (after a check of the blob) are the same.
      std::vector<double> alone(65536, -1);
      EXPECT_EQ(estimate_table_code_lengths(h, alone), e.payload_bytes);
      for (auto const& [s, c] : h) EXPECT_EQ(alone[s], bits[s]);
      // Exactly the plain per-symbol computation (log2 of the slots, at
      // least one, then normalized by their sum).
      uint64_t total = 0;
      for (auto const& [s, c] : h) total += c;
      double const per_count =
          std::ldexp(1.0,
                     static_cast<int>(rans_static_scale_for(h.size(), total))) /
          static_cast<double>(total);
      double sum_f = 0;
      std::vector<double> plain;
      for (auto const& [s, c] : h) {
        double const f = static_cast<double>(c) * per_count;
        sum_f += f > 1 ? f : 1;
        plain.push_back(f > 1 ? -(c_log2_c(c) / static_cast<double>(c) +
                                  std::log2(per_count))
                              : 0);
      }
      for (size_t i = 0; i < h.size(); ++i) {
        EXPECT_EQ(bits[h[i].first], plain[i] + std::log2(sum_f));
      }
    }
  }
}

TEST(choose_test, bf16_weights_get_whole_word_coding) {
  bytes data = gaussian_bf16(1 << 20);
  node p = choose_and_check(tensor_region(dtype::bf16, data.size()), data);
  EXPECT_TRUE(uses_op(p, opcode::rans_static)) << program_text(p);
}

TEST(choose_test, fp32_upcast_from_bf16_drops_zero_bits) {
  bytes data = gaussian_f32(1 << 19, 0xffff0000);
  node p = choose_and_check(tensor_region(dtype::f32, data.size()), data);
  EXPECT_TRUE(uses_op(p, opcode::low_zero)) << program_text(p);
}

TEST(choose_test, fp32_upcast_from_fp16_drops_zero_bits) {
  bytes data = gaussian_f32(1 << 19, 0xffffe000);
  node p = choose_and_check(tensor_region(dtype::f32, data.size()), data);
  EXPECT_TRUE(uses_op(p, opcode::low_zero)) << program_text(p);
}

TEST(choose_test, few_distinct_values_use_a_palette) {
  std::mt19937 rng(5);
  bytes data;
  std::vector<float> values;
  for (int i = 0; i < 200; ++i) values.push_back(std::sin(i * 0.37f) * 3.1f);
  for (int i = 0; i < 100000; ++i) testing::append(data, values[rng() % 200]);
  node p = choose_and_check(tensor_region(dtype::f32, data.size()), data);
  EXPECT_TRUE(uses_op(p, opcode::palette)) << program_text(p);
}

TEST(choose_test, constant_regions_cost_nothing) {
  bytes zeros(100000, 0);
  EXPECT_EQ(choose_and_check(tensor_region(dtype::f32, zeros.size()), zeros).op,
            opcode::zero);
  bytes sevens(1000, 7);
  EXPECT_EQ(
      choose_and_check(tensor_region(dtype::u8, sevens.size()), sevens).op,
      opcode::constant);
}

TEST(choose_test, every_dtype_and_adversarial_input_roundtrips) {
  for (dtype t : {dtype::none, dtype::boolean, dtype::u8, dtype::i8,
                  dtype::f8_e5m2, dtype::f8_e4m3, dtype::i16, dtype::u16,
                  dtype::f16, dtype::bf16, dtype::i32, dtype::u32, dtype::f32,
                  dtype::f64, dtype::i64, dtype::u64}) {
    unsigned const w = std::max(1u, dtype_width(t));
    for (size_t n : {0, 1, 7, 64, 1000, 4099}) {
      for (auto const& s : testing::adversarial(n, w)) {
        SCOPED_TRACE(dtype_name(t) + " " + s.name + " " + std::to_string(n));
        choose_and_check(tensor_region(t, s.data.size()), s.data);
      }
    }
  }
}

TEST(choose_test, tiny_regions_never_cost_more_than_raw_plus_a_byte) {
  auto chooser = make_search_chooser();
  for (dtype t : {dtype::none, dtype::bf16, dtype::i32, dtype::f32}) {
    for (size_t n : {1, 2, 3, 6, 8, 12, 16, 40}) {
      bytes d(n);
      for (size_t i = 0; i < n; ++i) d[i] = static_cast<uint8_t>(i * 37 + 1);
      node const p = chooser->choose(tensor_region(t, n), d);
      bytes payload;
      encode_chunk(p, d, payload);
      EXPECT_LE(payload.size(), n + 1) << program_text(p);
      EXPECT_TRUE(roundtrips(p, d));
    }
  }
}

// A region whose bytes are all equal gets a leaf of no payload (zero or
// constant); one whose first or last byte alone differs does not, at every
// length.
TEST(choose_test, only_all_equal_bytes_get_a_trivial_program) {
  auto chooser = make_search_chooser();
  for (size_t n : {2, 3, 17, 64, 65, 1000, 4099}) {
    for (uint8_t fill : {uint8_t{0}, uint8_t{0x5a}}) {
      SCOPED_TRACE(std::to_string(n) + " bytes of " + std::to_string(fill));
      bytes const same(n, fill);
      node const p = chooser->choose(tensor_region(dtype::none, n), same);
      EXPECT_TRUE(p.op == opcode::zero || p.op == opcode::constant)
          << program_text(p);
      for (size_t at : {size_t{0}, n - 1}) {
        bytes d = same;
        d[at] ^= 1;
        node const q = chooser->choose(tensor_region(dtype::none, n), d);
        EXPECT_NE(q.op, opcode::zero) << at << " " << program_text(q);
        EXPECT_NE(q.op, opcode::constant) << at << " " << program_text(q);
        EXPECT_TRUE(roundtrips(q, d)) << at << " " << program_text(q);
      }
    }
  }
}

// Small bf16 tensors of one file with the same distribution share one
// file-level table: the same program, stored once by the archive.
TEST(choose_test, small_tensors_of_a_file_share_a_table) {
  std::vector<region> regions;
  bytes file;
  for (uint32_t k = 0; k < 40; ++k) {
    bytes const t = [&] {
      bytes f32 = gaussian_f32(3000, 0xffffffff, 10 + k);
      bytes out;
      for (size_t i = 0; i < 3000; ++i) {
        testing::append(
            out, static_cast<uint16_t>(load_le<uint32_t>(&f32[4 * i]) >> 16));
      }
      return out;
    }();
    region r = tensor_region(dtype::bf16, t.size());
    r.offset = file.size();
    regions.push_back(r);
    file.insert(file.end(), t.begin(), t.end());
  }
  auto base = make_search_chooser();
  auto chooser = base->for_file(file, regions);
  ASSERT_NE(chooser, nullptr);
  std::vector<node> programs;
  for (region const& r : regions) {
    bytes const d(file.begin() + r.offset, file.begin() + r.offset + r.length);
    programs.push_back(chooser->choose(r, d));
    check_program(programs.back());
    EXPECT_TRUE(roundtrips(programs.back(), d));
  }
  size_t shared = 0;
  for (node const& p : programs) shared += p == programs[0];
  EXPECT_TRUE(uses_op(programs[0], opcode::rans_static))
      << program_text(programs[0]);
  EXPECT_GE(shared, 30u);
  // Every tensor of the file encodes with it (its table has every symbol).
  for (region const& r : regions) {
    bytes const d(file.begin() + r.offset, file.begin() + r.offset + r.length);
    EXPECT_TRUE(roundtrips(programs[0], d));
  }
}

// The file's tables keep each bf16/fp16 region's histogram for its chooser,
// which frees those it will not read again (most of its memory on a large
// file).
TEST(choose_test, file_tables_keep_histograms_until_released) {
  std::vector<region> regions;
  bytes file;
  for (uint32_t k = 0; k < 3; ++k) {
    bytes const f32 = gaussian_f32(2000, 0xffffffff, 40 + k);
    bytes t;
    for (size_t i = 0; i < 2000; ++i) {
      testing::append(
          t, static_cast<uint16_t>(load_le<uint32_t>(&f32[4 * i]) >> 16));
    }
    region r = tensor_region(dtype::bf16, t.size());
    r.offset = file.size();
    regions.push_back(r);
    file.insert(file.end(), t.begin(), t.end());
  }
  file_tables tables(file, regions);
  for (region const& r : regions) {
    sparse_hist const* h = tables.histogram_of(r.offset);
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(*h,
              sparse_histogram(byte_view(file).subspan(r.offset, r.length)));
  }
  tables.release_histogram(regions[1].offset);
  EXPECT_EQ(tables.histogram_of(regions[1].offset), nullptr);
  EXPECT_NE(tables.histogram_of(regions[0].offset), nullptr);
  EXPECT_NE(tables.histogram_of(regions[2].offset), nullptr);
}

}  // namespace
}  // namespace brevis::codec
