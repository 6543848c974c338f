// Every encoder level (scalar, AVX2, AVX-512 where the CPU has them) writes
// the same payload: the vector encoders divide in float and correct the
// quotient, which must land exactly at every precision they run at (2^10 to
// 2^16) and on every table shape; and they refuse an absent symbol wherever
// it falls. Narrow (8-state) and wide (32-state) payloads, every tail.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "codec/entropy/rans_static.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

namespace rs = rans_static;

constexpr unsigned levels[] = {0, 1, 2, 3, rs::simd_tuned};

// `count` symbols of `width` bytes from the `alphabet` of symbols (each
// present once first, if it fits), drawn with weights from `weights`.
bytes draw(size_t count, unsigned width, std::vector<uint32_t> const& alphabet,
           std::discrete_distribution<size_t>& weights, std::mt19937& rng) {
  bytes d;
  d.reserve(count * width);
  for (size_t i = 0; i < count; ++i) {
    uint32_t const v =
        i < alphabet.size() ? alphabet[i] : alphabet[weights(rng)];
    if (width == 1) {
      d.push_back(static_cast<uint8_t>(v));
    } else {
      testing::append<uint16_t>(d, static_cast<uint16_t>(v));
    }
  }
  return d;
}

// Encodes `d` at every level under `t`: the same payload, which decodes
// back; returns it.
bytes agree(bytes const& d, unsigned width, rs::table const& t,
            std::string const& what) {
  rs::coder const c(t, width);
  bytes want;
  for (unsigned level : levels) {
    rs::limit_simd(level);
    bytes payload;
    c.encode(d, payload);
    if (level == 0) want = payload;
    EXPECT_EQ(payload, want) << what << " level " << level;
  }
  rs::limit_simd(rs::simd_tuned);
  bytes back(d.size());
  c.decode(want, d.size() / width, back.data());
  EXPECT_EQ(back, d) << what;
  return want;
}

// Alphabets of 2 to 65536 symbols (spread over the 16-bit range, so that
// both the tables by the symbol and those by index serve), uniform or
// skewed, at every precision the vector encoders take and one below.
TEST(rans_static_encoders, agree_on_every_alphabet_precision_and_length) {
  std::mt19937 rng(2026);
  for (unsigned width : {1u, 2u}) {
    for (uint32_t k : {2u, 3u, 17u, 64u, 200u, 256u, 511u, 4000u, 65536u}) {
      if (width == 1 && k > 256) continue;
      // Spread: symbols k apart in the alphabet's range when there is room.
      uint32_t const range = width == 1 ? 256 : 65536;
      uint32_t const stride = k == 4000 ? range / k : 1;
      std::vector<uint32_t> alphabet(k);
      for (uint32_t s = 0; s < k; ++s) alphabet[s] = s * stride;
      for (bool skewed : {false, true}) {
        std::vector<double> w(k);
        for (uint32_t s = 0; s < k; ++s)
          w[s] = skewed ? std::pow(0.5, std::min<uint32_t>(s, 60)) + 1e-7 : 1;
        std::discrete_distribution<size_t> weights(w.begin(), w.end());
        for (unsigned scale : {9u, 10u, 11u, 13u, 15u, 16u}) {
          if ((uint64_t{1} << scale) < k) continue;
          // Narrow payloads of every tail, then wide ones.
          for (size_t count :
               {size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{31},
                size_t{4095}, size_t{4097}, rs::wide_from - 1, rs::wide_from,
                rs::wide_from + 1, rs::wide_from + 31, rs::wide_from + 1000,
                rs::wide_from + 2049, rs::wide_from + 2048 * 3 + 100}) {
            if (count < k) continue;
            bytes const d = draw(count, width, alphabet, weights, rng);
            std::vector<uint64_t> hist;
            rs::histogram(d, width, hist);
            agree(d, width, rs::normalize(hist, scale),
                  "width " + std::to_string(width) + " k " + std::to_string(k) +
                      " skewed " + std::to_string(skewed) + " scale " +
                      std::to_string(scale) + " count " +
                      std::to_string(count));
          }
        }
      }
    }
  }
}

// The quotient's exactness boundary: the float estimate is least precise
// for a large freq and states near 2^32 (symbol 0 here, freq 2^scale - k),
// and quotients are largest (up to 2^22 at 2^10 slots) for freq 1 (the
// rare symbols, dense so that states stay high).
TEST(rans_static_encoders, agree_at_the_quotient_limit) {
  std::mt19937 rng(7);
  for (unsigned width : {1u, 2u}) {
    for (unsigned scale : {10u, 12u, 16u}) {
      for (uint32_t rare : {1u, 5u, 100u}) {
        rs::table t;
        t.scale = scale;
        for (uint32_t s = 0; s <= rare; ++s) {
          t.symbols.push_back(width == 1 ? s : s * 97);
          t.freqs.push_back(s == 0 ? (1u << scale) - rare : 1);
        }
        for (size_t count : {size_t{4001}, rs::wide_from + 13}) {
          for (unsigned share : {2u, 50u}) {  // rare symbols 1 in `share`
            bytes d;
            for (size_t i = 0; i < count; ++i) {
              uint32_t const v =
                  rng() % share == 0 ? t.symbols[1 + rng() % rare] : 0;
              width == 1
                  ? d.push_back(static_cast<uint8_t>(v))
                  : testing::append<uint16_t>(d, static_cast<uint16_t>(v));
            }
            agree(d, width, t,
                  "limit width " + std::to_string(width) + " scale " +
                      std::to_string(scale) + " rare " + std::to_string(rare));
          }
        }
      }
    }
  }
}

// An absent symbol anywhere (the first symbol coded, inside the vector
// rounds, in the scalar tail; inside and past the tables' range) throws
// errc::domain at every level, narrow and wide.
TEST(rans_static_encoders, refuse_absent_symbols_everywhere) {
  std::mt19937 rng(3);
  for (unsigned width : {1u, 2u}) {
    for (uint32_t top : {60u, 255u, 4000u, 65535u}) {
      if (width == 1 && top > 255) continue;
      for (size_t count : {size_t{1003}, rs::wide_from + 45}) {
        bytes d;
        for (size_t i = 0; i < count; ++i) {
          // Odd symbols only (even ones are absent), the top one present.
          uint32_t const v = i == 5 ? top | 1 : 2 * (rng() % (top / 2)) + 1;
          width == 1 ? d.push_back(static_cast<uint8_t>(v))
                     : testing::append<uint16_t>(d, static_cast<uint16_t>(v));
        }
        std::vector<uint64_t> hist;
        rs::histogram(d, width, hist);
        rs::coder const c(rs::normalize(hist, top > 4000 ? 16 : 12), width);
        std::vector<uint32_t> absent = {0, 2};
        if (width == 2) absent.push_back(0xfffe);
        for (unsigned level : levels) {
          rs::limit_simd(level);
          for (uint32_t a : absent) {
            for (size_t at : {size_t{0}, size_t{500}, count - 3, count - 1}) {
              bytes bad = d;
              if (width == 1) {
                bad[at] = static_cast<uint8_t>(a);
              } else {
                store_le<uint16_t>(bad.data() + 2 * at,
                                   static_cast<uint16_t>(a));
              }
              bytes payload;
              try {
                c.encode(bad, payload);
                ADD_FAILURE() << width << " top " << top << " level " << level
                              << " absent " << a << " at " << at;
              } catch (error const& e) {
                EXPECT_EQ(e.code(), errc::domain);
              }
            }
          }
        }
        rs::limit_simd(rs::simd_tuned);
      }
    }
  }
}

}  // namespace
}  // namespace brevis::codec
