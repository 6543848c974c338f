#include "fs/fuse/mount_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <thread>

namespace brevis::fs {
namespace {

/// Whether the lock was taken; false when another holds it.
bool try_lock(int fd, std::string const& path) {
  if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return true;
  if (errno == EWOULDBLOCK) return false;
  throw std::system_error(errno, std::generic_category(), path);
}

std::optional<pid_t> recorded_holder(int fd) {
  std::array<char, 32> buf{};
  ssize_t const n = ::pread(fd, buf.data(), buf.size(), 0);
  if (n <= 0) return std::nullopt;
  return parse_lock_holder(
      std::string_view(buf.data(), static_cast<size_t>(n)));
}

}  // namespace

std::optional<pid_t> parse_lock_holder(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) {
    text.remove_suffix(1);
  }
  pid_t pid = 0;
  auto const [end, ec] =
      std::from_chars(text.data(), text.data() + text.size(), pid);
  if (ec != std::errc() || end != text.data() + text.size() || pid <= 0) {
    return std::nullopt;
  }
  return pid;
}

bool process_exiting(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return true;  // reaped (or in another pid namespace)
  std::string const text{std::istreambuf_iterator<char>(in), {}};
  // "PID (COMM) S ...": COMM may hold spaces and parentheses, so the state
  // follows the last ')'.
  size_t const close = text.rfind(')');
  if (close == std::string::npos || close + 2 >= text.size()) return false;
  char const state = text[close + 2];
  return state == 'Z' || state == 'X' || state == 'x';
}

mount_lock::mount_lock(std::string const& store_dir,
                       std::chrono::milliseconds exit_wait) {
  std::string const path = store_dir + "/mount.lock";
  int const flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  fd_ = owned_fd(::open(path.c_str(), flags, 0600));
  if (fd_.get() < 0) {
    throw std::system_error(errno, std::generic_category(), path);
  }
  auto const deadline = std::chrono::steady_clock::now() + exit_wait;
  bool said = false;
  while (!try_lock(fd_.get(), path)) {
    // Read each time: a new holder writes its pid right after it locks.
    std::optional<pid_t> const holder = recorded_holder(fd_.get());
    if (!holder || !process_exiting(*holder) ||
        std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error(
          "store " + store_dir + " is already mounted" +
          (holder ? " (by pid " + std::to_string(*holder) + ")" : ""));
    }
    if (!said) {
      std::string const line = "brevis: mount: waiting for pid " +
                               std::to_string(*holder) +
                               ", which is exiting, to let go of the store\n";
      std::fputs(line.c_str(), stderr);
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  note_pid();
}

void mount_lock::note_pid() {
  std::string const pid = std::to_string(::getpid());
  if (::ftruncate(fd_.get(), 0) == 0) {
    (void)!::pwrite(fd_.get(), pid.data(), pid.size(), 0);
  }
}

}  // namespace brevis::fs
