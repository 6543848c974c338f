// Seed corpus of the parser fuzz target (fuzz_parse.cpp): one small valid
// file of each format the parsers read, built with the parse tests'
// fixtures, each behind the byte that picks its name hint. The enabled test
// checks that the committed seeds still parse as their format, with tensor
// regions (a seed that falls back to one opaque region guides the fuzzer
// nowhere); the disabled one rewrites them:
//   fuzz_seeds_test --gtest_also_run_disabled_tests
//   --gtest_filter='*generate_parse*'
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "codec/parse/region.h"
#include "tests/codec/parse_fixtures.h"

namespace brevis::codec {
namespace {

namespace fs = std::filesystem;

struct parse_seed {
  std::string name;
  uint8_t hint;  // fuzz_parse.cpp's hints[]: 1 safetensors, 2 pt, 3 gguf, 4 npy
  file_format format;
  bytes file;
};

std::vector<parse_seed> parse_seeds() {
  using test::make_bytes;
  std::vector<parse_seed> seeds;
  seeds.push_back(
      {"safetensors", 1, file_format::safetensors,
       test::make_safetensors({{"a.weight", "BF16", {4, 8}, make_bytes(64, 1)},
                               {"b.bias", "F32", {5}, make_bytes(20, 2)},
                               {"c.mask", "BOOL", {3}, make_bytes(3, 3)}})});
  seeds.push_back(
      {"safetensors_gap", 0, file_format::safetensors,
       test::make_safetensors({{"w", "F16", {2, 3}, make_bytes(12, 4)},
                               {"q", "F8_E4M3", {7}, make_bytes(7, 5)}},
                              5)});
  seeds.push_back(
      {"npy_v1", 4, file_format::npy,
       test::make_npy(test::npy_dict("<f4", "(3, 4)"), make_bytes(48, 6))});
  seeds.push_back({"npy_v2_fortran", 0, file_format::npy,
                   test::make_npy(test::npy_dict("<f2", "(2, 5)", true),
                                  make_bytes(20, 7), 2)});
  {
    test::gguf_builder g;
    g.kv_string("general.architecture", "llama");
    g.kv_u32("general.alignment", 32);
    g.kv_string_array("tokenizer.ggml.tokens", {"a", "b"});
    g.tensor("tok.weight", {8, 2}, 0, make_bytes(64, 8));   // F32
    g.tensor("out.weight", {16, 1}, 1, make_bytes(32, 9));  // F16
    g.tensor("q.weight", {32, 1}, 2, make_bytes(18, 10));   // Q4_0
    seeds.push_back({"gguf_v3", 3, file_format::gguf, g.build()});
    seeds.push_back({"gguf_v2", 0, file_format::gguf, g.build(2)});
  }
  for (bool zip64 : {false, true}) {
    test::zip_builder z;
    z.add("archive/data.pkl",
          test::make_torch_pickle({{"0", "FloatStorage", 6},
                                   {"1", "BFloat16Storage", 10},
                                   {"2", "HalfStorage", 4}}));
    z.add("archive/data/0", make_bytes(24, 11));
    z.add("archive/data/1", make_bytes(20, 12));
    z.add("archive/data/2", make_bytes(8, 13));
    z.add("archive/version", {'3', '\n'});
    seeds.push_back({zip64 ? "torch_zip64" : "torch_zip", 2,
                     file_format::pytorch_zip, z.build(zip64)});
  }
  return seeds;
}

bytes fuzz_input(parse_seed const& s) {
  bytes in{s.hint};
  put_bytes(in, s.file);
  return in;
}

fs::path seed_path(parse_seed const& s) {
  return fs::path(BREVIS_SOURCE_DIR) / "tests/fuzz/corpus/parse" /
         (s.name + ".bin");
}

TEST(fuzz_seeds_test, committed_parse_seeds_parse_as_their_format) {
  for (parse_seed const& s : parse_seeds()) {
    SCOPED_TRACE(s.name);
    std::ifstream in(seed_path(s), std::ios::binary);
    ASSERT_TRUE(in) << seed_path(s);
    bytes const committed(std::istreambuf_iterator<char>(in), {});
    EXPECT_EQ(committed, fuzz_input(s));
    parsed_file const p = parse_regions(s.file);
    EXPECT_EQ(p.format, s.format) << p.note;
    EXPECT_TRUE(regions_cover(p.regions, s.file.size()));
    EXPECT_FALSE(test::tensors_of(p).empty());
  }
}

TEST(fuzz_seeds_test, DISABLED_generate_parse_seeds) {
  for (parse_seed const& s : parse_seeds()) {
    fs::create_directories(seed_path(s).parent_path());
    bytes const in = fuzz_input(s);
    std::ofstream(seed_path(s), std::ios::binary)
        .write(reinterpret_cast<char const*>(in.data()),
               static_cast<std::streamsize>(in.size()));
  }
}

}  // namespace
}  // namespace brevis::codec
