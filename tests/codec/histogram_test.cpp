#include "codec/entropy/histogram.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

#include "tests/codec/generators.h"

namespace brevis::codec {
namespace {

sparse_histogram16 reference(bytes const& d) {
  std::map<uint32_t, uint64_t> m;
  for (size_t i = 0; i + 2 <= d.size(); i += 2) ++m[load_le<uint16_t>(&d[i])];
  return {m.begin(), m.end()};
}

// Sizes on both sides of the switch between the small-input and large-input
// ways of counting, odd lengths, and inputs that reuse the thread's counters
// one after another (each must see them zeroed).
TEST(histogram_test, matches_a_plain_count) {
  std::mt19937 rng(21);
  for (size_t lanes :
       {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{17}, size_t{4099},
        size_t{65535}, size_t{65536}, size_t{65537}, size_t{200001}}) {
    for (int kind = 0; kind < 4; ++kind) {
      bytes d;
      for (size_t i = 0; i < lanes; ++i) {
        uint16_t v = 0;
        switch (kind) {
          case 0:
            v = static_cast<uint16_t>(rng());
            break;  // all over
          case 1:
            v = static_cast<uint16_t>(0x3c00 + rng() % 40);
            break;
          case 2:
            v = 0xffff;
            break;  // all equal
          default:
            v = static_cast<uint16_t>(i);
            break;  // ramp
        }
        testing::append<uint16_t>(d, v);
      }
      if (lanes % 2) d.push_back(0xab);  // odd byte: ignored
      EXPECT_EQ(histogram16(d), reference(d)) << lanes << " " << kind;
    }
  }
}

}  // namespace
}  // namespace brevis::codec
