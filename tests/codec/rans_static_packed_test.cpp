// Tables of at most 2^12 slots with symbols below 256 decode from packed
// slots (one 32-bit word a slot) where the CPU has AVX2 and no AVX-512 (or
// set_cap allows no more than AVX2 when the coder is built): the same
// symbols and the same errors as the slot tables, on every path, at the
// layout's limits (the widest freq and bias, the largest symbol).
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "codec/core/error.h"
#include "codec/entropy/rans_static.h"
#include "codec/entropy/rans_static_simd.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

namespace rs = rans_static;

// What a decode gives: the output, or that it threw.
struct outcome {
  bytes out;
  bool threw = false;
  friend bool operator==(outcome const&, outcome const&) = default;
};

outcome decode(rs::coder const& c, byte_view payload, size_t count) {
  outcome o{bytes(count * c.width())};
  try {
    c.decode(payload, count, o.out.data());
  } catch (error const&) {
    o = outcome{{}, true};
  }
  return o;
}

// `count` symbols of `width` bytes: `top` (the largest symbol) now and
// then, else symbols below `alphabet`, mostly 0.
bytes symbols(size_t count, unsigned width, uint32_t alphabet, uint32_t top,
              uint32_t seed) {
  std::mt19937 rng(seed);
  bytes d;
  for (size_t i = 0; i < count; ++i) {
    uint32_t const r = rng() % 16;
    uint32_t const v = r == 0 ? top : r < 4 ? rng() % alphabet : 0;
    if (width == 1) {
      d.push_back(static_cast<uint8_t>(v));
    } else {
      testing::append<uint16_t>(d, static_cast<uint16_t>(v));
    }
  }
  return d;
}

// The table of `d` at `scale`.
rs::table table_of(bytes const& d, unsigned width, unsigned scale) {
  std::vector<uint64_t> hist;
  rs::histogram(d, width, hist);
  return rs::normalize(hist, scale);
}

TEST(rans_static_packed_test, small_tables_of_small_symbols_take_packed_slots) {
  if (!rs::simd::avx2()) GTEST_SKIP() << "no AVX2: slot tables";
  rs::limit_simd(1);
  bytes const bytes8 = symbols(5000, 1, 200, 255, 1);
  bytes const small16 = symbols(5000, 2, 200, 255, 2);
  bytes const large16 = symbols(5000, 2, 200, 256, 3);
  for (unsigned scale : {8u, 10u, 12u}) {
    size_t const slots = size_t{1} << scale;
    EXPECT_EQ(rs::coder(table_of(bytes8, 1, scale), 1).decode_table_bytes(),
              4 * slots);
    EXPECT_EQ(rs::coder(table_of(small16, 2, scale), 2).decode_table_bytes(),
              4 * slots);
    // A symbol of 256 does not fit the packed word's 8 bits.
    EXPECT_EQ(rs::coder(table_of(large16, 2, scale), 2).decode_table_bytes(),
              6 * (slots + 1));
  }
  // Past 2^12 slots, freq and bias need more than 12 bits each.
  EXPECT_EQ(rs::coder(table_of(bytes8, 1, 13), 1).decode_table_bytes(),
            6 * ((size_t{1} << 13) + 1));
  rs::limit_simd(rs::simd_tuned);
}

// Every path decodes the same from packed slots as the input; payloads of
// both lane counts, with tails; tables at the packed word's limits: a
// symbol of freq 2^12 - 1 (the largest freq and bias) beside one of freq 1,
// and 255 as a symbol.
TEST(rans_static_packed_test, packed_slots_decode_exactly_on_every_path) {
  std::mt19937 rng(5);
  for (unsigned width : {1u, 2u}) {
    for (unsigned scale : {1u, 2u, 9u, 11u, 12u}) {
      for (size_t count : {size_t{1}, size_t{37}, size_t{4099}, rs::wide_from,
                           rs::wide_from + 4099}) {
        uint32_t const alphabet = std::min(256u, 1u << scale);
        bytes const d = symbols(count, width, alphabet, alphabet - 1,
                                static_cast<uint32_t>(rng()));
        std::vector<uint64_t> hist;
        rs::histogram(d, width, hist);
        if (std::count_if(hist.begin(), hist.end(),
                          [](uint64_t h) { return h != 0; }) < 2) {
          continue;  // one symbol: no slots at all
        }
        rs::limit_simd(1);
        rs::coder const c(rs::normalize(hist, scale), width);
        bytes payload;
        c.encode(d, payload);
        for (unsigned simd : {0u, 1u, 2u, 3u, rs::simd_tuned}) {
          rs::limit_simd(simd);
          EXPECT_EQ(decode(c, payload, count), (outcome{d}))
              << width << " " << scale << " " << count << " " << simd;
        }
      }
    }
    // The widest fields: freqs 4095 and 1 at 2^12 slots.
    rs::table t;
    t.scale = 12;
    t.symbols = {0, 255};
    t.freqs = {4095, 1};
    rs::limit_simd(1);
    rs::coder const c(t, width);
    bytes d;
    for (size_t i = 0; i < rs::wide_from + 100; ++i) {
      uint32_t const v = i % 1000 == 7 ? 255 : 0;
      if (width == 1) {
        d.push_back(static_cast<uint8_t>(v));
      } else {
        testing::append<uint16_t>(d, static_cast<uint16_t>(v));
      }
    }
    bytes payload;
    c.encode(d, payload);
    for (unsigned simd : {0u, 1u, rs::simd_tuned}) {
      rs::limit_simd(simd);
      EXPECT_EQ(decode(c, payload, d.size() / width), (outcome{d}))
          << width << " " << simd;
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

// Cut, random and corrupted payloads give the same outcome on every path
// as on the scalar one: an error where it throws, else the same symbols.
TEST(rans_static_packed_test, malformed_payloads_fail_alike_on_every_path) {
  std::mt19937 rng(11);
  for (unsigned width : {1u, 2u}) {
    for (size_t count : {size_t{4099}, rs::wide_from + 1000}) {
      bytes const d = symbols(count, width, 120, 255, width);
      rs::limit_simd(1);
      rs::coder const c(table_of(d, width, 12), width);
      bytes payload;
      c.encode(d, payload);
      for (unsigned trial = 0; trial < 40; ++trial) {
        bytes p = payload;
        switch (trial % 4) {
          case 0:  // cut at an even length
            p.resize(rng() % (p.size() / 2) * 2);
            break;
          case 1:  // cut by one byte
            p.pop_back();
            break;
          case 2:  // random bytes
            for (uint8_t& b : p) b = static_cast<uint8_t>(rng());
            break;
          default:  // flipped bytes
            for (int f = 0; f < 3; ++f) p[rng() % p.size()] ^= 0x5a;
        }
        rs::limit_simd(0);
        outcome const want = decode(c, p, count);
        // Flipped bytes may still decode (to other symbols); the rest not.
        if (trial % 4 != 3) {
          EXPECT_TRUE(want.threw) << width << " " << count << " " << trial;
        }
        for (unsigned simd : {1u, 2u, 3u, rs::simd_tuned}) {
          rs::limit_simd(simd);
          EXPECT_EQ(decode(c, p, count), want)
              << width << " " << count << " " << trial << " " << simd;
        }
      }
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

// Narrow pairs of packed streams (and a packed one beside slot tables) take
// the AVX2 pair kernel on AMD: the same as two decodes.
TEST(rans_static_packed_test, packed_streams_pair_like_two_decodes) {
  rs::limit_simd(1);
  bytes const d8 = symbols(5003, 1, 90, 255, 21);
  bytes const d16 = symbols(4111, 2, 60, 255, 22);
  bytes const slots16 = symbols(3001, 2, 60, 4000, 23);  // slot tables
  rs::coder const c8(table_of(d8, 1, 11), 1);
  rs::coder const c16(table_of(d16, 2, 12), 2);
  rs::coder const cw(table_of(slots16, 2, 12), 2);
  std::vector<std::pair<rs::coder const*, bytes const*>> const streams = {
      {&c8, &d8}, {&c16, &d16}, {&cw, &slots16}};
  for (auto const& [ca, da] : streams) {
    for (auto const& [cb, db] : streams) {
      bytes pa, pb;
      ca->encode(*da, pa);
      cb->encode(*db, pb);
      for (unsigned simd : {0u, 1u, rs::simd_tuned}) {
        rs::limit_simd(simd);
        bytes oa(da->size()), ob(db->size());
        rs::coder::decode_pair({ca, pa, da->size() / ca->width(), oa.data()},
                               {cb, pb, db->size() / cb->width(), ob.data()});
        EXPECT_EQ(oa, *da) << simd;
        EXPECT_EQ(ob, *db) << simd;
        // A cut payload throws as it does alone.
        EXPECT_THROW(rs::coder::decode_pair(
                         {ca, byte_view(pa).first(pa.size() - 2),
                          da->size() / ca->width(), oa.data()},
                         {cb, pb, db->size() / cb->width(), ob.data()}),
                     error);
      }
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

}  // namespace
}  // namespace brevis::codec
