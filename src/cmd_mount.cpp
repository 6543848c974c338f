// `brevis mount STORE MOUNTPOINT` and `brevis unmount MOUNTPOINT`.

#include <cstdio>

#include "fs/fuse/mount.h"
#include "src/commands.h"
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
  return fs::run_mount(m);
}

int run_unmount(mount_cli_options const& opt) {
  return fs::run_unmount(opt.mountpoint, opt.lazy);
}

}  // namespace brevis::cli
