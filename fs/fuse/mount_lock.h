#pragma once
// STORE/mount.lock: one mount per store. The lock is an flock on the file,
// held for as long as the mount lives (the daemon inherits the descriptor
// across fuse_daemonize's fork), so the kernel drops it when the holder
// dies, however it dies. The file's text is the holder's pid, for the
// message a second mount prints.
//
// A killed daemon keeps the lock until its last thread has exited, which
// can be a moment after the pid already shows as a zombie (the first
// thread to exit). A mount that finds the lock held by a pid that is gone
// or a zombie waits for that, instead of failing right after a `kill -9`.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "fs/fuse/owned_fd.h"

namespace brevis::fs {

class mount_lock {
 public:
  /// Takes the lock of `store_dir`, or throws std::runtime_error("store ...
  /// is already mounted (by pid N)"). A holder whose pid is exiting is
  /// waited for, up to `exit_wait`.
  explicit mount_lock(
      std::string const& store_dir,
      std::chrono::milliseconds exit_wait = std::chrono::seconds(10));

  /// Records the calling process as the holder (again after daemonizing:
  /// the serving process).
  void note_pid();

 private:
  owned_fd fd_;
};

/// The pid a lock file's text names, if it names one.
std::optional<pid_t> parse_lock_holder(std::string_view text);

/// Whether the process `pid` is gone or exiting: no /proc entry, or its
/// state in `/proc/PID/stat` is a zombie or dead.
bool process_exiting(pid_t pid);

}  // namespace brevis::fs
