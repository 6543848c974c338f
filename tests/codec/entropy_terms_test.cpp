// c_log2_c and c_log2_c_each: the table and the computed terms agree with
// c log2 c, and a buffer reused for histograms of varying sizes holds each
// one's terms in its first entries.
#include "codec/choose/entropy_terms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace brevis::codec {
namespace {

double exact(uint64_t c) {
  return c == 0 ? 0
                : static_cast<double>(c) * std::log2(static_cast<double>(c));
}

TEST(entropy_terms, c_log2_c_on_both_sides_of_the_table) {
  for (uint64_t c :
       {0ull, 1ull, 2ull, 3ull, 4095ull, 4096ull, 4097ull, 123456789ull}) {
    EXPECT_DOUBLE_EQ(c_log2_c(c), exact(c)) << c;
  }
}

TEST(entropy_terms, each_fills_the_first_entries_of_a_reused_buffer) {
  std::vector<double> out;
  for (size_t size : {1000u, 3u, 0u, 5000u, 17u, 5000u}) {
    std::vector<std::pair<uint32_t, uint32_t>> h;
    for (size_t i = 0; i < size; ++i) {
      // Counts below and above the table (4096).
      h.emplace_back(static_cast<uint32_t>(i),
                     static_cast<uint32_t>(1 + (i * 7919 + size) % 9000));
    }
    c_log2_c_each(h, out);
    ASSERT_GE(out.size(), h.size());
    for (size_t i = 0; i < h.size(); ++i) {
      EXPECT_EQ(out[i], c_log2_c(h[i].second)) << size << " " << i;
    }
  }
}

}  // namespace
}  // namespace brevis::codec
