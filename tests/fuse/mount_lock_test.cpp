// One mount per store: the lock refuses a live holder at once, and waits for
// one that is exiting (its first thread a zombie while its last still holds
// the lock, as a killed daemon's do) instead of failing after a `kill -9`.

#include "fs/fuse/mount_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

namespace brevis::fs {
namespace {

using namespace std::chrono_literals;

struct temp_store {
  std::string dir;
  temp_store() {
    std::string pattern = "/tmp/brevis-lock-test-XXXXXX";
    char const* made = ::mkdtemp(pattern.data());
    if (made == nullptr) std::abort();
    dir = made;
  }
  ~temp_store() {
    ::unlink((dir + "/mount.lock").c_str());
    ::rmdir(dir.c_str());
  }
  temp_store(temp_store const&) = delete;
  temp_store& operator=(temp_store const&) = delete;
  temp_store(temp_store&&) = delete;
  temp_store& operator=(temp_store&&) = delete;
};

std::string file_text(std::string const& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), {}};
}

/// Whether someone holds the flock of `path` (tried through a new open).
bool held(std::string const& path) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int const fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool const busy = ::flock(fd, LOCK_EX | LOCK_NB) != 0;
  ::close(fd);
  return busy;
}

/// A process that takes the lock, then lets its first thread exit (a
/// zombie from then on) while a second holds the lock until `release`
/// reads end of file on `release[0]` (the test closes `release[1]`), or
/// for 30 s.
pid_t dying_holder(std::string const& dir, std::array<int, 2> release) {
  pid_t const pid = ::fork();
  if (pid != 0) return pid;
  ::close(release[1]);  // the test's end
  // Never destroyed: this thread ends without unwinding, and the other
  // ends the process.
  std::optional<mount_lock> lock;
  try {
    lock.emplace(dir, 0ms);
  } catch (...) {
    ::_exit(2);
  }
  std::thread([r = release[0]] {
    pollfd p{r, POLLIN, 0};
    ::poll(&p, 1, 30000);
    ::_exit(0);
  }).detach();
  // This thread alone ends, without unwinding (pthread_exit's unwinding
  // would meet the test framework's catch-all).
  ::syscall(SYS_exit, 0);
  std::abort();
}

bool wait_until(auto&& done, std::chrono::milliseconds limit) {
  auto const end = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

TEST(mount_lock, reads_the_holder_pid) {
  EXPECT_EQ(parse_lock_holder("1234"), 1234);
  EXPECT_EQ(parse_lock_holder("1234\n"), 1234);
  for (char const* bad : {"", "\n", "abc", "-5", "0", "12x", " 12", "1 2",
                          "99999999999999999999999"}) {
    EXPECT_FALSE(parse_lock_holder(bad)) << bad;
  }
}

TEST(mount_lock, tells_a_live_process_from_an_exiting_one) {
  EXPECT_FALSE(process_exiting(::getpid()));
  pid_t const child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  // Unreaped: a zombie.
  EXPECT_TRUE(wait_until([&] { return process_exiting(child); }, 10s));
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(process_exiting(child));  // reaped: gone
}

TEST(mount_lock, a_live_holder_is_refused_at_once) {
  temp_store s;
  mount_lock const first(s.dir);
  EXPECT_EQ(file_text(s.dir + "/mount.lock"), std::to_string(::getpid()));
  auto const t0 = std::chrono::steady_clock::now();
  try {
    mount_lock const second(s.dir, 10s);
    ADD_FAILURE() << "a second lock was taken";
  } catch (std::runtime_error const& e) {
    EXPECT_EQ(std::string(e.what()), "store " + s.dir +
                                         " is already mounted (by pid " +
                                         std::to_string(::getpid()) + ")");
  }
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
}

TEST(mount_lock, a_holder_that_is_exiting_is_waited_for) {
  temp_store s;
  std::string const path = s.dir + "/mount.lock";
  std::array<int, 2> release{};
  ASSERT_EQ(::pipe2(release.data(), O_CLOEXEC), 0);
  pid_t const child = dying_holder(s.dir, release);
  ASSERT_GT(child, 0);
  ::close(release[0]);
  ASSERT_TRUE(wait_until([&] { return process_exiting(child); }, 10s));
  // The zombie still holds the lock: what a mount right after a kill sees.
  ASSERT_TRUE(held(path));
  EXPECT_EQ(file_text(path), std::to_string(child));
  // Without a wait it is refused, naming the holder.
  EXPECT_THROW(mount_lock(s.dir, 0ms), std::runtime_error);
  // The holder's last thread lets go 300 ms from now.
  std::thread letting_go([&] {
    std::this_thread::sleep_for(300ms);
    ::close(release[1]);
  });
  auto const t0 = std::chrono::steady_clock::now();
  std::optional<mount_lock> lock;
  EXPECT_NO_THROW(lock.emplace(s.dir, 20s));  // waits for the last thread
  EXPECT_GE(std::chrono::steady_clock::now() - t0, 250ms);
  letting_go.join();
  EXPECT_EQ(file_text(path), std::to_string(::getpid()));
  lock.reset();
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(held(path));  // went with the lock's owner
}

}  // namespace
}  // namespace brevis::fs
