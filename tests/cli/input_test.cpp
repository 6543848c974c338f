// The CLI's input, compiled in: a regular file read in whole rather than
// mapped (one that reports size 0, as /proc's do, or that was empty when
// opened) is still checked for changes before its output is committed.

#include "src/input.h"

#include <gtest/gtest.h>

#include <fstream>

#include "codec/core/error.h"
#include "tests/cli/helpers.h"

namespace brevis::cli {
namespace {

TEST(input, a_file_empty_when_read_and_grown_since_is_a_change) {
  cli_test::temp_dir dir;
  cli_test::write_file(dir / "grows", "");
  input const in = load_input((dir / "grows").string(), input_use::whole);
  EXPECT_EQ(in.data().size(), 0u);
  EXPECT_NO_THROW(check_unchanged(in));
  std::ofstream(dir / "grows", std::ios::app) << "written after the read";
  EXPECT_THROW(check_unchanged(in), codec::error);
}

TEST(input, a_file_that_reports_size_zero_is_read_in_whole) {
  input const in = load_input("/proc/self/status", input_use::whole);
  EXPECT_GT(in.data().size(), 0u);
  EXPECT_NO_THROW(check_unchanged(in));
}

}  // namespace
}  // namespace brevis::cli
