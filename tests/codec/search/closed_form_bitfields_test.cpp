// The closed form's bitfields candidate (codec/search/closed_form.cpp): on
// 16-bit floats whose sign and exponent are best coded as one symbol it
// writes bitfields with two static tables, and its estimate is what the
// archive holds for the region.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "codec/container/archive.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/parse_fixtures.h"
#include "tests/codec/search/searched_archive.h"

namespace brevis::codec::search {
namespace {

using testing::searched_archive;

bytes pack(std::vector<uint16_t> const& v) {
  bytes out(v.size() * 2);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

// bf16 weights whose magnitudes halve in frequency every binade over 20
// binades, mantissas leaning low: thousands of values (their own table
// costs a frequency each), and an exponent whose low bit its others
// predict (byte planes split it from them).
std::vector<uint16_t> geometric_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) {
    unsigned k = 0;
    while (k < 19 && (rng() & 1)) ++k;
    unsigned const m = std::min(rng() & 0x7f, rng() & 0x7f);
    x = static_cast<uint16_t>((rng() & 1) << 15 | (125 - k) << 7 | m);
  }
  return out;
}

// fp16 weights whose mantissas take 24 values spread over all 10 bits:
// byte planes split each across both bytes; bitfields keeps it whole.
std::vector<uint16_t> spread_mantissa_fp16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<uint16_t> mantissas(24);
  for (uint16_t& m : mantissas) m = static_cast<uint16_t>(rng() & 0x3ff) | 1;
  std::vector<uint16_t> out(n);
  for (uint16_t& x : out) {
    int const e =
        std::clamp(12 + static_cast<int>(std::lround(2 * g(rng))), 1, 30);
    x = static_cast<uint16_t>((rng() & 1) << 15 | e << 10 |
                              mantissas[rng() % mantissas.size()]);
  }
  out[n / 2] = 0x3a05;  // a value of its own (the gate asks for one)
  return out;
}

TEST(closed_form_bitfields, chosen_where_best_and_estimated_exactly) {
  size_t const n = 300000;
  bytes const file = test::make_safetensors(
      {{"a", "BF16", {n}, pack(geometric_bf16(n, 3))},
       {"b", "F16", {n}, pack(spread_mantissa_fp16(n, 4))}});
  searched_archive const a(file);
  ASSERT_TRUE(a.reads_back);
  archive_reader const& rd = a.reader;
  size_t tensors = 0;
  for (size_t i = 0; i < rd.regions().size(); ++i) {
    region_entry const& e = rd.regions()[i];
    if (e.info.kind != region_kind::tensor) continue;
    ++tensors;
    node const& p = rd.programs()[e.program];
    std::string const text = program_text(p);
    std::string const want = e.info.name == "a"
                                 ? "view:2:1(bitfields:7:9(rans_static["
                                 : "view:2:2(bitfields:10:6(rans_static[";
    EXPECT_EQ(text.rfind(want, 0), 0u) << e.info.name << ": " << text;
    EXPECT_EQ(text.find("rans0"), std::string::npos) << text;
    ASSERT_TRUE(e.how.has_value());
    EXPECT_EQ(e.how->expansions, 0u) << e.info.name;  // the closed form's
    size_t const actual = a.region_bytes(i);
    // Within 40 bytes of some 400,000: the framing and the states' loss
    // are counted, the tables' rounding is not.
    EXPECT_NEAR(e.how->estimated_bytes, static_cast<double>(actual), 40)
        << e.info.name << ": " << text;
  }
  EXPECT_EQ(tensors, 2u);
}

}  // namespace
}  // namespace brevis::codec::search
