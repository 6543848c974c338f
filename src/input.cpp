#include "src/input.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "codec/core/error.h"
#include "src/fatal_signals.h"

namespace brevis::cli {
namespace {

[[noreturn]] void fail_errno(char const* what) {
  int e = errno;
  codec::fail(codec::errc::io, std::string(what) + std::strerror(e));
}

// Reads up to `length` bytes at `offset` (or from the current position when
// `offset` is negative); fewer only at the end of the file.
size_t read_fully(int fd, uint8_t* out, size_t length, int64_t offset) {
  size_t done = 0;
  while (done < length) {
    // Linux moves at most ~2 GiB per call.
    size_t const step = std::min<size_t>(length - done, size_t{1} << 30);
    ssize_t const n =
        offset < 0
            ? ::read(fd, out + done, step)
            : ::pread(fd, out + done, step,
                      static_cast<off_t>(offset) + static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno("read failed: ");
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// A stream of unknown length: read into a buffer that doubles (on huge
// pages, so a large stream is not paged in 4 KiB at a time).
void read_stream(int fd, codec::page_buffer& out) {
  size_t used = 0;
  out.grow(codec::huge_page_size);
  for (;;) {
    if (used == out.size()) out.grow(2 * out.size());
    size_t const n = read_fully(fd, out.data() + used, out.size() - used, -1);
    used += n;
    if (used < out.size()) break;  // the stream ended
  }
  out.truncate(used);
}

// Whether a file of `size` bytes may be held in memory whole: it stays
// well inside the machine's memory.
bool fits_in_memory(uint64_t size) {
  long const pages = ::sysconf(_SC_PHYS_PAGES);
  long const page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return false;
  return size <= static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4;
}

}  // namespace

file_descriptor::~file_descriptor() {
  if (fd_ > STDIN_FILENO) ::close(fd_);
}

file_descriptor::file_descriptor(file_descriptor&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)) {}

file_descriptor& file_descriptor::operator=(file_descriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ > STDIN_FILENO) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

input load_input(std::string const& path, input_use use) {
  input in;
  in.path = path;
  in.is_stdin = path == "-";
  file_descriptor fd(STDIN_FILENO);
  if (!in.is_stdin) {
    fd = file_descriptor(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) fail_errno("");
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) fail_errno("");
  if (S_ISDIR(st.st_mode)) codec::fail(codec::errc::io, "is a directory");
  if (!S_ISREG(st.st_mode)) {
    read_stream(fd.get(), in.buffer);
    return in;
  }
  in.is_regular = true;
  in.st = st;
  // Read as a stream, not by size: a file whose size says nothing of its
  // bytes (/proc's say 0), and stdin left part read by the caller (its
  // bytes start where it stands, as zstd reads them).
  off_t const at = in.is_stdin ? ::lseek(fd.get(), 0, SEEK_CUR) : 0;
  if (st.st_size == 0 || at > 0) {
    read_stream(fd.get(), in.buffer);
    // Changed while read, as check_unchanged() judges a mapped file: a size
    // reported must be what was read (a file empty when opened grew), and
    // size and time are checked again before the output is committed.
    if (::fstat(fd.get(), &in.st) != 0) fail_errno("");
    if (in.st.st_size != 0 &&
        static_cast<uint64_t>(in.st.st_size) !=
            static_cast<uint64_t>(at) + in.buffer.size()) {
      codec::fail(codec::errc::io,
                  "changed while it was read (size); no output written");
    }
    in.source = std::move(fd);
    return in;
  }
  auto const size = static_cast<size_t>(st.st_size);
  if (use == input_use::stream) {
    in.file = std::move(fd);
  } else {
    // Every page mapped up front where the file fits, not read into a
    // buffer: compress -T1 of the 164 corpus files 4.87 -> 4.64 s of CPU
    // (the page cache's pages are mapped, not cleared and copied). Earlier
    // kernels measured the other way round (27 MB: 16 ms against 10).
    in.map = mapped_file(fd.get(), size,
                         use == input_use::whole && fits_in_memory(size));
    in.mapped = true;
    in.source = std::move(fd);
    set_signal_input(path);
  }
  return in;
}

void check_unchanged(input const& in) {
  if (in.source.get() < 0) return;
  struct stat now {};
  if (::fstat(in.source.get(), &now) != 0) fail_errno("");
  if (now.st_size != in.st.st_size ||
      now.st_mtim.tv_sec != in.st.st_mtim.tv_sec ||
      now.st_mtim.tv_nsec != in.st.st_mtim.tv_nsec) {
    codec::fail(codec::errc::io,
                "changed while it was read (size or modification time); "
                "no output written");
  }
}

void read_at(input const& in, uint64_t offset, size_t length, uint8_t* out) {
  if (read_fully(in.file.get(), out, length, static_cast<int64_t>(offset)) !=
      length) {
    codec::fail(codec::errc::truncated, "read past the end of the file");
  }
}

std::string base_name(std::string const& path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

void check_removable(std::string const& path) {
  if (path == "-") return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    codec::fail(codec::errc::io,
                "--rm takes regular files only, not a symlink, FIFO or "
                "device; nothing written");
  }
}

void remove_input(input const& in) {
  if (in.is_stdin) return;
  // Only the file that was read: a name given to another file meanwhile
  // (a rename over it) keeps it, as xz does.
  struct stat now {};
  if (!in.is_regular) {
    codec::fail(codec::errc::io, "not a regular file; not removed");
  }
  if (::lstat(in.path.c_str(), &now) != 0 || now.st_dev != in.st.st_dev ||
      now.st_ino != in.st.st_ino) {
    codec::fail(codec::errc::io,
                "now names another file (moved while it was read); not "
                "removed");
  }
  if (::unlink(in.path.c_str()) != 0) {
    codec::fail(codec::errc::io,
                std::string("cannot remove input: ") + std::strerror(errno));
  }
}

}  // namespace brevis::cli
