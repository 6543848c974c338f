// Tables of at most 2^13 slots whose fields fit one 32-bit word (freq and
// slot - start of b bits each, b the largest freq's bits, then the symbol)
// decode from packed slots where the CPU has AVX2 and no AVX-512 (or
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

// A table of `symbols` with `freqs` at 2^scale.
rs::table make_table(unsigned scale, std::vector<uint32_t> symbols,
                     std::vector<uint32_t> freqs) {
  rs::table t;
  t.scale = scale;
  t.symbols = std::move(symbols);
  t.freqs = std::move(freqs);
  return t;
}

// Tables at the packed word's limits: 2b + the largest symbol's bits is
// exactly 32 (bytes at 2^12 with a freq of 4095; bf16's sign and exponent
// at 2^13, every freq below 2^11, with a 10-bit symbol; a 12-bit symbol at
// 2^10).
struct limit_table {
  unsigned width;
  rs::table t;
};
std::vector<limit_table> limit_tables() {
  return {{1, make_table(12, {0, 255}, {4095, 1})},
          {2, make_table(12, {0, 255}, {4095, 1})},
          {2, make_table(13, {0, 100, 256, 300, 1023},
                         {2047, 2047, 2047, 2047, 4})},
          {2, make_table(10, {0, 4095}, {1023, 1})}};
}

TEST(rans_static_packed_test, tables_whose_fields_fit_take_packed_slots) {
  if (!rs::simd::avx2()) GTEST_SKIP() << "no AVX2: slot tables";
  rs::limit_simd(1);
  auto const table_bytes = [](unsigned width, rs::table const& t) {
    return rs::coder(t, width).decode_table_bytes();
  };
  auto const slot_bytes = [](unsigned scale) {
    return 6 * ((size_t{1} << scale) + 1);
  };
  for (limit_table const& l : limit_tables()) {
    EXPECT_EQ(table_bytes(l.width, l.t), 4 * (size_t{1} << l.t.scale))
        << l.t.scale;
  }
  // One bit more of symbol or of freq does not fit.
  EXPECT_EQ(table_bytes(2, make_table(12, {0, 256}, {4095, 1})),
            slot_bytes(12));
  EXPECT_EQ(table_bytes(2, make_table(13, {0, 100, 256, 300, 1024},
                                      {2047, 2047, 2047, 2047, 4})),
            slot_bytes(13));
  EXPECT_EQ(table_bytes(2, make_table(13, {0, 256, 511}, {2048, 2048, 4096})),
            slot_bytes(13));
  EXPECT_EQ(table_bytes(2, make_table(10, {0, 4096}, {1023, 1})),
            slot_bytes(10));
  // Past 2^13 slots, packed slots would no longer fit in L1.
  std::vector<uint32_t> symbols(300), freqs(300, 16384 / 300);
  for (uint32_t i = 0; i < 300; ++i) symbols[i] = 2 * i;
  freqs[0] += 16384 - 300 * (16384 / 300);
  EXPECT_EQ(table_bytes(2, make_table(14, symbols, freqs)), slot_bytes(14));
  EXPECT_EQ(table_bytes(1, make_table(14, {0, 255}, {16383, 1})),
            slot_bytes(14));
  rs::limit_simd(rs::simd_tuned);
}

// Every path decodes the same from packed slots as the input; payloads of
// both lane counts, with tails; tables at the packed word's limits
// (limit_tables).
TEST(rans_static_packed_test, packed_slots_decode_exactly_on_every_path) {
  std::mt19937 rng(5);
  for (unsigned width : {1u, 2u}) {
    for (unsigned scale : {1u, 2u, 9u, 11u, 12u, 13u}) {
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
  }
  // The widest fields: each symbol in turn but the largest, which comes
  // now and then.
  for (limit_table const& l : limit_tables()) {
    rs::limit_simd(1);
    rs::coder const c(l.t, l.width);
    std::vector<uint32_t> const& sym = l.t.symbols;
    for (size_t count : {size_t{4099}, rs::wide_from + 100}) {
      bytes d;
      for (size_t i = 0; i < count; ++i) {
        uint32_t const v = i % 1000 == 7 ? sym.back() : sym[i % 7 % sym.size()];
        if (l.width == 1) {
          d.push_back(static_cast<uint8_t>(v));
        } else {
          testing::append<uint16_t>(d, static_cast<uint16_t>(v));
        }
      }
      bytes payload;
      c.encode(d, payload);
      for (unsigned simd : {0u, 1u, rs::simd_tuned}) {
        rs::limit_simd(simd);
        EXPECT_EQ(decode(c, payload, count), (outcome{d}))
            << l.width << " " << l.t.scale << " " << count << " " << simd;
      }
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
  // bf16's sign and exponent at 2^13 (packed with 11-bit fields).
  rs::table const exp_table = limit_tables()[2].t;
  rs::coder const ce(exp_table, 2);
  bytes exp16;
  for (size_t i = 0; i < 4007; ++i) {
    testing::append<uint16_t>(
        exp16, static_cast<uint16_t>(exp_table.symbols[i * 7 % 5]));
  }
  std::vector<std::pair<rs::coder const*, bytes const*>> const streams = {
      {&c8, &d8}, {&c16, &d16}, {&cw, &slots16}, {&ce, &exp16}};
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
