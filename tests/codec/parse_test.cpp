// Tests of parse_regions: dispatch, fallbacks, safetensors, npy, and the
// covering invariant on random input.

#include <gtest/gtest.h>

#include <random>

#include "codec/parse/region.h"
#include "tests/codec/parse_fixtures.h"

namespace brevis::codec {
namespace {

using test::expect_covers;
using test::make_bytes;
using test::slice;
using test::tensors_of;

// Every strict prefix of a valid file is a truncated file: it must become one
// untyped region, never throw.
void expect_prefixes_fall_back(bytes const& file) {
  for (size_t n = 1; n < file.size(); ++n) {
    byte_view const prefix(file.data(), n);
    parsed_file const p = parse_regions(prefix);
    expect_covers(p, n);
    ASSERT_EQ(p.format, file_format::unknown) << "prefix " << n;
    ASSERT_EQ(p.regions.size(), 1u);
    EXPECT_FALSE(p.note.empty());
  }
}

void expect_fallback(bytes const& file, std::string_view hint = {}) {
  parsed_file const p = parse_regions(file, hint);
  expect_covers(p, file.size());
  EXPECT_EQ(p.format, file_format::unknown);
  ASSERT_EQ(p.regions.size(), 1u);
  EXPECT_EQ(p.regions[0].kind, region_kind::opaque);
  EXPECT_EQ(p.regions[0].type, dtype::none);
  EXPECT_FALSE(p.note.empty());
}

// ---------------------------------------------------------------- general --

TEST(parse_test, dtype_widths_and_names) {
  EXPECT_EQ(dtype_width(dtype::none), 0u);
  EXPECT_EQ(dtype_width(dtype::boolean), 1u);
  EXPECT_EQ(dtype_width(dtype::f8_e4m3), 1u);
  EXPECT_EQ(dtype_width(dtype::bf16), 2u);
  EXPECT_EQ(dtype_width(dtype::u32), 4u);
  EXPECT_EQ(dtype_width(dtype::u64), 8u);
  EXPECT_EQ(dtype_width(static_cast<dtype>(64 + 2)), 0u);
  EXPECT_EQ(dtype_name(dtype::none), "-");
  EXPECT_EQ(dtype_name(dtype::bf16), "bf16");
  EXPECT_EQ(dtype_name(dtype::f32), "f32");
  EXPECT_EQ(dtype_name(static_cast<dtype>(64 + 2)), "gguf:q4_0");
  EXPECT_EQ(dtype_name(static_cast<dtype>(64 + 12)), "gguf:q4_K");
  EXPECT_EQ(dtype_name(static_cast<dtype>(64 + 4)), "gguf:type4");
}

TEST(parse_test, empty_file_has_no_regions) {
  parsed_file const p = parse_regions({});
  EXPECT_TRUE(p.regions.empty());
  EXPECT_TRUE(regions_cover(p.regions, 0));
}

TEST(parse_test, unknown_file_is_one_untyped_region) {
  expect_fallback(make_bytes(1000, 3), "weights.bin");
}

TEST(parse_test, regions_cover_checks_order_gaps_and_empties) {
  std::vector<region> r(2);
  r[0].length = 4;
  r[1].offset = 4;
  r[1].length = 6;
  EXPECT_TRUE(regions_cover(r, 10));
  EXPECT_FALSE(regions_cover(r, 11));
  EXPECT_FALSE(regions_cover(r, 9));
  r[1].offset = 5;
  EXPECT_FALSE(regions_cover(r, 11));
  r[1].offset = 4;
  r[1].length = 0;
  EXPECT_FALSE(regions_cover(r, 4));
  r[1].length = ~uint64_t{0};
  EXPECT_FALSE(regions_cover(r, 10));
}

// ----------------------------------------------------------- safetensors --

TEST(parse_test, safetensors_all_dtypes) {
  struct spec {
    char const* name;
    dtype type;
  };
  spec const specs[] = {
      {"BOOL", dtype::boolean},    {"U8", dtype::u8},
      {"I8", dtype::i8},           {"F8_E5M2", dtype::f8_e5m2},
      {"F8_E4M3", dtype::f8_e4m3}, {"I16", dtype::i16},
      {"U16", dtype::u16},         {"F16", dtype::f16},
      {"BF16", dtype::bf16},       {"I32", dtype::i32},
      {"U32", dtype::u32},         {"F32", dtype::f32},
      {"F64", dtype::f64},         {"I64", dtype::i64},
      {"U64", dtype::u64},
  };
  std::vector<test::st_tensor> tensors;
  uint8_t seed = 0;
  for (spec const& s : specs) {
    uint64_t const w = dtype_width(s.type);
    tensors.push_back({std::string("t_") + s.name,
                       s.name,
                       {2, 3},
                       make_bytes(6 * w, seed++)});
  }
  bytes const file = test::make_safetensors(tensors, /*gap=*/3);
  parsed_file const p = parse_regions(file, "model.safetensors");
  expect_covers(p, file.size());
  EXPECT_EQ(p.format, file_format::safetensors);
  EXPECT_EQ(p.regions[0].name, "safetensors header");
  auto const t = tensors_of(p);
  ASSERT_EQ(t.size(), std::size(specs));
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(t[i].type, specs[i].type) << specs[i].name;
    EXPECT_EQ(t[i].name, tensors[i].name);
    EXPECT_EQ(t[i].shape, (std::vector<uint64_t>{2, 3}));
    byte_view const got = slice(file, t[i]);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), tensors[i].data.begin(),
                           tensors[i].data.end()));
  }
  // The 3-byte gaps are opaque padding.
  size_t padding = 0;
  for (region const& r : p.regions) padding += r.name == "padding";
  EXPECT_EQ(padding, std::size(specs));
}

TEST(parse_test, safetensors_tensors_sorted_by_offset) {
  // Header lists b before a but a's data comes first.
  bytes const data = make_bytes(24, 1);
  std::string const json =
      "{\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
      "\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}";
  bytes const file = test::safetensors_from_header(json, data);
  parsed_file const p = parse_regions(file);
  expect_covers(p, file.size());
  auto const t = tensors_of(p);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].name, "a");
  EXPECT_EQ(t[1].name, "b");
}

TEST(parse_test, safetensors_size_mismatch_and_unknown_dtype_stay_untyped) {
  bytes const data = make_bytes(40, 1);
  std::string const json =
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,16]},"
      "\"b\":{\"dtype\":\"C64\",\"shape\":[3],\"data_offsets\":[16,40]}}";
  bytes const file = test::safetensors_from_header(json, data);
  parsed_file const p = parse_regions(file);
  expect_covers(p, file.size());
  EXPECT_EQ(p.format, file_format::safetensors);
  auto const t = tensors_of(p);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].type, dtype::none);
  EXPECT_TRUE(t[0].shape.empty());
  EXPECT_EQ(t[0].length, 16u);
  EXPECT_EQ(t[1].type, dtype::none);
}

TEST(parse_test, safetensors_empty_tensor_and_scalar) {
  bytes const data = make_bytes(4, 1);
  std::string const json =
      "{\"e\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[0,0]},"
      "\"s\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}";
  bytes const file = test::safetensors_from_header(json, data);
  parsed_file const p = parse_regions(file);
  expect_covers(p, file.size());
  auto const t = tensors_of(p);
  ASSERT_EQ(t.size(), 1u);  // the empty tensor has no bytes, so no region
  EXPECT_EQ(t[0].name, "s");
  EXPECT_EQ(t[0].type, dtype::f32);
}

TEST(parse_test, safetensors_truncated_prefixes) {
  expect_prefixes_fall_back(
      test::make_safetensors({{"w", "F16", {4, 4}, make_bytes(32, 1)},
                              {"b", "F32", {4}, make_bytes(16, 2)}}));
}

TEST(parse_test, safetensors_malformed_headers) {
  bytes huge;
  put_le<uint64_t>(huge, uint64_t{1} << 50);  // a petabyte of header
  test::append(huge, "{\"a\":1}");
  expect_fallback(huge);

  bytes max;
  put_le<uint64_t>(max, ~uint64_t{0});
  test::append(max, "{}");
  expect_fallback(max);

  bytes const data = make_bytes(64, 0);
  std::string const bad[] = {
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]",
      "[1,2,3]",
      "{\"a\":7}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8,9]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-1,7]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,65]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
      "\"data_offsets\":[18446744073709551615,18446744073709551615]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}",
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}",
      "{\"a\":{\"dtype\":7,\"shape\":[2],\"data_offsets\":[0,8]}}",
      // Overlapping tensors.
      "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
      "\"b\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
      // Nesting deep enough to hurt a recursive parser.
      "{\"__metadata__\":" + std::string(100000, '[') + "}",
  };
  for (std::string const& json : bad) {
    SCOPED_TRACE(json.substr(0, 80));
    bytes const file = test::safetensors_from_header(json, data);
    expect_fallback(file);
    if (json[0] == '{') {  // the note names the parser that gave up
      EXPECT_EQ(parse_regions(file).note.rfind("safetensors: ", 0), 0u);
    }
  }
}

// -------------------------------------------------------------------- npy --

TEST(parse_test, npy_dtypes_and_versions) {
  struct spec {
    char const* descr;
    dtype type;
  };
  spec const specs[] = {
      {"<f4", dtype::f32}, {"<f2", dtype::f16}, {"<f8", dtype::f64},
      {"|u1", dtype::u8},  {"|i1", dtype::i8},  {"<i2", dtype::i16},
      {"<u2", dtype::u16}, {"<i4", dtype::i32}, {"<u4", dtype::u32},
      {"<i8", dtype::i64}, {"<u8", dtype::u64}, {"|b1", dtype::boolean},
  };
  for (int major = 1; major <= 3; ++major) {
    for (spec const& s : specs) {
      SCOPED_TRACE(s.descr);
      bytes const data = make_bytes(12 * dtype_width(s.type), 5);
      bytes const file =
          test::make_npy(test::npy_dict(s.descr, "(3, 4)"), data, major);
      parsed_file const p = parse_regions(file, "x.npy");
      expect_covers(p, file.size());
      EXPECT_EQ(p.format, file_format::npy);
      ASSERT_EQ(p.regions.size(), 2u);
      EXPECT_EQ(p.regions[0].kind, region_kind::opaque);
      EXPECT_EQ(p.regions[1].kind, region_kind::tensor);
      EXPECT_EQ(p.regions[1].type, s.type);
      EXPECT_EQ(p.regions[1].shape, (std::vector<uint64_t>{3, 4}));
      EXPECT_EQ(p.regions[1].offset % 64, 0u);
    }
  }
}

TEST(parse_test, npy_fortran_scalar_big_endian_object_trailing) {
  {  // Fortran order: reported as the C-order shape of the same bytes.
    bytes const file = test::make_npy(test::npy_dict("<f4", "(2, 5)", true),
                                      make_bytes(40, 0));
    parsed_file const p = parse_regions(file);
    ASSERT_EQ(p.regions.size(), 2u);
    EXPECT_EQ(p.regions[1].shape, (std::vector<uint64_t>{5, 2}));
  }
  {  // Scalar: shape ().
    bytes const file =
        test::make_npy(test::npy_dict("<f8", "()"), make_bytes(8, 0));
    parsed_file const p = parse_regions(file);
    ASSERT_EQ(p.regions.size(), 2u);
    EXPECT_EQ(p.regions[1].type, dtype::f64);
    EXPECT_EQ(p.regions[1].length, 8u);
  }
  {  // Big-endian: an untyped tensor.
    bytes const file =
        test::make_npy(test::npy_dict(">f4", "(4,)"), make_bytes(16, 0));
    parsed_file const p = parse_regions(file);
    EXPECT_EQ(p.format, file_format::npy);
    ASSERT_EQ(p.regions.size(), 2u);
    EXPECT_EQ(p.regions[1].kind, region_kind::tensor);
    EXPECT_EQ(p.regions[1].type, dtype::none);
  }
  {  // Structured descr (a list): untyped.
    bytes const file = test::make_npy(
        "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, "
        "'shape': (2,), }",
        make_bytes(16, 0));
    parsed_file const p = parse_regions(file);
    EXPECT_EQ(p.format, file_format::npy);
    ASSERT_EQ(p.regions.size(), 2u);
    EXPECT_EQ(p.regions[1].type, dtype::none);
  }
  {  // Object array: the pickle is opaque.
    bytes const file =
        test::make_npy(test::npy_dict("|O", "(2,)"), make_bytes(30, 0));
    parsed_file const p = parse_regions(file);
    ASSERT_EQ(p.regions.size(), 2u);
    EXPECT_EQ(p.regions[1].kind, region_kind::opaque);
  }
  {  // Bytes after the array stay, as an opaque region.
    bytes const file =
        test::make_npy(test::npy_dict("<i4", "(4,)"), make_bytes(19, 0));
    parsed_file const p = parse_regions(file);
    expect_covers(p, file.size());
    ASSERT_EQ(p.regions.size(), 3u);
    EXPECT_EQ(p.regions[1].length, 16u);
    EXPECT_EQ(p.regions[2].length, 3u);
  }
}

TEST(parse_test, npy_truncated_prefixes) {
  expect_prefixes_fall_back(
      test::make_npy(test::npy_dict("<f4", "(3, 4)"), make_bytes(48, 0)));
}

TEST(parse_test, npy_malformed_headers) {
  std::string const bad[] = {
      "garbage",
      "{'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': "
      "(99999999999999999999,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
      "4294967296, 4294967296)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (1000,)}",
      "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4' 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",
      std::string(5000, '(') + std::string(5000, ')'),
      "[1, 2]",
  };
  for (std::string const& dict : bad) {
    SCOPED_TRACE(dict.substr(0, 80));
    expect_fallback(test::make_npy(dict, make_bytes(8, 0)));
  }
  bytes file = test::make_npy(test::npy_dict("<f4", "(2,)"), make_bytes(8, 0));
  file[6] = 9;  // unknown major version
  expect_fallback(file);
  bytes huge =
      test::make_npy(test::npy_dict("<f4", "(2,)"), make_bytes(8, 0), 2);
  store_le<uint32_t>(huge.data() + 8, 0xfffffff0);
  expect_fallback(huge);
}

// --------------------------------------------------------------- property --

TEST(parse_test, random_bytes_always_cover) {
  std::mt19937_64 rng(42);
  std::vector<std::string> const prefixes = {
      "",
      "GGUF",
      std::string("GGUF\x03\0\0\0", 8),
      "\x93NUMPY\x01",
      "PK\x03\x04",
      std::string("\x10\0\0\0\0\0\0\0{", 9)};
  for (int i = 0; i < 3000; ++i) {
    std::string const& prefix = prefixes[i % prefixes.size()];
    size_t const n = rng() % (i < 1500 ? 64 : 2048);
    bytes file;
    test::append(file, prefix);
    for (size_t j = 0; j < n; ++j) file.push_back(static_cast<uint8_t>(rng()));
    parsed_file p;
    ASSERT_NO_THROW(p = parse_regions(file, i % 2 ? "a.safetensors" : ""));
    ASSERT_TRUE(regions_cover(p.regions, file.size())) << i;
  }
}

TEST(parse_test, mutated_valid_files_always_cover) {
  std::vector<bytes> const seeds = {
      test::make_safetensors({{"w", "BF16", {8}, make_bytes(16, 1)},
                              {"b", "F32", {2}, make_bytes(8, 2)}}),
      test::make_npy(test::npy_dict("<f4", "(3, 4)"), make_bytes(48, 0)),
  };
  std::mt19937_64 rng(7);
  for (bytes const& seed : seeds) {
    for (int i = 0; i < 2000; ++i) {
      bytes file = seed;
      int const flips = 1 + static_cast<int>(rng() % 4);
      for (int f = 0; f < flips; ++f) {
        file[rng() % file.size()] = static_cast<uint8_t>(rng());
      }
      parsed_file p;
      ASSERT_NO_THROW(p = parse_regions(file));
      ASSERT_TRUE(regions_cover(p.regions, file.size()));
    }
  }
}

}  // namespace
}  // namespace brevis::codec
