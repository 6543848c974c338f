// The two-field split and join of 16-bit lanes (codec/ops/bitfields_kernels.h)
// under every vector path the CPU has: equal to the field arithmetic at
// every length 0..4099 on 16-bit floats with NaN, infinities, -0 and
// subnormals, and values too wide for their field rejected wherever they
// sit; then the bitfields operator on bf16 and fp16 through the kernels.
#include "codec/ops/bitfields_kernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "codec/dsl/operator.h"
#include "codec/dsl/program.h"

namespace brevis::codec {
namespace {

// The vector paths: 0 portable, 1 AVX2, 2 AVX-512 (each capped to the CPU).
constexpr unsigned caps[] = {0, 1, 2};

struct cap_guard {
  explicit cap_guard(unsigned c) { bitfields_kernels::set_cap(c); }
  ~cap_guard() { bitfields_kernels::set_cap(2); }
};

unsigned lane_width(unsigned bits) { return bits <= 8 ? 1 : 2; }

// 16-bit floats with every special value among gaussian-like weights.
std::vector<uint16_t> floats16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  uint16_t const specials[] = {0x0000, 0x8000, 0x7f80, 0xff80, 0x7fc0, 0xffff,
                               0x0001, 0x807f, 0x7c00, 0xfc00, 0x7e00, 0x03ff,
                               0x8001, 0x7fff, 0x3c00, 0xbc00};
  std::vector<uint16_t> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = rng() % 7 == 0 ? specials[rng() % std::size(specials)]
                          : static_cast<uint16_t>(rng());
  }
  return v;
}

void put(bytes& b, size_t i, unsigned width, uint16_t x) {
  if (width == 1) {
    b[i] = static_cast<uint8_t>(x);
  } else {
    store_le<uint16_t>(b.data() + 2 * i, x);
  }
}

TEST(bitfields_kernels, split_and_join_every_length_and_path) {
  size_t const longest = 4099;
  std::vector<uint16_t> const v = floats16(longest, 1);
  bytes in(2 * longest);
  std::memcpy(in.data(), v.data(), in.size());
  // bf16 and fp16 (the constant-shift loops) at every length; the other
  // splits at lengths around the vectors' multiples.
  for (unsigned low_bits = 1; low_bits < 16; ++low_bits) {
    unsigned const lw = lane_width(low_bits), hw = lane_width(16 - low_bits);
    bytes want_low(longest * lw), want_high(longest * hw);
    for (size_t i = 0; i < longest; ++i) {
      put(want_low, i, lw,
          static_cast<uint16_t>(v[i] & ((1u << low_bits) - 1)));
      put(want_high, i, hw, static_cast<uint16_t>(v[i] >> low_bits));
    }
    bool const every = low_bits == 7 || low_bits == 10;
    for (unsigned c : caps) {
      cap_guard const g(c);
      for (size_t n = 0; n <= longest; n += every || n < 70 ? 1 : 61) {
        // Guard bytes past the end catch writes beyond the fields.
        bytes low(n * lw + 8, 0xa5), high(n * hw + 8, 0xa5);
        bitfields_kernels::split16(in.data(), n, low_bits, lw, low.data(), hw,
                                   high.data());
        ASSERT_TRUE(
            std::equal(low.begin(), low.begin() + n * lw, want_low.begin()))
            << "low " << low_bits << " n " << n << " cap " << c;
        ASSERT_TRUE(
            std::equal(high.begin(), high.begin() + n * hw, want_high.begin()))
            << "high " << low_bits << " n " << n << " cap " << c;
        EXPECT_EQ(low[n * lw], 0xa5);
        EXPECT_EQ(high[n * hw], 0xa5);
        bytes out(2 * n + 8, 0x5a);
        ASSERT_TRUE(bitfields_kernels::join16(low.data(), lw, high.data(), hw,
                                              n, low_bits, out.data()));
        ASSERT_TRUE(std::equal(out.begin(), out.begin() + 2 * n, in.begin()))
            << "join " << low_bits << " n " << n << " cap " << c;
        EXPECT_EQ(out[2 * n], 0x5a);
      }
    }
  }
}

TEST(bitfields_kernels, join_rejects_values_wider_than_their_field) {
  for (unsigned low_bits : {7u, 10u, 3u, 8u, 12u}) {
    unsigned const lw = lane_width(low_bits), hw = lane_width(16 - low_bits);
    for (unsigned c : caps) {
      cap_guard const g(c);
      for (size_t n : {1, 2, 31, 32, 33, 64, 100, 1027, 4099}) {
        std::vector<uint16_t> const v = floats16(n, static_cast<uint32_t>(n));
        bytes in(2 * n);
        std::memcpy(in.data(), v.data(), in.size());
        bytes low(n * lw), high(n * hw), out(2 * n);
        bitfields_kernels::split16(in.data(), n, low_bits, lw, low.data(), hw,
                                   high.data());
        // One bad value at the start, the middle or the tail, in either
        // field: the lowest bit above the field (when the lane has one).
        for (size_t at : {size_t{0}, n / 2, n - 1}) {
          for (int field = 0; field < 2; ++field) {
            unsigned const bits = field == 0 ? low_bits : 16 - low_bits;
            unsigned const w = field == 0 ? lw : hw;
            if (bits == 8 * w) continue;  // the lane holds no wider value
            bytes& f = field == 0 ? low : high;
            bytes const keep = f;
            if (w == 1) {
              f[at] = static_cast<uint8_t>(f[at] | (1u << bits));
            } else {
              store_le<uint16_t>(
                  f.data() + 2 * at,
                  static_cast<uint16_t>(load_le<uint16_t>(f.data() + 2 * at) |
                                        (1u << bits)));
            }
            EXPECT_FALSE(bitfields_kernels::join16(low.data(), lw, high.data(),
                                                   hw, n, low_bits, out.data()))
                << low_bits << " n " << n << " at " << at << " field " << field
                << " cap " << c;
            f = keep;
          }
        }
        EXPECT_TRUE(bitfields_kernels::join16(low.data(), lw, high.data(), hw,
                                              n, low_bits, out.data()));
      }
    }
  }
}

// The operator as the closed form writes it for bf16 (7, 9) and fp16
// (10, 6): roundtrips through the kernels, and rejects a wide value.
TEST(bitfields_kernels, operator_roundtrips_floats_and_rejects_wide_values) {
  for (auto [kind, low_bits] :
       {std::pair{meaning::bf16, 7u}, std::pair{meaning::fp16, 10u}}) {
    node n = make_op(opcode::bitfields, {low_bits, 16 - low_bits},
                     {make_leaf(opcode::raw), make_leaf(opcode::raw)});
    op_def const& op = *find_op(opcode::bitfields);
    value_type const t{2, kind};
    for (unsigned c : caps) {
      cap_guard const g(c);
      for (size_t count : {0, 1, 17, 64, 4099}) {
        std::vector<uint16_t> const v = floats16(count, 7);
        bytes data(2 * count);
        if (count > 0) std::memcpy(data.data(), v.data(), data.size());
        std::vector<stream> kids;
        bytes side;
        op.encode(n, stream{data, t}, kids, side);
        ASSERT_EQ(kids.size(), 2u);
        std::vector<value_view> views;
        for (stream const& k : kids) views.push_back({k.data, k.type});
        bytes out(data.size());
        op.decode(n, t, views, out.size(), side, out.data());
        EXPECT_EQ(out, data) << count << " cap " << c;
        if (count == 0) continue;
        // A sign|exponent wider than its field: corrupt, never other floats.
        bytes high = kids[1].data;
        high[high.size() - 1] = 0xff;
        views[1] = {high, kids[1].type};
        try {
          op.decode(n, t, views, out.size(), side, out.data());
          ADD_FAILURE() << "accepted a wide value, count " << count;
        } catch (error const& e) {
          EXPECT_EQ(e.code(), errc::corrupt);
        }
      }
    }
  }
}

}  // namespace
}  // namespace brevis::codec
