#pragma once
// `brevis mount`: serves a store at a mountpoint through libfuse3's
// low-level API (fs/fuse/ops.cpp, the only file that includes libfuse).

#include <cstddef>
#include <string>

namespace brevis::fs {

struct mount_options {
  std::string store;       // the store directory (created when missing)
  std::string mountpoint;  // an existing directory
  bool foreground = false;
  bool debug = false;        // libfuse's request trace
  bool allow_other = false;  // let other users in (default_permissions on)
  bool compress = true;      // false: files stay staged
  unsigned quiet_ms = 1000;  // after the last writer closes
  unsigned threads = 0;      // FUSE worker threads (0: libfuse's default)
  size_t cache_bytes = 256u << 20;  // decoded chunks kept for reads
  unsigned prefetch = 2;  // chunks decoded ahead of sequential readers
  size_t pipeline_memory = 256u << 20;  // compression's bytes in flight
  /// "stderr", "syslog" or a file; empty: stderr in the foreground, syslog
  /// when daemonized (stderr is /dev/null then).
  std::string log;
};

/// A store is mounted at most once: the mount holds an flock on
/// STORE/mount.lock and a second mount of the store fails with an error.
/// Mounts, serves until unmounted or SIGTERM/SIGINT/SIGHUP, then stops
/// taking work, leaves unfinished compression staged, commits and returns.
/// Daemonizes unless `foreground` (after the mount succeeded, so errors
/// reach the terminal). Returns the process exit code; errors go to stderr.
int run_mount(mount_options const& opt);

/// `brevis unmount MOUNTPOINT`: fusermount3 -u. Returns the exit code.
int run_unmount(std::string const& mountpoint, bool lazy);

}  // namespace brevis::fs
