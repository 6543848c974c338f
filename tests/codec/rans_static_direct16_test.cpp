// The vector encoder's direct path for 16-bit symbols of a small range
// (bf16's sign and exponent): tables indexed by the symbol, like 8-bit
// ones. The same payload as the scalar encoder at the range's edges, and
// symbols absent from the table refused both inside the range and past it.
#include <gtest/gtest.h>

#include <random>

#include "codec/entropy/rans_static.h"
#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

namespace rs = rans_static;

bytes symbols16(size_t count, uint32_t range, uint32_t seed) {
  std::mt19937 rng(seed);
  bytes d;
  for (size_t i = 0; i < count; ++i) {
    // 0 and odd symbols (even ones are absent), the largest always present.
    uint32_t const v = i == count / 2   ? range - 1
                       : rng() % 4 == 0 ? 0
                                        : 2 * (rng() % (range / 2)) + 1;
    testing::append<uint16_t>(d, static_cast<uint16_t>(v));
  }
  return d;
}

TEST(rans_static_direct16, encoders_agree_and_refuse_absent_symbols) {
  size_t const count = rs::wide_from + 45;
  // Ranges below, at and past the direct tables' limit (4096 symbols).
  for (uint32_t range : {2u, 512u, 4096u, 4098u, 65536u}) {
    bytes const d = symbols16(count, range, range);
    std::vector<uint64_t> hist;
    rs::histogram(d, 2, hist);
    rs::coder const c(rs::normalize(hist, range > 8192 ? 16 : 14), 2);
    bytes want;
    for (unsigned simd : {0u, 2u, 3u, rs::simd_tuned}) {
      rs::limit_simd(simd);
      bytes payload;
      c.encode(d, payload);
      if (simd == 0) want = payload;
      EXPECT_EQ(payload, want) << range;
      bytes back(d.size());
      c.decode(payload, count, back.data());
      EXPECT_EQ(back, d) << range;
      // Absent: an even symbol in the range, and one past every table
      // (which must not pass for symbol 0, the tables' first entry).
      for (uint16_t absent : {uint16_t{2}, uint16_t{0xfffe}}) {
        if (absent == 2 && range <= 2) continue;
        for (size_t at : {size_t{0}, size_t{1000}, count - 1}) {
          bytes bad = d;
          store_le<uint16_t>(bad.data() + 2 * at, absent);
          payload.clear();
          try {
            c.encode(bad, payload);
            ADD_FAILURE() << range << " " << simd << " " << at << " " << absent;
          } catch (error const& e) {
            EXPECT_EQ(e.code(), errc::domain);
          }
        }
      }
    }
  }
  rs::limit_simd(rs::simd_tuned);
}

}  // namespace
}  // namespace brevis::codec
