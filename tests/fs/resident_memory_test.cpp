// The pipeline's view of its resident file pages
// (fs/pipeline/resident_memory.h): mapping and touching a file raises it,
// dropping the pages from the mapping lowers it again.

#include "fs/pipeline/resident_memory.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

#include "tests/cli/helpers.h"

namespace brevis::fs {
namespace {

TEST(resident_memory, follows_the_pages_of_a_mapped_file) {
  cli_test::temp_dir dir;
  std::string const path = (dir / "f").string();
  size_t const size = 16u << 20;
  cli_test::write_file(path, std::string(size, 'x'));
  int const fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto const before = resident_file_bytes();
  ASSERT_TRUE(before);
  auto const* bytes = static_cast<uint8_t const*>(p);
  unsigned sum = 0;
  for (size_t i = 0; i < size; i += 4096) sum += bytes[i];
  EXPECT_EQ(sum, (size / 4096) * 'x');
  auto const touched = resident_file_bytes();
  ASSERT_TRUE(touched);
  // The counters are per CPU and may lag by a few hundred KiB.
  EXPECT_GE(*touched, *before + size - (4u << 20));
  ASSERT_EQ(::madvise(p, size, MADV_DONTNEED), 0);
  auto const dropped = resident_file_bytes();
  ASSERT_TRUE(dropped);
  EXPECT_LE(*dropped + size - (4u << 20), *touched);
  ::munmap(p, size);
  ::close(fd);
}

}  // namespace
}  // namespace brevis::fs
