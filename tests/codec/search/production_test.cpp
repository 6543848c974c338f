// Where the search's productions apply: zstd's trial is spent only where it
// can find what the other coders miss.

#include "codec/search/production.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "codec/search/value_stats.h"

namespace brevis::codec::search {
namespace {

bool zstd_applies(value_info const& v, region_input const& in) {
  auto const prods = productions();
  auto const it =
      std::find_if(prods.begin(), prods.end(),
                   [](production const& p) { return p.name == "zstd"; });
  EXPECT_NE(it, prods.end());
  return it->applies(v, in);
}

TEST(production, zstd_codes_a_tensors_bytes_and_elements_only) {
  bytes data(4096);
  for (size_t i = 0; i < data.size(); ++i) data[i] = (i / 16) % 4;
  stream const sample{data, bytes_type};
  value_stats stats = measure(sample);
  stats.word_repeats = 0.5;  // words repeat: what zstd finds
  region tensor{0, data.size(), region_kind::tensor, dtype::bf16, {2048}, "w"};
  region_input const in{tensor, data};
  EXPECT_TRUE(zstd_applies({sample, stats, 0, opcode::raw, {}, nullptr}, in));
  EXPECT_TRUE(zstd_applies({sample, stats, 1, opcode::view, {}, nullptr}, in));
  // Another operator's output (runs' values or lengths) is left to the
  // entropy coders in a typed tensor...
  EXPECT_FALSE(zstd_applies({sample, stats, 1, opcode::runs, {}, nullptr}, in));
  EXPECT_FALSE(zstd_applies({sample, stats, 2, opcode::view, {}, nullptr}, in));
  // ... but not in untyped bytes, whose structure is unknown.
  region untyped{0, data.size(), region_kind::tensor, dtype::none, {}, "u"};
  region_input const raw_in{untyped, data};
  EXPECT_TRUE(
      zstd_applies({sample, stats, 1, opcode::runs, {}, nullptr}, raw_in));
}

TEST(production, zstd_is_not_tried_on_typed_tensors_past_64_kib) {
  for (size_t size : {size_t{64} << 10, (size_t{64} << 10) + 2}) {
    bytes data(size);
    for (size_t i = 0; i < data.size(); ++i) data[i] = (i / 16) % 4;
    stream const sample{bytes(data.begin(), data.begin() + 4096), bytes_type};
    value_stats stats = measure(sample);
    stats.word_repeats = 0.5;
    bool const small = size <= (64u << 10);
    region tensor{0, size, region_kind::tensor, dtype::bf16, {size / 2}, "w"};
    region_input const in{tensor, data};
    EXPECT_EQ(zstd_applies({sample, stats, 0, opcode::raw, {}, nullptr}, in),
              small);
    EXPECT_EQ(zstd_applies({sample, stats, 1, opcode::view, {}, nullptr}, in),
              small);
    // Untyped bytes and opaque regions of any size still try it.
    region untyped{0, size, region_kind::tensor, dtype::none, {}, "u"};
    region_input const raw_in{untyped, data};
    EXPECT_TRUE(
        zstd_applies({sample, stats, 0, opcode::raw, {}, nullptr}, raw_in));
    region opaque{0, size, region_kind::opaque, dtype::none, {}, "h"};
    region_input const opaque_in{opaque, data};
    EXPECT_TRUE(
        zstd_applies({sample, stats, 0, opcode::raw, {}, nullptr}, opaque_in));
  }
}

}  // namespace
}  // namespace brevis::codec::search
