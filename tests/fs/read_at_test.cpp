// read_at (fs/store/read_at.h): whole reads, the end of the file, and a
// failed read's message.

#include "fs/store/read_at.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "fs/store/error.h"
#include "tests/cli/helpers.h"

namespace brevis::fs {
namespace {

TEST(read_at_test, reads_whole_ranges_and_stops_at_the_end) {
  cli_test::temp_dir dir;
  std::string const path = (dir / "f").string();
  std::string data(10000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  cli_test::write_file(path, data);
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::vector<uint8_t> out(10000);
  EXPECT_EQ(read_at(fd, 0, out.size(), out.data(), "f"), 10000u);
  EXPECT_TRUE(std::equal(out.begin(), out.end(), data.begin(),
                         [](uint8_t a, char b) { return a == uint8_t(b); }));
  EXPECT_EQ(read_at(fd, 9000, 4096, out.data(), "f"), 1000u);
  EXPECT_TRUE(std::equal(out.begin(), out.begin() + 1000, data.begin() + 9000,
                         [](uint8_t a, char b) { return a == uint8_t(b); }));
  EXPECT_EQ(read_at(fd, 20000, 10, out.data(), "f"), 0u);
  EXPECT_EQ(read_at(fd, 5, 0, out.data(), "f"), 0u);
  ::close(fd);
}

TEST(read_at_test, a_failed_read_throws_naming_what_was_read) {
  cli_test::temp_dir dir;
  int const fd = ::open(dir.path().c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  std::array<uint8_t, 4> b{};
  try {
    read_at(fd, 0, b.size(), b.data(), "the thing");
    ADD_FAILURE() << "reading a directory succeeded";
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::io);
    EXPECT_NE(std::string(e.what()).find("read the thing"), std::string::npos)
        << e.what();
  }
  ::close(fd);
}

}  // namespace
}  // namespace brevis::fs
