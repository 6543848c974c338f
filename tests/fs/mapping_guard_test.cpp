// The SIGBUS guard of read-only file mappings (fs/pipeline/mapping_guard.h),
// on real mappings of files cut short after they were mapped.
#include "fs/pipeline/mapping_guard.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "tests/cli/helpers.h"

namespace brevis::fs {
namespace {

using cli_test::temp_dir;

size_t page_size() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

/// A file of `pages` pages, byte i = i % 251 + 1 (never 0), mapped
/// read-only.
struct mapped_file {
  std::string path;
  size_t size;
  int fd = -1;
  void* map = MAP_FAILED;
  uint8_t const* data = nullptr;

  mapped_file(std::string p, size_t pages)
      : path(std::move(p)), size(pages * page_size()) {
    std::string bytes(size, '\0');
    for (size_t i = 0; i < size; ++i) {
      bytes[i] = static_cast<char>(i % 251 + 1);
    }
    cli_test::write_file(path, bytes);
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);  // NOLINT(*-vararg)
    map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map != MAP_FAILED) data = static_cast<uint8_t const*>(map);
  }
  ~mapped_file() {
    if (map != MAP_FAILED) ::munmap(map, size);
    if (fd >= 0) ::close(fd);
  }
  mapped_file(mapped_file const&) = delete;
  mapped_file& operator=(mapped_file const&) = delete;
  mapped_file(mapped_file&&) = delete;
  mapped_file& operator=(mapped_file&&) = delete;

  void cut_to(size_t bytes) const {
    ASSERT_EQ(::truncate(path.c_str(), static_cast<off_t>(bytes)), 0);
  }
  /// Reads every byte through the mapping; returns their sum.
  uint64_t read_all() const {
    uint64_t sum = 0;
    for (size_t i = 0; i < size; ++i) {
      sum += static_cast<uint8_t const volatile*>(data)[i];
    }
    return sum;
  }
};

TEST(mapping_guard, lost_pages_read_as_zeros_and_are_reported) {
  temp_dir dir;
  mapped_file f((dir / "f").string(), 5);
  ASSERT_NE(f.data, nullptr);
  mapping_guard const guard(f.data, f.size);
  ASSERT_TRUE(guard.guarded());
  EXPECT_FALSE(guard.faulted());
  (void)f.read_all();
  EXPECT_FALSE(guard.faulted());  // a whole file reads without a fault

  // Cut into the second page: the rest of it reads zeros (the kernel's
  // doing), the three pages after it are lost.
  size_t const keep = page_size() + 100;
  f.cut_to(keep);
  for (size_t i = 0; i < f.size; ++i) {
    uint8_t const want = i < keep ? static_cast<uint8_t>(i % 251 + 1) : 0;
    ASSERT_EQ(f.data[i], want) << "byte " << i;
  }
  EXPECT_TRUE(guard.faulted());
}

// The guard covers the mapping's last page whole, past the size it was
// given (a touch there faults as well once the page is lost).
TEST(mapping_guard, last_page_past_the_size_is_guarded) {
  temp_dir dir;
  mapped_file f((dir / "f").string(), 3);
  size_t const size = 2 * page_size() + 100;
  mapping_guard const guard(f.data, size);
  f.cut_to(page_size());
  EXPECT_EQ(f.data[2 * page_size() + 200], 0);
  EXPECT_TRUE(guard.faulted());
}

TEST(mapping_guard, guards_are_separate) {
  temp_dir dir;
  mapped_file a((dir / "a").string(), 3);
  mapped_file b((dir / "b").string(), 3);
  mapping_guard const ga(a.data, a.size);
  mapping_guard const gb(b.data, b.size);
  b.cut_to(0);
  (void)a.read_all();
  EXPECT_EQ(b.read_all(), 0u);
  EXPECT_FALSE(ga.faulted());
  EXPECT_TRUE(gb.faulted());
}

TEST(mapping_guard, a_slot_is_reused_clean) {
  temp_dir dir;
  for (int round = 0; round < 2 * mapping_guard::slots; ++round) {
    mapped_file f((dir / "f").string(), 2);
    mapping_guard const g(f.data, f.size);
    ASSERT_TRUE(g.guarded());
    EXPECT_FALSE(g.faulted()) << "round " << round;
    if (round % 2 == 0) {
      f.cut_to(0);
      EXPECT_EQ(f.read_all(), 0u);
      EXPECT_TRUE(g.faulted());
    }
  }
}

// A fault outside every guarded mapping still ends the process: by the
// handler installed before the first guard, or else by the signal itself.
// (Threadsafe death tests re-run the test in a fresh process, where no guard
// has installed its handler yet.)
void fault_outside_the_guard(std::string const& dir, bool own_handler) {
  if (own_handler) {
    struct sigaction sa {};
    sa.sa_handler = [](int) { ::_exit(42); };
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, nullptr);
  }
  mapped_file guarded(dir + "/g", 2);
  mapping_guard const g(guarded.data, guarded.size);
  // The guard's handler is in place (else exit 3)...
  guarded.cut_to(0);
  if (guarded.read_all() != 0 || !g.faulted()) ::_exit(3);
  // ...and passes this fault on.
  mapped_file bare(dir + "/b", 2);
  bare.cut_to(0);
  (void)bare.read_all();
  ::_exit(0);  // not reached: the read faults
}

TEST(mapping_guard_death, fault_elsewhere_goes_to_the_earlier_handler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  temp_dir dir;
  EXPECT_EXIT(fault_outside_the_guard(dir.path().string(), true),
              ::testing::ExitedWithCode(42), "");
}

// Ended by SIGBUS; under AddressSanitizer, whose handler was installed
// before the guard's and so is the one passed on to, by its report (an abort
// or an exit status, as ASAN_OPTIONS say).
bool ended_by_the_fault(int status) {
#ifdef __SANITIZE_ADDRESS__
  return WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0);
#else
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS;
#endif
}

TEST(mapping_guard_death, fault_elsewhere_without_a_handler_kills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  temp_dir dir;
  EXPECT_EXIT(fault_outside_the_guard(dir.path().string(), false),
              ended_by_the_fault, "");
}

// A SIGBUS sent by kill() names no address: it ends the process as before.
TEST(mapping_guard_death, sent_signal_still_kills) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  temp_dir dir;
  EXPECT_EXIT(
      {
        mapped_file guarded(dir.path().string() + "/g", 2);
        mapping_guard const g(guarded.data, guarded.size);
        ::kill(::getpid(), SIGBUS);
        ::_exit(0);
      },
      ended_by_the_fault, "");
}

// An ignored SIGBUS stays ignored when sent; the guard still catches faults.
TEST(mapping_guard_death, ignored_sent_signal_stays_ignored) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  temp_dir dir;
  EXPECT_EXIT(
      {
        ::signal(SIGBUS, SIG_IGN);
        mapped_file guarded(dir.path().string() + "/g", 2);
        mapping_guard const g(guarded.data, guarded.size);
        ::kill(::getpid(), SIGBUS);
        guarded.cut_to(0);
        ::_exit(guarded.read_all() == 0 && g.faulted() ? 7 : 3);
      },
      ::testing::ExitedWithCode(7), "");
}

}  // namespace
}  // namespace brevis::fs
