// `brevis mount STORE MOUNTPOINT` and `brevis unmount MOUNTPOINT`.

#include <cstdio>
#include <filesystem>
#include <optional>

#include "fs/fuse/mount.h"
#include "src/commands.h"
#include "src/fatal_signals.h"
#include "src/huge_heap.h"
#include "src/size_arg.h"

namespace brevis::cli {

int run_mount(mount_cli_options const& opt) {
  fs::mount_options m;
  m.store = opt.store;
  m.mountpoint = opt.mountpoint;
  m.foreground = opt.foreground;
  m.debug = opt.debug;
  m.allow_other = opt.allow_other;
  m.compress = !opt.no_compress;
  m.quiet_ms = opt.quiet_ms;
  m.threads = opt.fuse_threads;
  std::optional<uint64_t> const cache = parse_size(opt.cache_size);
  if (!cache || *cache > SIZE_MAX) {
    std::fprintf(stderr, "brevis: mount: bad --cache-size '%s'\n",
                 opt.cache_size.c_str());
    return 1;
  }
  m.cache_bytes = static_cast<size_t>(*cache);
  m.prefetch = opt.prefetch;
  std::optional<uint64_t> const pipe = parse_size(opt.pipeline_memory);
  if (!pipe || *pipe > SIZE_MAX || *pipe < (1u << 20)) {
    std::fprintf(stderr,
                 "brevis: mount: bad --pipeline-memory '%s' (at least 1M)\n",
                 opt.pipeline_memory.c_str());
    return 1;
  }
  m.pipeline_memory = static_cast<size_t>(*pipe);
  // The daemon runs in /: a relative log path means here.
  if (!opt.log.empty() && opt.log != "syslog" && opt.log != "stderr") {
    m.log = std::filesystem::absolute(opt.log).string();
  } else {
    m.log = opt.log;
  }
  // Every thread on the main arena, the one on huge pages (huge_heap.h):
  // with an arena per FUSE and prefetch thread, a cold read of a 315 MB
  // checkpoint took 16,700 page faults (chunk buffers and decode scratch
  // faulted in 4 KiB at a time), 140 on the one arena; the daemon's CPU
  // 1.05 -> 0.60 s for that read, 4.4 -> 4.0 s for its compression (loaded
  // box). Small blocks come from each thread's tcache, without the lock.
  share_main_arena();
  restore_default_signal_handlers();
  return fs::run_mount(m);
}

int run_unmount(mount_cli_options const& opt) {
  return fs::run_unmount(opt.mountpoint, opt.lazy);
}

}  // namespace brevis::cli
