#include "fs/pipeline/resident_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

namespace brevis::fs {

std::optional<uint64_t> resident_file_bytes() {
  int const fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buf[128];
  ssize_t const n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  // size resident shared text lib data dt, in pages.
  unsigned long long size = 0, resident = 0, shared = 0;
  if (std::sscanf(buf, "%llu %llu %llu", &size, &resident, &shared) != 3) {
    return std::nullopt;
  }
  static long const page = ::sysconf(_SC_PAGESIZE);
  return uint64_t{shared} * static_cast<uint64_t>(page);
}

}  // namespace brevis::fs
