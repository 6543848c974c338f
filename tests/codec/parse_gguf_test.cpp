// GGUF parser tests: typed and block-quantized tensors, metadata skipping,
// alignment, and malformed headers.

#include <gtest/gtest.h>

#include <random>

#include "codec/parse/gguf.h"
#include "codec/parse/region.h"
#include "tests/codec/parse_fixtures.h"

namespace brevis::codec {
namespace {

using test::expect_covers;
using test::make_bytes;
using test::tensors_of;

dtype block(uint32_t ggml) {
  return static_cast<dtype>(static_cast<unsigned>(dtype::gguf_block) + ggml);
}

test::gguf_builder sample_builder() {
  test::gguf_builder g;
  g.kv_string("general.architecture", "llama");
  g.kv_u32("llama.block_count", 2);
  g.kv_f32_array("tokenizer.ggml.scores", 5);
  g.kv_string_array("tokenizer.ggml.tokens", {"<s>", "</s>", "a"});
  g.tensor("tok_embd.weight", {8, 3}, 0, make_bytes(96, 1));  // f32
  g.tensor("attn_q.weight", {64, 2}, 2, make_bytes(72, 2));   // q4_0
  g.tensor("ffn.weight", {256, 1}, 12, make_bytes(144, 3));   // q4_K
  g.tensor("norm.weight", {8}, 1, make_bytes(16, 4));         // f16
  g.tensor("out.weight", {4}, 30, make_bytes(8, 5));          // bf16
  g.tensor("pos.ids", {3}, 26, make_bytes(12, 6));            // i32
  return g;
}

TEST(parse_gguf_test, typed_and_quantized_tensors) {
  for (uint32_t version : {2u, 3u}) {
    bytes const file = sample_builder().build(version);
    parsed_file const p = parse_regions(file, "model.gguf");
    expect_covers(p, file.size());
    ASSERT_EQ(p.format, file_format::gguf) << p.note;
    EXPECT_EQ(p.regions[0].name, "gguf header");
    EXPECT_EQ(p.regions[0].length % 32, 0u);
    auto const t = tensors_of(p);
    ASSERT_EQ(t.size(), 6u);
    EXPECT_EQ(t[0].type, dtype::f32);
    EXPECT_EQ(t[0].shape, (std::vector<uint64_t>{3, 8}));
    EXPECT_EQ(t[0].length, 96u);
    EXPECT_EQ(t[1].type, block(2));
    EXPECT_EQ(t[1].length, 72u);
    EXPECT_EQ(dtype_name(t[1].type), "gguf:q4_0");
    EXPECT_EQ(t[2].type, block(12));
    EXPECT_EQ(t[2].length, 144u);
    EXPECT_EQ(t[3].type, dtype::f16);
    EXPECT_EQ(t[4].type, dtype::bf16);
    EXPECT_EQ(t[5].type, dtype::i32);
    EXPECT_EQ(t[5].name, "pos.ids");
    for (region const& r : t) EXPECT_EQ(r.offset % 32, 0u);
    byte_view const got = test::slice(file, t[1]);
    bytes const want = make_bytes(72, 2);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()));
  }
}

TEST(parse_gguf_test, custom_alignment) {
  test::gguf_builder g;
  g.kv_u32("general.alignment", 64);
  g.tensor("a", {3}, 0, make_bytes(12, 1));
  g.tensor("b", {5}, 0, make_bytes(20, 2));
  bytes const file = g.build(3, 64);
  parsed_file const p = parse_regions(file);
  ASSERT_EQ(p.format, file_format::gguf) << p.note;
  auto const t = tensors_of(p);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].offset % 64, 0u);
  EXPECT_EQ(t[1].offset, t[0].offset + 64);
}

TEST(parse_gguf_test, no_tensors_and_unaligned_end) {
  test::gguf_builder g;
  g.kv_string("general.name", "x");
  bytes file = g.build();
  while (file.size() % 32 == 0) file.pop_back();  // file ends before padding
  parsed_file const p = parse_regions(file);
  // A trimmed tail may cut the last KV; either way the file is covered.
  expect_covers(p, file.size());
  test::gguf_builder g2;
  bytes const file2 = g2.build();
  parsed_file const p2 = parse_regions(file2);
  EXPECT_EQ(p2.format, file_format::gguf);
  expect_covers(p2, file2.size());
}

TEST(parse_gguf_test, type_table) {
  EXPECT_EQ(ggml_type_lookup(4), nullptr);
  EXPECT_EQ(ggml_type_lookup(1000), nullptr);
  ASSERT_NE(ggml_type_lookup(14), nullptr);
  EXPECT_EQ(ggml_type_lookup(14)->block_bytes, 210u);  // q6_K
  EXPECT_EQ(ggml_type_lookup(8)->block_bytes, 34u);    // q8_0
  EXPECT_EQ(std::string(ggml_type_lookup(23)->name), "iq4_xs");
}

TEST(parse_gguf_test, truncated_prefixes) {
  bytes const file = sample_builder().build();
  // Cutting only the alignment padding after the last tensor is harmless;
  // any shorter prefix is a truncated file.
  auto const t = tensors_of(parse_regions(file));
  ASSERT_FALSE(t.empty());
  uint64_t const data_end = t.back().offset + t.back().length;
  for (size_t n = 1; n < file.size(); ++n) {
    parsed_file const p = parse_regions(byte_view(file.data(), n));
    expect_covers(p, n);
    ASSERT_EQ(p.format, n < data_end ? file_format::unknown : file_format::gguf)
        << n;
  }
}

bytes header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
  bytes out;
  test::append(out, "GGUF");
  put_le<uint32_t>(out, version);
  put_le<uint64_t>(out, tensors);
  put_le<uint64_t>(out, kvs);
  return out;
}

void expect_fallback(bytes const& file) {
  parsed_file const p = parse_regions(file);
  expect_covers(p, file.size());
  EXPECT_EQ(p.format, file_format::unknown);
  EXPECT_EQ(p.regions.size(), 1u);
  EXPECT_FALSE(p.note.empty());
}

TEST(parse_gguf_test, malformed) {
  bytes pad = make_bytes(256, 0);
  {  // Absurd counts must not loop or allocate.
    bytes f = header(uint64_t{1} << 60, 0);
    put_bytes(f, pad);
    expect_fallback(f);
    f = header(0, uint64_t{1} << 60);
    put_bytes(f, pad);
    expect_fallback(f);
  }
  {  // Version 1 and 4.
    bytes f = header(0, 0, 1);
    expect_fallback(f);
    f = header(0, 0, 4);
    expect_fallback(f);
  }
  {  // A string of 2^63 bytes.
    bytes f = header(0, 1);
    put_le<uint64_t>(f, uint64_t{1} << 63);
    put_bytes(f, pad);
    expect_fallback(f);
  }
  {  // An array of 2^62 u64s, and of 2^62 strings.
    for (uint32_t elem : {10u, 8u, 9u}) {
      bytes f = header(0, 1);
      test::gguf_builder::string(f, "k");
      put_le<uint32_t>(f, 9);
      put_le<uint32_t>(f, elem);
      put_le<uint64_t>(f, uint64_t{1} << 62);
      put_bytes(f, pad);
      expect_fallback(f);
    }
  }
  {  // Unknown value type.
    bytes f = header(0, 1);
    test::gguf_builder::string(f, "k");
    put_le<uint32_t>(f, 13);
    put_bytes(f, pad);
    expect_fallback(f);
  }
  {  // Deeply nested arrays.
    bytes f = header(0, 1);
    test::gguf_builder::string(f, "k");
    put_le<uint32_t>(f, 9);
    for (int i = 0; i < 100; ++i) {
      put_le<uint32_t>(f, 9);
      put_le<uint64_t>(f, 1);
    }
    put_bytes(f, pad);
    expect_fallback(f);
  }
  auto with_tensor = [&](std::vector<uint64_t> dims, uint32_t type,
                         uint64_t offset, uint32_t n_dims) {
    bytes f = header(1, 0);
    test::gguf_builder::string(f, "t");
    put_le<uint32_t>(f, n_dims);
    for (uint64_t d : dims) put_le<uint64_t>(f, d);
    put_le<uint32_t>(f, type);
    put_le<uint64_t>(f, offset);
    while (f.size() % 32) f.push_back(0);
    put_bytes(f, pad);
    return f;
  };
  EXPECT_EQ(parse_regions(with_tensor({16}, 0, 0, 1)).format,
            file_format::gguf);
  expect_fallback(with_tensor({16}, 4, 0, 1));                 // removed type
  expect_fallback(with_tensor({16}, 99, 0, 1));                // unknown type
  expect_fallback(with_tensor({16}, 2, 0, 1));                 // partial block
  expect_fallback(with_tensor({65}, 0, 0, 1));                 // past the end
  expect_fallback(with_tensor({16}, 0, ~uint64_t{0} - 8, 1));  // offset wraps
  expect_fallback(with_tensor({uint64_t{1} << 40, uint64_t{1} << 40}, 0, 0,
                              2));                // element count overflows
  expect_fallback(with_tensor({1}, 0, 0, 1000));  // too many dims
  {                                               // Overlapping tensors.
    test::gguf_builder g;
    bytes f = header(2, 0);
    for (char const* name : {"a", "b"}) {
      test::gguf_builder::string(f, name);
      put_le<uint32_t>(f, 1);
      put_le<uint64_t>(f, 16);
      put_le<uint32_t>(f, 0);
      put_le<uint64_t>(f, name[0] == 'a' ? 0 : 32);
    }
    while (f.size() % 32) f.push_back(0);
    put_bytes(f, pad);
    expect_fallback(f);
  }
  {  // Bad alignment values.
    for (uint32_t a : {0u, 3u, 48u}) {
      test::gguf_builder g;
      g.kv_u32("general.alignment", a);
      expect_fallback(g.build());
    }
  }
}

TEST(parse_gguf_test, mutated_files_always_cover) {
  bytes const seed = sample_builder().build();
  std::mt19937_64 rng(11);
  for (int i = 0; i < 3000; ++i) {
    bytes file = seed;
    int const flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      // Mostly hit the header, where the structure is.
      size_t const range = rng() % 4 ? 200 : file.size();
      file[rng() % range] = static_cast<uint8_t>(rng());
    }
    parsed_file p;
    ASSERT_NO_THROW(p = parse_regions(file));
    ASSERT_TRUE(regions_cover(p.regions, file.size()));
  }
}

}  // namespace
}  // namespace brevis::codec
