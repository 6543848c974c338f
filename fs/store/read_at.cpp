#include "fs/store/read_at.h"

#include <unistd.h>

#include <cerrno>
#include <string>

#include "fs/store/error.h"

namespace brevis::fs {

size_t read_at(int fd, uint64_t offset, size_t n, uint8_t* out,
               std::string_view what) {
  size_t done = 0;
  while (done < n) {
    ssize_t const r =
        ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      store_fail_errno(errno, "read " + std::string(what));
    }
    if (r == 0) break;  // the end of the file
    done += static_cast<size_t>(r);
  }
  return done;
}

}  // namespace brevis::fs
