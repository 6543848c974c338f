#include "src/output_file.h"

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "codec/core/error.h"
#include "src/fatal_signals.h"

namespace brevis::cli {
namespace {

[[noreturn]] void fail_io(std::string const& path, char const* what) {
  int e = errno;
  codec::fail(codec::errc::io,
              path + ": " + what + (*what ? ": " : "") + std::strerror(e));
}

[[noreturn]] void fail_exists(std::string const& path) {
  codec::fail(codec::errc::io,
              path + " already exists; not overwritten (use -f)");
}

bool exists(std::string const& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// Renames without replacing: renameat2(RENAME_NOREPLACE) where supported,
// else link + unlink, else a check then rename (racy, last resort).
void rename_noreplace(std::string const& from, std::string const& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(),
                  RENAME_NOREPLACE) == 0) {
    return;
  }
  if (errno == EEXIST) fail_exists(to);
  if (errno != EINVAL && errno != ENOSYS) fail_io(to, "cannot rename");
  if (::link(from.c_str(), to.c_str()) == 0) {
    ::unlink(from.c_str());
    return;
  }
  if (errno == EEXIST) fail_exists(to);
  if (exists(to)) fail_exists(to);
  if (::rename(from.c_str(), to.c_str()) != 0) fail_io(to, "cannot rename");
}

}  // namespace

bool names_stdout(std::string const& path) {
  return path == "-" || path == "/dev/stdout" || path == "/dev/fd/1" ||
         path == "/proc/self/fd/1";
}

bool same_file(std::string const& a, std::string const& b) {
  struct stat sa {
  }, sb{};
  return ::stat(a.c_str(), &sa) == 0 && ::stat(b.c_str(), &sb) == 0 &&
         sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

output_file::output_file(std::string path, bool force, struct stat const* like)
    : path_(std::move(path)), force_(force) {
  if (like != nullptr) {
    has_like_ = true;
    like_ = *like;
  }
  // Names of stdout itself are stdout: a temporary renamed over
  // /dev/stdout would replace the system's link (and a file it points to
  // would be reopened at offset 0, not where the shell's >> put it).
  if (names_stdout(path_)) {
    fd_ = STDOUT_FILENO;
    return;
  }
  // An existing device or FIFO (/dev/null, a pipe) is written in place, as
  // zstd does: a temporary renamed over it would replace /dev/null itself
  // with a regular file.
  if (struct stat st{}; ::stat(path_.c_str(), &st) == 0 &&
                        (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode))) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) fail_io(path_, "cannot open");
    in_place_ = true;
    return;
  }
  if (!force_ && exists(path_)) fail_exists(path_);
  size_t slash = path_.find_last_of('/');
  std::string dir =
      slash == std::string::npos ? "" : path_.substr(0, slash + 1);
  std::string base =
      slash == std::string::npos ? path_ : path_.substr(slash + 1);
  if (base.size() > 200) base.resize(200);  // stay under NAME_MAX
  tmp_ = dir + "." + base + ".brevis-tmp-XXXXXX";
  fd_ = ::mkostemp(tmp_.data(), O_CLOEXEC);
  if (fd_ < 0) {
    tmp_.clear();
    fail_io(path_, "cannot create");
  }
  set_signal_temporary(tmp_);
}

output_file::~output_file() {
  if (!committed_) discard();
}

void output_file::discard() noexcept {
  gathered_.clear();
  if (fd_ > STDOUT_FILENO) ::close(fd_);
  fd_ = -1;
  if (!tmp_.empty()) {
    ::unlink(tmp_.c_str());
    set_signal_temporary("");
  }
}

void output_file::reserve(uint64_t size) noexcept {
  if (tmp_.empty() || fd_ < 0 || size == 0) return;
  // KEEP_SIZE: a failed run's temporary, and the committed file, have the
  // size of what was written.
  (void)::fallocate(fd_, FALLOC_FL_KEEP_SIZE, 0, static_cast<off_t>(size));
}

void output_file::write(codec::byte_view data) {
  written_ += data.size();
  if (data.size() < gather_limit) {
    if (gathered_.size() + data.size() > gather_limit) flush();
    if (gathered_.capacity() == 0) gathered_.reserve(gather_limit);
    gathered_.insert(gathered_.end(), data.begin(), data.end());
    return;
  }
  flush();
  write_now(data);
}

void output_file::flush() {
  write_now(gathered_);
  gathered_.clear();
}

void output_file::write_now(codec::byte_view data) {
  uint8_t const* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_io(is_stdout() ? std::string("stdout") : path_, "write failed");
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

void output_file::commit() {
  flush();
  if (is_stdout()) {
    committed_ = true;
    return;
  }
  if (in_place_) {
    int const fd = fd_;
    fd_ = -1;
    committed_ = true;
    if (::close(fd) != 0) fail_io(path_, "write failed");
    return;
  }
  if (has_like_) {
    // Best effort, as zstd: the input's owner, group, permission bits and
    // times. The owner first (a change of owner clears setuid). Bits that
    // mean something only with the input's owner or group are dropped where
    // those could not be kept: a setuid file of another user's must not
    // become the caller's, nor a group's permissions go to another group.
    if (::fchown(fd_, like_.st_uid, like_.st_gid) != 0) {
      (void)::fchown(fd_, static_cast<uid_t>(-1), like_.st_gid);  // chgrp
    }
    mode_t mode = like_.st_mode & 07777;
    struct stat now {};
    bool const known = ::fstat(fd_, &now) == 0;
    if (!known || now.st_uid != like_.st_uid) mode &= ~mode_t{S_ISUID};
    if (!known || now.st_gid != like_.st_gid) {
      mode &= ~mode_t{S_ISGID | S_IRWXG};
    }
    (void)::fchmod(fd_, mode);
    struct timespec times[2] = {like_.st_atim, like_.st_mtim};
    (void)::futimens(fd_, times);
  } else {
    mode_t mask = ::umask(0);
    ::umask(mask);
    (void)::fchmod(fd_, 0666 & ~mask);
  }
  if (sync_ && ::fsync(fd_) != 0) fail_io(path_, "cannot sync");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) fail_io(path_, "write failed");
  if (force_) {
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      fail_io(path_, "cannot rename");
    }
  } else {
    rename_noreplace(tmp_, path_);
  }
  set_signal_temporary("");
  committed_ = true;
  if (sync_) sync_directory();
}

void output_file::sync_directory() const {
  size_t const slash = path_.find_last_of('/');
  std::string const dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path_.substr(0, slash);
  int const fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    fail_io(path_, "written, but its directory cannot be opened to sync it");
  }
  int const r = ::fsync(fd);
  int const e = errno;
  ::close(fd);
  errno = e;
  // EINVAL: a filesystem that has no directory sync (its renames are as
  // durable as it makes them).
  if (r != 0 && e != EINVAL) {
    fail_io(path_, "written, but its directory cannot be synced");
  }
}

}  // namespace brevis::cli
