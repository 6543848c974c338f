// Damaged archives through the CLI: every subcommand fails with exit code
// != 0 and one error line naming the file, and leaves no output behind.

#include <gtest/gtest.h>

#include "tests/cli/helpers.h"

namespace brevis::cli_test {
namespace {

// A good archive of a small safetensors file.
std::string good_archive(temp_dir const& dir) {
  write_file(dir / "src.safetensors",
             make_safetensors({{"w", "BF16", {64, 64}, bf16_weights(4096, 1)},
                               {"b", "F32", {64}, random_bytes(256, 2)}}));
  run_result c = brevis(
      {"compress", "--chunk-size", "4K", (dir / "src.safetensors").string()});
  EXPECT_EQ(c.exit_code, 0) << c.err;
  std::string a = read_file(dir / "src.safetensors.brv");
  fs::remove(dir / "src.safetensors.brv");
  return a;
}

// Runs decompress, inspect and verify on `name` holding `bytes` and checks
// the failure contract.
void expect_clean_failure(temp_dir const& dir, std::string const& name,
                          std::string const& bytes, bool inspect_must_fail) {
  SCOPED_TRACE(name);
  fs::path const archive = dir / (name + ".brv");
  write_file(archive, bytes);
  fs::path const out = dir / name;

  run_result d = brevis({"decompress", archive.string()});
  EXPECT_NE(d.exit_code, 0);
  EXPECT_EQ(d.err_lines(), 1u) << d.err;
  EXPECT_NE(d.err.find(archive.string()), std::string::npos) << d.err;
  EXPECT_FALSE(fs::exists(out)) << "decompress left " << out;

  run_result v = brevis({"verify", archive.string()});
  EXPECT_NE(v.exit_code, 0);
  EXPECT_EQ(v.err_lines(), 1u) << v.err;
  EXPECT_NE(v.err.find(archive.string()), std::string::npos) << v.err;
  EXPECT_EQ(v.out.find("OK"), std::string::npos);

  run_result i = brevis({"inspect", archive.string()});
  if (inspect_must_fail) {
    EXPECT_NE(i.exit_code, 0);
    EXPECT_EQ(i.err_lines(), 1u) << i.err;
    EXPECT_NE(i.err.find(archive.string()), std::string::npos) << i.err;
  } else {
    // inspect reads only the index; a damaged payload may pass it, but it
    // must not crash.
    EXPECT_TRUE(i.exit_code == 0 || i.exit_code == 1) << i.err;
  }

  // Also through stdin to stdout: nothing but the error.
  run_result s = brevis({"decompress", "-"}, archive.string(),
                        (dir / "stdout.bin").string());
  EXPECT_NE(s.exit_code, 0);
  EXPECT_EQ(s.err_lines(), 1u) << s.err;

  EXPECT_TRUE(temp_leftovers(dir.path()).empty());
  fs::remove(archive);
  fs::remove(dir / "stdout.bin");
}

TEST(cli_bad_input_test, truncated_archives) {
  temp_dir dir;
  std::string const a = good_archive(dir);
  ASSERT_GT(a.size(), 64u);
  for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{16}, a.size() / 2,
                     a.size() - 9, a.size() - 1}) {
    expect_clean_failure(dir, "trunc" + std::to_string(len), a.substr(0, len),
                         true);
  }
}

TEST(cli_bad_input_test, wrong_magic) {
  temp_dir dir;
  std::string a = good_archive(dir);
  a[0] = static_cast<char>(a[0] ^ 0x5a);
  expect_clean_failure(dir, "magic", a, true);
}

TEST(cli_bad_input_test, random_bytes_are_not_an_archive) {
  temp_dir dir;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    expect_clean_failure(dir, "random" + std::to_string(seed),
                         random_bytes(100 + 3000 * seed, 100 + seed), true);
  }
}

TEST(cli_bad_input_test, flipped_bits_never_crash_or_leave_files) {
  temp_dir dir;
  std::string const a = good_archive(dir);
  std::mt19937_64 rng(3);
  for (int k = 0; k < 12; ++k) {
    std::string b = a;
    size_t pos = rng() % b.size();
    b[pos] = static_cast<char>(b[pos] ^ (1u << (rng() % 8)));
    fs::path const archive = dir / "flip.brv";
    write_file(archive, b);
    run_result d = brevis({"decompress", "-f", archive.string()});
    if (d.exit_code != 0) {
      EXPECT_EQ(d.exit_code, 1) << d.err;
      EXPECT_EQ(d.err_lines(), 1u) << d.err;
      EXPECT_FALSE(fs::exists(dir / "flip")) << "bit " << pos;
    }
    // A flip that decodes must decode to the original (checksums).
    if (d.exit_code == 0) {
      EXPECT_TRUE(read_file(dir / "flip") == read_file(dir / "src.safetensors"))
          << "flip at " << pos << " decoded to different bytes";
    }
    fs::remove(dir / "flip");
  }
  EXPECT_TRUE(temp_leftovers(dir.path()).empty());
}

// Every file of tests/data/bad/ (when the container provides them).
TEST(cli_bad_input_test, corpus_of_bad_archives) {
  fs::path const bad = fs::path(BREVIS_SOURCE_DIR) / "tests/data/bad";
  if (!fs::is_directory(bad)) GTEST_SKIP() << "no tests/data/bad";
  temp_dir dir;
  size_t n = 0;
  for (auto const& e : fs::directory_iterator(bad)) {
    if (!e.is_regular_file()) continue;
    std::string const stem = "bad_" + e.path().stem().string();
    expect_clean_failure(dir, stem, read_file(e.path()), false);
    ++n;
  }
  EXPECT_GT(n, 0u);
}

TEST(cli_bad_input_test, usage_errors) {
  temp_dir dir;
  EXPECT_NE(brevis({"compress", "--chunk-size", "12Q", "x"}).exit_code, 0);
  EXPECT_NE(brevis({"compress", "--chunk-size", "1K", "x"}).exit_code, 0);
  auto const store_add = brevis(
      {"store", "add", "--chunk-size", "128M", (dir / "st").string(), "x"});
  EXPECT_EQ(store_add.exit_code, 1);
  EXPECT_NE(store_add.err.find("--chunk-size 128M: expected a size from 4K"),
            std::string::npos)
      << store_add.err;
  EXPECT_FALSE(std::filesystem::exists(dir / "st"));
  EXPECT_NE(brevis({"frobnicate"}).exit_code, 0);
  write_file(dir / "a", "a");
  write_file(dir / "b", "b");
  run_result two = brevis({"compress", (dir / "a").string(),
                           (dir / "b").string(), "-o", (dir / "o").string()});
  EXPECT_NE(two.exit_code, 0);
  EXPECT_FALSE(fs::exists(dir / "o"));
  run_result missing = brevis({"verify", (dir / "nope.brv").string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.brv"), std::string::npos);
}

}  // namespace
}  // namespace brevis::cli_test
