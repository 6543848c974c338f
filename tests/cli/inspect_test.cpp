// inspect lists regions and programs; verify accepts good archives and
// rejects damaged ones.

#include <gtest/gtest.h>

#include "tests/cli/helpers.h"

namespace brevis::cli_test {
namespace {

TEST(cli_inspect_test, lists_regions_and_programs) {
  temp_dir dir;
  write_file(
      dir / "m.safetensors",
      make_safetensors(
          {{"encoder.layer.0.weight",
            "BF16",
            {128, 64},
            bf16_weights(128 * 64, 1)},
           {"encoder.layer.0.bias", "F32", {64}, random_bytes(256, 2)}}));
  ASSERT_EQ(brevis({"compress", (dir / "m.safetensors").string()}).exit_code,
            0);
  run_result i = brevis({"inspect", (dir / "m.safetensors.brv").string()});
  ASSERT_EQ(i.exit_code, 0) << i.err;
  EXPECT_NE(i.out.find("total"), std::string::npos) << i.out;
  // The program column: every program ends in leaves, raw at worst.
  EXPECT_TRUE(i.out.find("raw") != std::string::npos ||
              i.out.find("rans") != std::string::npos ||
              i.out.find("zstd") != std::string::npos)
      << i.out;
  EXPECT_NE(i.out.find("encoder.layer.0.weight"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("bf16"), std::string::npos) << i.out;
  EXPECT_NE(i.out.find("encoder.layer.0.bias"), std::string::npos) << i.out;

  run_result r = brevis(
      {"inspect", "--range", "0:1", (dir / "m.safetensors.brv").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("needs 1 chunk "), std::string::npos) << r.out;
  run_result past = brevis(
      {"inspect", "--range", "1G:1", (dir / "m.safetensors.brv").string()});
  EXPECT_EQ(past.exit_code, 1);
}

TEST(cli_inspect_test, verify_good_and_bit_flipped) {
  temp_dir dir;
  std::string data = bf16_weights(30000, 5);
  write_file(dir / "w.bin", data);
  ASSERT_EQ(brevis({"compress", (dir / "w.bin").string()}).exit_code, 0);
  run_result ok = brevis({"verify", (dir / "w.bin.brv").string()});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, (dir / "w.bin.brv").string() + ": OK\n");

  // Flip a bit in the middle (in the payloads).
  std::string a = read_file(dir / "w.bin.brv");
  a[a.size() / 3] = static_cast<char>(a[a.size() / 3] ^ 0x10);
  write_file(dir / "bad.brv", a);
  run_result bad = brevis({"verify", (dir / "bad.brv").string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err_lines(), 1u) << bad.err;
  EXPECT_NE(bad.err.find("bad.brv"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.out.find("OK"), std::string::npos);
}

}  // namespace
}  // namespace brevis::cli_test
