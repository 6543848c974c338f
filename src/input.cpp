#include "src/input.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "codec/core/error.h"

namespace brevis::cli {
namespace {

[[noreturn]] void fail_errno(char const* what) {
  int e = errno;
  codec::fail(codec::errc::io, std::string(what) + std::strerror(e));
}

// Closes the descriptor on every path out of load_input.
struct fd_guard {
  int fd;
  ~fd_guard() {
    if (fd > STDIN_FILENO) ::close(fd);
  }
};

void read_all(int fd, codec::bytes& out) {
  size_t const step = 1u << 20;
  for (;;) {
    size_t const old = out.size();
    out.resize(old + step);
    ssize_t n = ::read(fd, out.data() + old, step);
    if (n < 0) {
      out.resize(old);
      if (errno == EINTR) continue;
      fail_errno("read failed: ");
    }
    out.resize(old + static_cast<size_t>(n));
    if (n == 0) return;
  }
}

// Whether a file of `size` bytes may be read in whole when mapped: it stays
// well inside the machine's memory.
bool fits_in_memory(uint64_t size) {
  long const pages = ::sysconf(_SC_PHYS_PAGES);
  long const page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return false;
  return size <= static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4;
}

}  // namespace

input load_input(std::string const& path, bool whole) {
  input in;
  in.path = path;
  in.is_stdin = path == "-";
  int fd = STDIN_FILENO;
  if (!in.is_stdin) {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail_errno("");
  }
  fd_guard guard{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail_errno("");
  if (S_ISDIR(st.st_mode)) codec::fail(codec::errc::io, "is a directory");
  if (S_ISREG(st.st_mode)) {
    in.is_regular = true;
    in.st = st;
    auto const size = static_cast<size_t>(st.st_size);
    in.map = mapped_file(fd, size, whole && fits_in_memory(size));
  } else {
    read_all(fd, in.buffer);
  }
  return in;
}

std::string base_name(std::string const& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void remove_input(std::string const& path, std::string const& out_path) {
  if (path == "-" || out_path == "-") return;
  if (::unlink(path.c_str()) != 0) {
    codec::fail(codec::errc::io,
                std::string("cannot remove input: ") + std::strerror(errno));
  }
}

}  // namespace brevis::cli
