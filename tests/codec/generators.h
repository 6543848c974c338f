#pragma once
// Adversarial inputs for roundtrip property tests: every operator and leaf is
// run over all of them. Lengths cover 0..4099 sparsely plus odd tails; values
// cover NaN with payloads, +-Inf, subnormals, -0, all-equal, few distinct
// values, smooth ramps and random bytes.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codec/core/bytes.h"

namespace brevis::codec::testing {

struct sample {
  std::string name;
  bytes data;
};

/// Lengths that exercise every tail: 0..67 densely, then a spread to 4099.
inline std::vector<size_t> test_lengths() {
  std::vector<size_t> out;
  for (size_t n = 0; n < 68; ++n) out.push_back(n);
  for (size_t n :
       {127,  128,  129,  255,  256,  257,  511,  1000, 1023, 1024, 1025,
        2047, 2048, 2049, 3001, 4093, 4095, 4096, 4097, 4098, 4099}) {
    out.push_back(n);
  }
  return out;
}

template <typename T>
void append(bytes& out, T v) {
  uint8_t b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.insert(out.end(), b, b + sizeof(T));
}

inline uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

/// fp32 -> fp16 bits rounded to nearest even, as a cast to _Float16 gives
/// (which clang before 15 lacks on x86): overflow to infinity, subnormals
/// kept, NaN as the quiet NaN 0x7e00 with the sign.
inline uint16_t to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t const sign = (x >> 16) & 0x8000;
  x &= 0x7fffffff;
  if (x >= 0x47800000) {  // 2^16 or more, Inf, NaN
    return static_cast<uint16_t>(sign | (x > 0x7f800000 ? 0x7e00 : 0x7c00));
  }
  if (x < 0x38800000) {  // below 2^-14: fp16 subnormal or zero
    // Adding 0.5 leaves the value in units of 2^-24 (fp16's subnormal
    // step) in the low mantissa bits, rounded to nearest even by the FPU.
    float a;
    std::memcpy(&a, &x, 4);
    a += 0.5f;
    uint32_t u;
    std::memcpy(&u, &a, 4);
    return static_cast<uint16_t>(sign | (u - 0x3f000000));
  }
  // Rebias the exponent and round the 13 dropped bits to nearest even (a
  // carry into the exponent is right, up to infinity).
  uint32_t const odd = (x >> 13) & 1;
  x = x - (uint32_t{127 - 15} << 23) + 0xfff + odd;
  return static_cast<uint16_t>(sign | (x >> 13));
}

/// Float bit patterns that break naive code: NaNs with payloads, infinities,
/// subnormals, signed zeros, extremes (fp32 and fp64 as bits; bf16 = top half
/// of fp32; fp16 patterns listed directly).
inline std::vector<uint32_t> special_f32() {
  return {0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000,
          0xffc00001, 0x7f800001, 0x7fbfffff, 0x00000001, 0x807fffff,
          0x00400000, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000};
}
inline std::vector<uint16_t> special_f16() {
  return {0x0000, 0x8000, 0x7c00, 0xfc00, 0x7e00, 0xfe01, 0x7c01,
          0x0001, 0x83ff, 0x0200, 0x7bff, 0xfbff, 0x3c00, 0xbc00};
}
inline std::vector<uint64_t> special_f64() {
  return {0x0000000000000000ULL, 0x8000000000000000ULL, 0x7ff0000000000000ULL,
          0xfff0000000000000ULL, 0x7ff8000000000000ULL, 0xfff8000000000001ULL,
          0x7ff0000000000001ULL, 0x0000000000000001ULL, 0x800fffffffffffffULL,
          0x7fefffffffffffffULL, 0x3ff0000000000000ULL};
}

/// Samples of `n` bytes each, for a lane width of 1, 2, 4 or 8 (n need not
/// be a multiple of the width: odd tails are part of the point).
inline std::vector<sample> adversarial(size_t n, unsigned width,
                                       uint32_t seed = 1) {
  std::mt19937_64 rng(seed * 7919 + n * 31 + width);
  std::vector<sample> out;
  auto fill = [&](std::string name, auto gen) {
    sample s{std::move(name), {}};
    s.data.reserve(n);
    for (size_t i = 0; s.data.size() < n; ++i) {
      auto v = gen(i);
      uint8_t b[sizeof(v)];
      std::memcpy(b, &v, sizeof(v));
      for (size_t k = 0; k < sizeof(v) && s.data.size() < n; ++k) {
        s.data.push_back(b[k]);
      }
    }
    out.push_back(std::move(s));
  };
  fill("zeros", [](size_t) { return uint8_t{0}; });
  fill("all_equal", [](size_t) { return uint8_t{0xa5}; });
  fill("random", [&](size_t) { return static_cast<uint8_t>(rng()); });
  fill("ramp", [](size_t i) { return static_cast<uint8_t>(i); });
  fill("few_values",
       [&](size_t) { return static_cast<uint8_t>(rng() % 3 * 85); });
  fill("mostly_zero", [&](size_t) {
    return static_cast<uint8_t>(rng() % 16 == 0 ? rng() : 0);
  });
  fill("runs", [&](size_t i) { return static_cast<uint8_t>(i / 37 * 13); });
  auto const f32 = special_f32();
  auto const f16 = special_f16();
  auto const f64 = special_f64();
  switch (width) {
    case 2: {
      fill("f16_special", [&](size_t i) { return f16[i % f16.size()]; });
      fill("bf16_special", [&](size_t i) {
        return static_cast<uint16_t>(f32[i % f32.size()] >> 16);
      });
      std::normal_distribution<float> g(0.0f, 0.02f);
      fill("bf16_gauss", [&](size_t) { return to_bf16(g(rng)); });
      fill("u16_smooth", [](size_t i) {
        return static_cast<uint16_t>(1000 + i * 3 + (i % 5));
      });
      break;
    }
    case 4: {
      fill("f32_special", [&](size_t i) { return f32[i % f32.size()]; });
      std::normal_distribution<float> g(0.0f, 0.02f);
      fill("f32_gauss", [&](size_t) { return g(rng); });
      fill("f32_from_bf16", [&](size_t) {
        float f = g(rng);
        uint32_t u;
        std::memcpy(&u, &f, 4);
        return u & 0xffff0000u;
      });
      fill("i32_small",
           [&](size_t) { return static_cast<int32_t>(rng() % 7) - 3; });
      break;
    }
    case 8: {
      fill("f64_special", [&](size_t i) { return f64[i % f64.size()]; });
      std::normal_distribution<double> g(0.0, 1.0);
      fill("f64_gauss", [&](size_t) { return g(rng); });
      fill("i64_ramp", [](size_t i) { return static_cast<int64_t>(i) - 50; });
      break;
    }
    default: {
      fill("f8_all", [](size_t i) { return static_cast<uint8_t>(i * 7); });
      break;
    }
  }
  return out;
}

}  // namespace brevis::codec::testing
