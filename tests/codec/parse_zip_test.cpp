// PyTorch zip parser tests: zip structure (plain and ZIP64), the pickle
// scanner, a real torch.save file, and malformed archives.

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include "codec/parse/pytorch_zip.h"
#include "codec/parse/region.h"
#include "tests/codec/parse_fixtures.h"

namespace brevis::codec {
namespace {

using test::expect_covers;
using test::make_bytes;
using test::tensors_of;

bytes sample_zip(bool zip64) {
  test::zip_builder z;
  z.add("archive/data.pkl",
        test::make_torch_pickle({{"0", "FloatStorage", 6},
                                 {"1", "BFloat16Storage", 10},
                                 {"2", "LongStorage", 3},
                                 {"3", "HalfStorage", 99},  // numel mismatch
                                 {"4", "UntypedStorage", 4}}));
  z.add("archive/data/0", make_bytes(24, 1));
  z.add("archive/data/1", make_bytes(20, 2));
  z.add("archive/data/2", make_bytes(24, 3));
  z.add("archive/data/3", make_bytes(8, 4));
  z.add("archive/data/4", make_bytes(4, 5));
  z.add("archive/data/5", make_bytes(12, 6));  // not in the pickle
  z.add("archive/version", {'3', '\n'});
  z.add("archive/.data/serialization_id", make_bytes(40, 7));
  return z.build(zip64);
}

TEST(parse_zip_test, storages_typed_from_pickle) {
  for (bool zip64 : {false, true}) {
    SCOPED_TRACE(zip64 ? "zip64" : "zip");
    bytes const file = sample_zip(zip64);
    parsed_file const p = parse_regions(file, "model.pt");
    expect_covers(p, file.size());
    ASSERT_EQ(p.format, file_format::pytorch_zip) << p.note;
    auto const t = tensors_of(p);
    ASSERT_EQ(t.size(), 6u);
    EXPECT_EQ(t[0].name, "archive/data/0");
    EXPECT_EQ(t[0].type, dtype::f32);
    EXPECT_EQ(t[1].type, dtype::bf16);
    EXPECT_EQ(t[2].type, dtype::i64);
    EXPECT_EQ(t[3].type, dtype::none);  // pickle's numel does not fit
    EXPECT_EQ(t[4].type, dtype::none);  // untyped storage
    EXPECT_EQ(t[5].type, dtype::none);  // unknown to the pickle
    for (size_t i = 0; i < t.size(); ++i) {
      bytes const want = make_bytes(t[i].length, static_cast<uint8_t>(i + 1));
      byte_view const got = test::slice(file, t[i]);
      EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin(), want.end()));
      EXPECT_EQ(t[i].offset % 64, 0u);
    }
    bool found_cd = false;
    for (region const& r : p.regions) {
      // Adjacent opaque regions are merged: the directory joins its
      // neighbours (the end record, the last entry's headers).
      found_cd |= r.name.find("zip central directory") != std::string::npos;
      if (r.kind == region_kind::opaque) {
        EXPECT_EQ(r.type, dtype::none);
      }
    }
    EXPECT_TRUE(found_cd);
  }
}

TEST(parse_zip_test, adjacent_opaque_regions_are_merged) {
  bytes const file = sample_zip(false);
  parsed_file const p = parse_regions(file, "model.pt");
  expect_covers(p, file.size());
  for (size_t i = 1; i < p.regions.size(); ++i) {
    EXPECT_FALSE(p.regions[i].kind == region_kind::opaque &&
                 p.regions[i - 1].kind == region_kind::opaque)
        << p.regions[i - 1].name << " | " << p.regions[i].name;
  }
}

TEST(parse_zip_test, deflated_entries_stay_opaque) {
  test::zip_builder z;
  z.add("archive/data.pkl",
        test::make_torch_pickle({{"0", "FloatStorage", 2}}));
  z.add("archive/data/0", make_bytes(8, 1), /*method=*/8);
  bytes const file = z.build();
  parsed_file const p = parse_regions(file);
  ASSERT_EQ(p.format, file_format::pytorch_zip) << p.note;
  EXPECT_TRUE(tensors_of(p).empty());
}

TEST(parse_zip_test, zip_without_pickle_falls_back) {
  test::zip_builder z;
  z.add("a/b.txt", make_bytes(10, 1));
  bytes const file = z.build();
  parsed_file const p = parse_regions(file);
  expect_covers(p, file.size());
  EXPECT_EQ(p.format, file_format::unknown);
}

TEST(parse_zip_test, pickle_scanner) {
  auto const s =
      scan_pickle_storages(test::make_torch_pickle({{"0", "DoubleStorage", 1},
                                                    {"1", "IntStorage", 2},
                                                    {"2", "ShortStorage", 3},
                                                    {"3", "CharStorage", 4},
                                                    {"4", "ByteStorage", 5},
                                                    {"5", "BoolStorage", 6}}));
  ASSERT_EQ(s.size(), 6u);
  EXPECT_EQ(s.at("0").type, dtype::f64);
  EXPECT_EQ(s.at("1").type, dtype::i32);
  EXPECT_EQ(s.at("2").type, dtype::i16);
  EXPECT_EQ(s.at("3").type, dtype::i8);
  EXPECT_EQ(s.at("4").type, dtype::u8);
  EXPECT_EQ(s.at("5").type, dtype::boolean);
  EXPECT_EQ(s.at("5").numel, 6u);
  // Garbage and truncation never throw; a prefix keeps what it saw.
  bytes const full = test::make_torch_pickle(
      {{"0", "FloatStorage", 1}, {"1", "HalfStorage", 2}});
  for (size_t n = 0; n < full.size(); ++n) {
    auto const part = scan_pickle_storages(byte_view(full.data(), n));
    EXPECT_LE(part.size(), 2u);
  }
  std::mt19937_64 rng(3);
  for (int i = 0; i < 2000; ++i) {
    bytes junk(rng() % 512);
    for (auto& b : junk) b = static_cast<uint8_t>(rng());
    EXPECT_NO_THROW(scan_pickle_storages(junk));
    bytes mutated = full;
    mutated[rng() % mutated.size()] = static_cast<uint8_t>(rng());
    EXPECT_NO_THROW(scan_pickle_storages(mutated));
  }
  // A long run of MARK/DUP must stay bounded, not exhaust memory.
  bytes marks(3u << 20, '(');
  EXPECT_NO_THROW(scan_pickle_storages(marks));
  bytes tuples = {'K', 1};
  for (int i = 0; i < 100000; ++i) tuples.push_back(0x85);  // nested TUPLE1
  EXPECT_NO_THROW(scan_pickle_storages(tuples));
}

TEST(parse_zip_test, truncated_prefixes) {
  bytes const file = sample_zip(false);
  for (size_t n = 1; n < file.size(); ++n) {
    parsed_file const p = parse_regions(byte_view(file.data(), n));
    expect_covers(p, n);
    ASSERT_EQ(p.format, file_format::unknown) << n;
  }
}

void expect_fallback(bytes const& file) {
  parsed_file const p = parse_regions(file, "x.pt");
  expect_covers(p, file.size());
  EXPECT_EQ(p.format, file_format::unknown);
  EXPECT_EQ(p.regions.size(), 1u);
  EXPECT_FALSE(p.note.empty());
}

// Offset of the 22-byte EOCD (no comment).
size_t eocd(bytes const& f) { return f.size() - 22; }

TEST(parse_zip_test, bogus_directory) {
  bytes const good = sample_zip(false);
  {  // Central directory offset far out of the file.
    bytes f = good;
    store_le<uint32_t>(f.data() + eocd(f) + 16, 0xfffffff0);
    expect_fallback(f);
  }
  {  // Central directory size past the EOCD.
    bytes f = good;
    store_le<uint32_t>(f.data() + eocd(f) + 12, 0xfffffff0);
    expect_fallback(f);
  }
  {  // Entry count larger than the directory holds.
    bytes f = good;
    store_le<uint16_t>(f.data() + eocd(f) + 10, 0xffff);
    expect_fallback(f);
  }
  {  // Directory offset off by one: no central header signature there.
    bytes f = good;
    uint32_t const cd = load_le<uint32_t>(f.data() + eocd(f) + 16);
    store_le<uint32_t>(f.data() + eocd(f) + 16, cd + 1);
    store_le<uint32_t>(f.data() + eocd(f) + 12,
                       load_le<uint32_t>(f.data() + eocd(f) + 12) - 1);
    expect_fallback(f);
  }
  {  // First entry's local header offset points past the end.
    bytes f = good;
    uint32_t const cd = load_le<uint32_t>(f.data() + eocd(f) + 16);
    store_le<uint32_t>(f.data() + cd + 42, 0x7fffffff);
    expect_fallback(f);
  }
  {  // First entry's size runs past the end.
    bytes f = good;
    uint32_t const cd = load_le<uint32_t>(f.data() + eocd(f) + 16);
    store_le<uint32_t>(f.data() + cd + 20, 0x7fffffff);
    expect_fallback(f);
  }
  {  // Two entries sharing one local header: overlapping regions.
    bytes f = good;
    uint32_t const cd = load_le<uint32_t>(f.data() + eocd(f) + 16);
    uint16_t const name = load_le<uint16_t>(f.data() + cd + 28);
    size_t const second = cd + 46 + name;
    store_le<uint32_t>(f.data() + second + 42, 0);
    expect_fallback(f);
  }
  {  // EOCD comment length that does not match the file end.
    bytes f = good;
    store_le<uint16_t>(f.data() + eocd(f) + 20, 5);
    expect_fallback(f);
  }
  bytes const good64 = sample_zip(true);
  {  // ZIP64 locator pointing outside the file.
    bytes f = good64;
    store_le<uint64_t>(f.data() + eocd(f) - 20 + 8, ~uint64_t{0} - 4);
    expect_fallback(f);
  }
  {  // ZIP64 record with absurd entry count and directory offset.
    bytes f = good64;
    size_t const z = load_le<uint64_t>(f.data() + eocd(f) - 20 + 8);
    store_le<uint64_t>(f.data() + z + 32, uint64_t{1} << 60);
    expect_fallback(f);
    f = good64;
    store_le<uint64_t>(f.data() + z + 48, ~uint64_t{0} - 100);
    expect_fallback(f);
  }
}

TEST(parse_zip_test, mutated_files_always_cover) {
  std::mt19937_64 rng(5);
  for (bool zip64 : {false, true}) {
    bytes const seed = sample_zip(zip64);
    for (int i = 0; i < 2000; ++i) {
      bytes file = seed;
      int const flips = 1 + static_cast<int>(rng() % 3);
      for (int f = 0; f < flips; ++f) {
        file[rng() % file.size()] = static_cast<uint8_t>(rng());
      }
      parsed_file p;
      ASSERT_NO_THROW(p = parse_regions(file));
      ASSERT_TRUE(regions_cover(p.regions, file.size()));
    }
  }
}

// ------------------------------------------------------------ real torch --

bytes read_file(std::filesystem::path const& path) {
  std::ifstream in(path, std::ios::binary);
  return bytes(std::istreambuf_iterator<char>(in), {});
}

TEST(parse_zip_test, shapes_from_the_one_tensor_over_a_storage) {
  using view = test::pickled_storage::view;
  auto const s = scan_pickle_storages(test::make_torch_pickle({
      {"flat", "FloatStorage", 6},
      {"matrix", "BFloat16Storage", 12, {view{0, {3, 4}, {4, 1}}}},
      {"ones", "HalfStorage", 4, {view{0, {1, 4, 1}, {9, 1, 7}}}},
      {"transposed", "FloatStorage", 12, {view{0, {4, 3}, {1, 4}}}},
      {"offset", "FloatStorage", 12, {view{2, {10}, {1}}}},
      {"part", "FloatStorage", 12, {view{0, {2, 3}, {3, 1}}}},
      {"shared",
       "FloatStorage",
       6,
       {view{0, {2, 3}, {3, 1}}, view{0, {6}, {1}}}},
  }));
  ASSERT_EQ(s.size(), 7u);
  using shape = std::vector<uint64_t>;
  EXPECT_EQ(s.at("flat").shape, shape({6}));
  EXPECT_EQ(s.at("matrix").shape, shape({3, 4}));
  EXPECT_EQ(s.at("ones").shape, shape({1, 4, 1}));  // size-1 strides: any
  EXPECT_EQ(s.at("transposed").shape, shape{});     // not row-major
  EXPECT_EQ(s.at("offset").shape, shape{});
  EXPECT_EQ(s.at("part").shape, shape{});  // does not cover the storage
  EXPECT_EQ(s.at("shared").shape, shape{});
  EXPECT_EQ(s.at("shared").views, 2u);

  // The shape reaches the storage's region.
  test::zip_builder z;
  z.add("archive/data.pkl",
        test::make_torch_pickle(
            {{"0", "BFloat16Storage", 12, {view{0, {3, 4}, {4, 1}}}}}));
  z.add("archive/data/0", make_bytes(24, 1));
  bytes const file = z.build(false);
  auto const t = tensors_of(parse_regions(file, "model.pt"));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t[0].type, dtype::bf16);
  EXPECT_EQ(t[0].shape, shape({3, 4}));
}

TEST(parse_zip_test, real_torch_save) {
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "/usr/bin/python3 cannot import torch";
  }
  char tmpl[] = "/tmp/brevis_parse_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::filesystem::path const dir = tmpl;
  // Each tensor's raw bytes go to a side file named after its dtype; sizes
  // differ so every storage is told apart by its bytes.
  std::string const script =
      "import sys, torch\n"
      "d = sys.argv[1]\n"
      "g = torch.Generator().manual_seed(0)\n"
      "t = {\n"
      " 'bf16': torch.randn(7, 5, generator=g).to(torch.bfloat16),\n"
      " 'f32': torch.randn(3, 11, generator=g),\n"
      " 'i64': torch.arange(13, dtype=torch.int64) * 1000003,\n"
      " 'f16': torch.randn(17, generator=g).to(torch.float16),\n"
      "}\n"
      "torch.save(t, d + '/model.pt')\n"
      "torch.save(t, d + '/legacy.pt', _use_new_zipfile_serialization=False)\n"
      "for k, v in t.items():\n"
      "  open(d + '/' + k + '.raw', 'wb').write(\n"
      "    v.contiguous().view(torch.uint8).numpy().tobytes())\n";
  std::ofstream(dir / "make.py") << script;
  std::string const cmd =
      "/usr/bin/python3 " + (dir / "make.py").string() + " " + dir.string();
  ASSERT_EQ(std::system(cmd.c_str()), 0);

  bytes const file = read_file(dir / "model.pt");
  parsed_file const p = parse_regions(file, "model.pt");
  expect_covers(p, file.size());
  ASSERT_EQ(p.format, file_format::pytorch_zip) << p.note;
  auto const t = tensors_of(p);
  EXPECT_EQ(t.size(), 4u);
  struct want {
    char const* name;
    dtype type;
    std::vector<uint64_t> shape;
  };
  for (want const& w :
       {want{"bf16", dtype::bf16, {7, 5}}, want{"f32", dtype::f32, {3, 11}},
        want{"i64", dtype::i64, {13}}, want{"f16", dtype::f16, {17}}}) {
    SCOPED_TRACE(w.name);
    bytes const raw = read_file(dir / (std::string(w.name) + ".raw"));
    ASSERT_FALSE(raw.empty());
    int matches = 0;
    for (region const& r : t) {
      byte_view const got = test::slice(file, r);
      if (std::equal(got.begin(), got.end(), raw.begin(), raw.end())) {
        ++matches;
        EXPECT_EQ(r.type, w.type) << dtype_name(r.type);
        EXPECT_EQ(r.shape, w.shape);
      }
    }
    EXPECT_EQ(matches, 1);
  }
  // The pre-1.6 format is not a zip: one untyped region.
  bytes const legacy = read_file(dir / "legacy.pt");
  parsed_file const l = parse_regions(legacy, "legacy.pt");
  expect_covers(l, legacy.size());
  EXPECT_EQ(l.format, file_format::unknown);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace brevis::codec
