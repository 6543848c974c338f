#pragma once
// A `brevis mount -f` daemon for tests of the real binary: started in the
// background on a store and a mountpoint, stopped by a signal, by
// `brevis unmount`, or killed outright (SIGKILL, then a lazy unmount of the
// dead mount). Never leaves a mount behind.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/cli/helpers.h"

namespace brevis::cli_test {

inline bool fuse_usable() {
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return fs::exists("/usr/bin/fusermount3") || fs::exists("/bin/fusermount3");
}

class mount_daemon {
 public:
  mount_daemon(fs::path store, fs::path mnt, fs::path log)
      : store_(std::move(store)), mnt_(std::move(mnt)), log_(std::move(log)) {
    fs::create_directories(mnt_);
  }
  ~mount_daemon() {
    if (pid_ > 0) kill9();
  }
  mount_daemon(mount_daemon const&) = delete;
  mount_daemon& operator=(mount_daemon const&) = delete;

  fs::path const& store() const { return store_; }
  fs::path const& mnt() const { return mnt_; }
  pid_t pid() const { return pid_; }
  std::string log() const { return read_file(log_); }

  /// Starts `brevis mount -f ARGS STORE MNT` with `env` added to the
  /// environment; waits until the mount is there. Returns "" or what went
  /// wrong.
  std::string start(std::vector<std::string> const& args = {},
                    std::vector<std::string> const& env = {}) {
    std::vector<std::string> argv = {brevis_binary(), "mount", "-f"};
    argv.insert(argv.end(), args.begin(), args.end());
    argv.push_back(store_.string());
    argv.push_back(mnt_.string());
    std::vector<char*> a;
    for (auto& s : argv) a.push_back(s.data());
    a.push_back(nullptr);
    std::vector<std::string> envs;
    for (char** e = environ; *e; ++e) envs.emplace_back(*e);
    envs.insert(envs.end(), env.begin(), env.end());
    std::vector<char*> e;
    for (auto& s : envs) e.push_back(s.data());
    e.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 2, log_.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    int const rc = posix_spawn(&pid_, a[0], &fa, nullptr, a.data(), e.data());
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = -1;
      return "cannot start " + argv[0];
    }
    struct stat parent {};
    ::stat(mnt_.parent_path().c_str(), &parent);
    for (int i = 0; i < 600; ++i) {
      struct stat st {};
      if (::stat(mnt_.c_str(), &st) == 0 && st.st_dev != parent.st_dev) {
        return "";
      }
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        // It may have mounted before it died: never leave that behind.
        pid_ = -1;
        run_program({"/usr/bin/fusermount3", "-u", "-z", mnt_.string()});
        return "mount exited: " + log();
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "mount did not appear";
  }

  /// Sends `sig` (or runs `brevis unmount` when 0) and returns the
  /// daemon's exit code (128 + signal when a signal ended it). With
  /// `thread`, the signal goes to that one of the daemon's threads.
  int stop(int sig, pid_t thread = 0) {
    if (pid_ <= 0) return -1;
    if (sig == 0) {
      brevis({"unmount", mnt_.string()});
    } else if (thread > 0) {
      ::syscall(SYS_tgkill, pid_, thread, sig);
    } else {
      ::kill(pid_, sig);
    }
    for (int i = 0; i < 3000; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    // A hang: its stacks go into the log (what a failure prints) first.
    dump_stacks("did not stop within 60 s of signal " + std::to_string(sig));
    kill9();
    return -1;
  }

  /// Appends the daemon's threads' stacks (gdb, when there) to its log.
  void dump_stacks(std::string const& why) {
    if (pid_ <= 0) return;
    std::string text =
        "\n=== harness: daemon " + std::to_string(pid_) + " " + why + " ===\n";
    if (fs::exists("/usr/bin/gdb")) {
      text += run_program({"/usr/bin/gdb", "-p", std::to_string(pid_), "-batch",
                           "-ex", "thread apply all bt"})
                  .out;
    }
    int fd =
        ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)!::write(fd, text.data(), text.size());
      ::close(fd);
    }
  }

  /// SIGKILL, reaped; the dead mount is detached. Returns the exit code.
  int kill9() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGKILL);
    return reap_and_detach();
  }

  /// The daemon ended by itself (a kill point): waits for it and detaches
  /// the dead mount.
  int reap_and_detach() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    run_program({"/usr/bin/fusermount3", "-u", "-z", mnt_.string()});
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  /// Whether the daemon is still running (a dead one is reaped and its
  /// mount detached).
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == 0) return true;
    pid_ = -1;
    run_program({"/usr/bin/fusermount3", "-u", "-z", mnt_.string()});
    return false;
  }

 private:
  fs::path store_, mnt_, log_;
  pid_t pid_ = -1;
};

/// The user.brevis.state of `p` ("" when it has none).
inline std::string brevis_state(fs::path const& p) {
  char buf[64];
  ssize_t const n = ::getxattr(p.c_str(), "user.brevis.state", buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

}  // namespace brevis::cli_test
