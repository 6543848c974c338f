// The vector encoder's keyed path (tables in registers, no gathers): 8-bit
// symbols and 16-bit ones below 256 by the symbol, in 1 to 4 blocks of 64
// keys, and bf16-like sign|exponent symbols folded into a window per sign,
// with the symbols outside the windows escaping to a gather. The same
// payload as the scalar encoder at every cap, and absent symbols refused
// wherever they fall.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "codec/entropy/rans_static.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

namespace rs = rans_static;

// `count` symbols drawn from `alphabet` (weights: earlier ones commoner),
// every symbol of it present at least once.
bytes draw(size_t count, std::vector<uint32_t> const& alphabet, unsigned width,
           uint32_t seed) {
  std::mt19937 rng(seed);
  std::geometric_distribution<size_t> pick(0.05);
  bytes d;
  for (size_t i = 0; i < count; ++i) {
    uint32_t const v = i < alphabet.size()
                           ? alphabet[i]
                           : alphabet[pick(rng) % alphabet.size()];
    if (width == 1) {
      d.push_back(static_cast<uint8_t>(v));
    } else {
      testing::append<uint16_t>(d, static_cast<uint16_t>(v));
    }
  }
  return d;
}

void put(bytes& d, unsigned width, size_t at, uint32_t v) {
  if (width == 1) {
    d[at] = static_cast<uint8_t>(v);
  } else {
    store_le<uint16_t>(d.data() + 2 * at, static_cast<uint16_t>(v));
  }
}

// Encodes `d` at every cap (the same payload), decodes it back, and checks
// that each of `absent` put at a few places is refused.
void check(bytes const& d, unsigned width, unsigned scale,
           std::vector<uint32_t> const& absent, char const* what) {
  size_t const count = d.size() / width;
  std::vector<uint64_t> hist;
  rs::histogram(d, width, hist);
  rs::coder const c(rs::normalize(hist, scale), width);
  bytes want;
  for (unsigned simd : {0u, 1u, 2u, 3u}) {
    rs::limit_simd(simd);
    bytes payload;
    c.encode(d, payload);
    if (simd == 0) want = payload;
    EXPECT_EQ(payload, want) << what << " cap " << simd;
    bytes back(d.size());
    c.decode(payload, count, back.data());
    EXPECT_EQ(back, d) << what << " cap " << simd;
    for (uint32_t a : absent) {
      for (size_t at : {size_t{0}, size_t{777}, count / 2, count - 1}) {
        bytes bad = d;
        put(bad, width, at, a);
        payload.clear();
        try {
          c.encode(bad, payload);
          ADD_FAILURE() << what << " cap " << simd << " absent " << a << " at "
                        << at;
        } catch (error const& e) {
          EXPECT_EQ(e.code(), errc::domain);
        }
      }
    }
  }
  rs::limit_simd(3);
}

std::vector<uint32_t> range(uint32_t from, uint32_t to, uint32_t step = 1) {
  std::vector<uint32_t> v;
  for (uint32_t s = from; s < to; s += step) v.push_back(s);
  return v;
}

constexpr size_t wide = rs::wide_from + 77;  // a scalar tail, then rounds

TEST(rans_static_keyed, symbols_as_keys_in_every_block_count) {
  for (unsigned width : {1u, 2u}) {
    // The largest symbol sets the blocks: 1 (below 64) to 4 (below 256).
    for (uint32_t last : {3u, 63u, 64u, 127u, 191u, 255u}) {
      std::vector<uint32_t> alphabet = range(0, last, 2);
      alphabet.push_back(last);
      std::vector<uint32_t> absent = {1};
      if (last < 255) absent.push_back(last + 1), absent.push_back(255);
      if (width == 2) absent.push_back(256), absent.push_back(0xffff);
      for (unsigned scale : {10u, 16u}) {
        check(draw(wide, alphabet, width, last), width, scale, absent, "keys");
      }
    }
  }
}

TEST(rans_static_keyed, folded_sign_exponent_with_escapes) {
  // bf16-like: exponents 100..140 of both signs (more than 64 apart from
  // the zeros: those, and 0x1ff, escape the windows).
  std::vector<uint32_t> common = range(100, 141);
  std::vector<uint32_t> negative = range(356, 397);
  std::vector<uint32_t> alphabet = common;
  alphabet.insert(alphabet.end(), negative.begin(), negative.end());
  // Absent: in a window (139 is not present in the second case below), past
  // both windows, below them, and past 2^9.
  std::vector<uint32_t> const absent = {2, 255, 300, 400, 0x200, 0xffff};
  check(draw(wide, alphabet, 2, 1), 2, 16, absent, "fold, no escapes");
  // Narrow windows (fold 64) and wide ones (fold 128).
  check(draw(wide, range(120, 150), 2, 2), 2, 16, absent, "fold 64");
  std::vector<uint32_t> wide_windows = range(10, 130, 3);
  wide_windows.push_back(260);
  wide_windows.push_back(380);
  check(draw(wide, wide_windows, 2, 3), 2, 14, {2, 261, 0x1ff}, "fold 128");
  // Rare zeros and infinities escape: drawn last (the geometric draw makes
  // them rare).
  std::vector<uint32_t> with_escapes = alphabet;
  for (uint32_t e : {0u, 1u, 256u, 0x1ffu}) with_escapes.push_back(e);
  check(draw(4 * wide, with_escapes, 2, 4), 2, 16, absent, "escapes");
}

}  // namespace
}  // namespace brevis::codec
