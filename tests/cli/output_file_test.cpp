// src/output_file: small pieces are gathered into larger writes, and the
// file under its final name holds every byte in order, whatever mix of
// piece sizes came; nothing appears under that name before commit.

#include "src/output_file.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tests/cli/helpers.h"

namespace brevis::cli {
namespace {

using cli_test::read_file;
using cli_test::temp_dir;

codec::byte_view view(std::string const& s) {
  return {reinterpret_cast<uint8_t const*>(s.data()), s.size()};
}

TEST(output_file, mixed_piece_sizes_arrive_in_order) {
  temp_dir dir;
  std::string const path = (dir / "out").string();
  // Sizes around the gathering limit (128 KiB) and far from it, in three
  // orders: 1-byte pieces, pieces that just fit or just overflow what is
  // gathered, pieces too large to gather; random bytes.
  std::mt19937 rng(7);
  std::vector<size_t> const sizes = {
      0,      1,      2,       36, 4095,   65536,  131071,
      131072, 131073, 1 << 20, 3,  130000, 130000, (1 << 20) + 5};
  std::string expected;
  {
    output_file out(path, false, nullptr);
    for (int round = 0; round < 3; ++round) {
      for (size_t i = 0; i < sizes.size(); ++i) {
        size_t const n =
            sizes[(i * 5 + static_cast<size_t>(round)) % sizes.size()];
        std::string piece(n, '\0');
        for (char& c : piece) c = static_cast<char>(rng());
        out.write(view(piece));
        expected += piece;
      }
    }
    EXPECT_EQ(out.written(), expected.size());
    EXPECT_FALSE(cli_test::fs::exists(path));  // not before commit
    out.commit();
  }
  EXPECT_EQ(read_file(path), expected);
}

TEST(output_file, uncommitted_output_leaves_nothing) {
  temp_dir dir;
  std::string const path = (dir / "out").string();
  {
    output_file out(path, false, nullptr);
    out.write(view(std::string(100, 'x')));  // gathered, never written
  }
  EXPECT_FALSE(cli_test::fs::exists(path));
  EXPECT_TRUE(cli_test::fs::is_empty(dir.path()));  // the temporary is gone
}

}  // namespace
}  // namespace brevis::cli
