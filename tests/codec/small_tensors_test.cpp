#include "codec/choose/small_tensors.h"

#include <gtest/gtest.h>
#include <zstd.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "codec/container/archive.h"
#include "codec/container/format.h"
#include "codec/search/search_chooser.h"
#include "tests/codec/parse_fixtures.h"

namespace brevis::codec {
namespace {

using test::make_safetensors;
using test::st_tensor;

// fp16 weights: normal values of scale `scale` (continuous: most elements
// distinct).
bytes fp16_weights(size_t n, float scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, scale);
  bytes out;
  for (size_t i = 0; i < n; ++i) {
    // Round to fp16 by hand: sign, exponent and 10 mantissa bits.
    float const x = normal(rng);
    int e = 0;
    float const m = std::frexp(std::fabs(x), &e);  // x = m 2^e, m in [0.5, 1)
    uint16_t bits = 0;
    if (e + 14 > 0) {
      auto const mant = static_cast<uint16_t>(std::lround((m * 2 - 1) * 1024));
      bits = static_cast<uint16_t>(((e + 14) << 10) + mant);
    }
    if (x < 0) bits |= 0x8000;
    put_le<uint16_t>(out, bits);
  }
  return out;
}

// `count` tensors of `elements` fp16-like weights (dtype `type`), named
// prefix + index + suffix.
std::vector<st_tensor> weight_tensors(int count, uint64_t elements,
                                      std::string const& type,
                                      std::string const& prefix,
                                      std::string const& suffix = "") {
  std::vector<st_tensor> out;
  out.reserve(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    std::string name = prefix;
    name += std::to_string(i);
    name += suffix;
    out.push_back({std::move(name),
                   type,
                   {elements},
                   fp16_weights(elements, 0.02f, static_cast<uint32_t>(i))});
  }
  return out;
}

// A file of `lengths` bytes of regions, each `kind` and `type` as given,
// filled with continuous fp16-like values.
struct layout {
  region_kind kind;
  dtype type;
  uint64_t length;
};

std::pair<bytes, std::vector<region>> file_of(std::vector<layout> const& l,
                                              uint32_t seed = 1) {
  bytes file;
  std::vector<region> regions;
  for (size_t i = 0; i < l.size(); ++i) {
    bytes const b = fp16_weights((l[i].length + 1) / 2, 0.05f,
                                 seed + static_cast<uint32_t>(i));
    region r;
    r.offset = file.size();
    r.length = l[i].length;
    r.kind = l[i].kind;
    r.type = l[i].type;
    if (l[i].kind == region_kind::tensor) {
      unsigned const w = std::max(1u, dtype_width(l[i].type));
      r.shape = {l[i].length / w};
    }
    r.name = "t" + std::to_string(i);
    file.insert(file.end(), b.begin(),
                b.begin() + static_cast<ptrdiff_t>(l[i].length));
    regions.push_back(r);
  }
  return {file, regions};
}

constexpr auto tensor = region_kind::tensor;
constexpr auto opaque = region_kind::opaque;

TEST(small_tensors_test, a_run_of_small_float_tensors_becomes_one_region) {
  std::vector<layout> l{{opaque, dtype::none, 100}};
  for (int i = 0; i < 10; ++i) l.push_back({tensor, dtype::f16, 1000});
  auto [file, regions] = file_of(l);
  std::vector<region> const out = join_small_tensors(file, regions, 1 << 20);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].name, "t0");
  EXPECT_EQ(out[0].tensors, 1u);
  region const& run = out[1];
  EXPECT_EQ(run.offset, 100u);
  EXPECT_EQ(run.length, 10000u);
  EXPECT_EQ(run.kind, tensor);
  EXPECT_EQ(run.type, dtype::f16);
  EXPECT_TRUE(run.shape.empty());
  EXPECT_EQ(run.tensors, 10u);
  EXPECT_EQ(run.name, "t1 .. t10 (10 tensors)");
  EXPECT_TRUE(regions_cover(out, file.size()));
}

TEST(small_tensors_test, runs_break_where_a_region_cannot_join) {
  // Each break: a large tensor, another dtype, an opaque region, integer
  // tensors; a small tensor left alone keeps its shape.
  auto [file, regions] = file_of({{tensor, dtype::bf16, 2000},
                                  {tensor, dtype::bf16, 2000},
                                  {tensor, dtype::bf16, small_tensor_bytes},
                                  {tensor, dtype::bf16, 2000},
                                  {tensor, dtype::f16, 2000},
                                  {tensor, dtype::f16, 2000},
                                  {opaque, dtype::none, 2000},
                                  {tensor, dtype::f16, 2000},
                                  {tensor, dtype::i16, 2000},
                                  {tensor, dtype::i16, 2000},
                                  {tensor, dtype::f32, 4000}});
  std::vector<region> const out = join_small_tensors(file, regions, 1 << 20);
  std::vector<std::string> names;
  names.reserve(out.size());
  for (region const& r : out) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"t0 .. t1 (2 tensors)", "t2", "t3",
                                             "t4 .. t5 (2 tensors)", "t6", "t7",
                                             "t8", "t9", "t10"}));
  EXPECT_EQ(out[1].shape, std::vector<uint64_t>{small_tensor_bytes / 2});
  EXPECT_EQ(out[2].shape, std::vector<uint64_t>{1000});
  EXPECT_TRUE(regions_cover(out, file.size()));
}

TEST(small_tensors_test, tensors_of_few_values_are_left_alone) {
  // Dequantized from 8 bits: 16 values in 1000 elements (a table of its
  // own codes it best), between two continuous ones.
  auto [file, regions] = file_of({{tensor, dtype::f16, 2000},
                                  {tensor, dtype::f16, 2000},
                                  {tensor, dtype::f16, 2000}});
  for (size_t i = 0; i < 1000; ++i) {
    store_le<uint16_t>(file.data() + 2000 + 2 * i,
                       static_cast<uint16_t>(0x3c00 + 64 * (i % 16)));
  }
  std::vector<region> const out = join_small_tensors(file, regions, 1 << 20);
  ASSERT_EQ(out.size(), 3u);
  for (region const& r : out) EXPECT_EQ(r.tensors, 1u);
  // With one distinct value for four elements, it joins.
  for (size_t i = 0; i < 1000; ++i) {
    store_le<uint16_t>(file.data() + 2000 + 2 * i,
                       static_cast<uint16_t>(0x3c00 + i / 4));
  }
  EXPECT_EQ(join_small_tensors(file, regions, 1 << 20).size(), 1u);
}

TEST(small_tensors_test, a_run_holds_at_most_a_chunk) {
  std::vector<layout> l(100, {tensor, dtype::f16, 1000});
  auto [file, regions] = file_of(l);
  std::vector<region> const out = join_small_tensors(file, regions, 4096);
  ASSERT_EQ(out.size(), 25u);
  for (region const& r : out) {
    EXPECT_EQ(r.length, 4000u);
    EXPECT_EQ(r.tensors, 4u);
  }
  EXPECT_TRUE(regions_cover(out, file.size()));
}

TEST(small_tensors_test, a_long_name_keeps_both_ends_and_the_count) {
  auto [file, regions] =
      file_of({{tensor, dtype::f16, 2000}, {tensor, dtype::f16, 2000}});
  regions[0].name.assign(brv::max_name_length, 'a');
  regions[1].name.assign(brv::max_name_length, 'b');
  std::vector<region> const out = join_small_tensors(file, regions, 1 << 20);
  ASSERT_EQ(out.size(), 1u);
  std::string const& name = out[0].name;
  EXPECT_LE(name.size(), brv::max_name_length);
  EXPECT_GT(name.size(), brv::max_name_length - 2);
  EXPECT_EQ(name.front(), 'a');
  EXPECT_NE(name.find("a .. b"), std::string::npos);
  EXPECT_TRUE(name.ends_with("b (2 tensors)"));
}

TEST(small_tensors_test, f32_tensors_join_and_their_palettes_do_not) {
  auto [file, regions] = file_of({{tensor, dtype::f32, 4000},
                                  {tensor, dtype::f32, 4000},
                                  {tensor, dtype::f32, 4000}});
  EXPECT_EQ(join_small_tensors(file, regions, 1 << 20).size(), 1u);
  // The middle one of 16 values (in 1000 elements): alone.
  for (size_t i = 0; i < 1000; ++i) {
    store_le<uint32_t>(file.data() + 4000 + 4 * i,
                       0x3f800000u + 0x10000u * static_cast<uint32_t>(i % 16));
  }
  EXPECT_EQ(join_small_tensors(file, regions, 1 << 20).size(), 3u);
}

// Each tensor's values counted afresh: the second of two tensors of the
// same values (in reverse order) has as many distinct values as the first.
TEST(small_tensors_test, a_tensor_of_its_neighbours_values_joins) {
  auto [file, regions] =
      file_of({{tensor, dtype::bf16, 2000}, {tensor, dtype::bf16, 2000}});
  for (size_t e = 0; e < 1000; ++e) {
    std::copy_n(file.begin() + static_cast<ptrdiff_t>(2 * (999 - e)), 2,
                file.begin() + static_cast<ptrdiff_t>(2000 + 2 * e));
  }
  std::vector<region> const out = join_small_tensors(file, regions, 1 << 20);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tensors, 2u);
}

// A tensor whose bytes another tensor holds too stays a region (so a chunk)
// of its own, which the archive writes as a ref to the other.
TEST(small_tensors_test, repeated_tensors_stay_apart) {
  auto [file, regions] = file_of({{tensor, dtype::bf16, 2000},
                                  {tensor, dtype::bf16, 2000},
                                  {tensor, dtype::bf16, 2000},
                                  {tensor, dtype::bf16, 2000},
                                  {tensor, dtype::bf16, 2000}});
  std::copy_n(file.begin() + 2000, 2000, file.begin() + 6000);
  std::vector<region> const out = join_small_tensors(file, regions, 1 << 20);
  std::vector<std::string> names;
  names.reserve(out.size());
  for (region const& r : out) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string>{"t0", "t1", "t2", "t3", "t4"}));
}

// Through the writer: the copy is a ref, its neighbours still a run.
TEST(small_tensors_test, a_repeated_tensor_is_written_as_a_ref) {
  std::vector<st_tensor> tensors = weight_tensors(6, 1000, "BF16", "t");
  tensors[4].data = tensors[1].data;
  bytes const file = make_safetensors(tensors);
  auto chooser = make_search_chooser();
  archive_writer w(file, "copies.safetensors", *chooser, 1 << 20);
  bytes const archive = write_all(w);
  archive_reader r(archive);
  std::vector<std::string> names;
  for (region_entry const& g : r.regions()) names.push_back(g.info.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"safetensors header", "t0", "t1",
                                      "t2 .. t3 (2 tensors)", "t4", "t5"}));
  bool copy_is_ref = false;
  for (chunk_entry const& c : r.chunks()) {
    if (r.regions()[c.region].info.name == "t4") copy_is_ref = c.is_ref;
  }
  EXPECT_TRUE(copy_is_ref);
  bytes back(r.original_size());
  r.read(0, back.size(), back.data());
  EXPECT_EQ(back, file);
}

// Tensors of a length that is not a whole number of elements, or not
// adjacent, never join.
TEST(small_tensors_test, only_whole_adjacent_elements_join) {
  auto [file, regions] =
      file_of({{tensor, dtype::f16, 2000}, {tensor, dtype::f16, 2000}});
  regions[1].length = 1999;
  EXPECT_EQ(join_small_tensors(file, regions, 1 << 20).size(), 2u);
  regions[1].length = 1998;
  regions[1].offset = 2002;
  EXPECT_EQ(join_small_tensors(file, regions, 1 << 20).size(), 2u);
}

// What the join is for: a checkpoint of many small tensors (here 2,000 of
// 512 fp16 weights) codes smaller than zstd -3 does it, and back exactly.
TEST(small_tensors_test, many_small_tensors_code_smaller_than_zstd) {
  std::vector<st_tensor> const tensors =
      weight_tensors(2000, 512, "F16", "layer.", ".norm");
  bytes const file = make_safetensors(tensors);
  auto chooser = make_search_chooser();
  archive_writer w(file, "many.safetensors", *chooser, 1 << 20);
  bytes const archive = write_all(w);
  archive_reader r(archive);
  // The header, then the tensors in runs of a chunk (1 MiB: 1024 of them).
  ASSERT_EQ(r.regions().size(), 3u);
  EXPECT_EQ(r.regions()[1].info.name,
            "layer.0.norm .. layer.1023.norm (1024 tensors)");
  bytes back(r.original_size());
  r.read(0, back.size(), back.data());
  EXPECT_EQ(back, file);
  // Against Debian 12's libzstd (1.5.4), level 3.
  bytes z(ZSTD_compressBound(file.size()));
  size_t const zn =
      ZSTD_compress(z.data(), z.size(), file.data(), file.size(), 3);
  ASSERT_FALSE(ZSTD_isError(zn));
  EXPECT_LT(archive.size(), zn);
}

// The store keeps equal tensors of different files once: its chooser keeps
// every tensor a region of its own, whatever its neighbours.
TEST(small_tensors_test, the_stores_chooser_keeps_tensors_apart) {
  std::vector<st_tensor> const tensors = weight_tensors(20, 512, "BF16", "t");
  bytes const file = make_safetensors(tensors);
  auto store = make_store_chooser();
  EXPECT_FALSE(store->joins_small_tensors());
  archive_writer w(file, "few.safetensors", *store, 1 << 20);
  archive_reader r(write_all(w));
  EXPECT_EQ(r.regions().size(), 21u);
  EXPECT_TRUE(make_search_chooser()->joins_small_tensors());
}

}  // namespace
}  // namespace brevis::codec
