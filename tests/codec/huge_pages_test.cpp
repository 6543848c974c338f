// page_buffer and advise_huge_pages: sizes, alignment, contents kept when a
// buffer grows, and moves. (Whether the kernel gives huge pages is its
// business; nothing here depends on it.)

#include "codec/core/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace brevis::codec {
namespace {

TEST(huge_pages_test, empty_buffer_holds_nothing) {
  page_buffer b;
  EXPECT_EQ(b.size(), 0u);
  EXPECT_EQ(b.data(), nullptr);
  page_buffer z(0);
  EXPECT_EQ(z.size(), 0u);
}

TEST(huge_pages_test, buffer_is_aligned_zeroed_and_writable) {
  for (size_t size : {size_t{1}, size_t{4095}, small_buffer_limit,
                      small_buffer_limit + 1, huge_page_size - 1,
                      huge_page_size, huge_page_size + 1, 3 * huge_page_size}) {
    SCOPED_TRACE(size);
    page_buffer b(size);
    ASSERT_EQ(b.size(), size);
    // Small buffers sit on small pages.
    size_t const align = size <= small_buffer_limit ? 4096 : huge_page_size;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % align, 0u);
    EXPECT_EQ(b.data()[0], 0);
    EXPECT_EQ(b.data()[size - 1], 0);
    b.data()[0] = 1;
    b.data()[size - 1] = 2;
    EXPECT_EQ(b.data()[size - 1], 2);
  }
}

TEST(huge_pages_test, grow_keeps_contents_and_truncate_shrinks) {
  page_buffer b(1000);
  for (size_t i = 0; i < 1000; ++i) b.data()[i] = static_cast<uint8_t>(i * 7);
  b.grow(500);  // never shrinks
  EXPECT_EQ(b.size(), 1000u);
  b.grow(huge_page_size);  // past its small mapping: moves
  EXPECT_EQ(b.size(), huge_page_size);
  uint8_t const* const before = b.data();
  b.grow(2 * huge_page_size + 5);  // moves
  EXPECT_EQ(b.size(), 2 * huge_page_size + 5);
  EXPECT_NE(b.data(), before);
  for (size_t i = 0; i < 1000; ++i) {
    ASSERT_EQ(b.data()[i], static_cast<uint8_t>(i * 7)) << i;
  }
  b.data()[b.size() - 1] = 9;
  b.truncate(10);
  EXPECT_EQ(b.size(), 10u);
  b.truncate(20);  // truncate never grows
  EXPECT_EQ(b.size(), 10u);
  EXPECT_EQ(b.data()[9], static_cast<uint8_t>(63));
}

// Whether [p, p + size) lies in one mapping of /proc/self/maps.
bool one_mapping(uint8_t const* p, size_t size) {
  std::ifstream maps("/proc/self/maps");
  auto const begin = reinterpret_cast<uintptr_t>(p);
  std::string line;
  while (std::getline(maps, line)) {
    uintptr_t start = 0;
    uintptr_t end = 0;
    char dash = 0;
    std::istringstream in(line);
    if (!(in >> std::hex >> start >> dash >> end)) continue;
    if (start <= begin && begin < end) return begin + size <= end;
  }
  return false;
}

// A stream's buffer grows by moving its pages (mremap): every byte
// written before each move is there after it, the new part reads as zeros,
// and the buffer stays one mapping (a resizing mremap moves only one
// mapping, on every kernel) on a huge page boundary.
TEST(huge_pages_test, growing_many_times_keeps_every_byte) {
  page_buffer b;
  size_t written = 0;
  for (size_t size : {size_t{100}, size_t{40000}, huge_page_size + 3,
                      3 * huge_page_size, 5 * huge_page_size + 1}) {
    b.grow(size);
    ASSERT_EQ(b.size(), size);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % huge_page_size, 0u);
    EXPECT_TRUE(one_mapping(b.data(), b.size())) << size;
    for (size_t i = 0; i < written; ++i) {
      ASSERT_EQ(b.data()[i], static_cast<uint8_t>(i * 13 + i / 4099)) << i;
    }
    for (size_t i = written; i < size; ++i) {
      ASSERT_EQ(b.data()[i], 0) << i;
      b.data()[i] = static_cast<uint8_t>(i * 13 + i / 4099);
    }
    written = size;
  }
}

TEST(huge_pages_test, moves_hand_over_the_memory) {
  page_buffer a(100);
  a.data()[99] = 5;
  uint8_t* const p = a.data();
  page_buffer b(std::move(a));
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.data(), p);
  page_buffer c(10);
  c = std::move(b);
  EXPECT_EQ(c.data(), p);
  EXPECT_EQ(c.data()[99], 5);
  std::vector<page_buffer> many;
  for (int i = 0; i < 4; ++i) many.emplace_back(size_t{4096});
  EXPECT_EQ(many.size(), 4u);
}

TEST(huge_pages_test, advise_needs_a_whole_huge_page) {
  page_buffer b(3 * huge_page_size);
  EXPECT_FALSE(advise_huge_pages(b.data() + 1, huge_page_size));
  EXPECT_FALSE(advise_huge_pages(b.data(), huge_page_size - 1));
  // A whole one may still be refused by a kernel without THP: only check
  // that advising (and then using) the memory is harmless.
  (void)advise_huge_pages(b.data(), 3 * huge_page_size);
  b.data()[2 * huge_page_size] = 1;
  EXPECT_EQ(b.data()[2 * huge_page_size], 1);
}

}  // namespace
}  // namespace brevis::codec
