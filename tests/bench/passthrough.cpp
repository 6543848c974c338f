// A plain FUSE passthrough, the benchmark's baseline for the mount
// (scripts/bench.sh --mount): `brevis_passthrough SOURCE MOUNTPOINT [fuse
// options]` mirrors SOURCE. It uses libfuse3's high-level API with the
// settings the brevis mount uses (writeback cache, 1 MiB max_write and
// readahead, 1 s attribute and entry timeouts, the kernel's page cache kept
// across opens), so a ratio against it measures brevis, not FUSE settings.
// It forwards extended attributes like libfuse's own passthrough example:
// a filesystem without them would skip the kernel's per-write check for
// security.capability (one GETXATTR round trip per write) that every
// filesystem with xattrs, brevis included, pays.
// Built by CMake, never installed.

#define FUSE_USE_VERSION 314
#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

namespace {

std::string source_dir;

std::string real(char const* path) { return source_dir + path; }

int err(int rc) { return rc < 0 ? -errno : rc; }

void* pt_init(fuse_conn_info* conn, fuse_config* cfg) {
  if (conn->capable & FUSE_CAP_WRITEBACK_CACHE) {
    conn->want |= FUSE_CAP_WRITEBACK_CACHE;
  }
  conn->max_write = 1u << 20;
  conn->max_readahead = 1u << 20;
  cfg->use_ino = 1;
  cfg->kernel_cache = 1;
  cfg->attr_timeout = 1.0;
  cfg->entry_timeout = 1.0;
  cfg->negative_timeout = 0;
  return nullptr;
}

int pt_getattr(char const* path, struct stat* st, fuse_file_info* fi) {
  if (fi) return err(::fstat(static_cast<int>(fi->fh), st));
  return err(::lstat(real(path).c_str(), st));
}

int pt_readdir(char const* path, void* buf, fuse_fill_dir_t fill, off_t,
               fuse_file_info*, fuse_readdir_flags) {
  DIR* d = ::opendir(real(path).c_str());
  if (!d) return -errno;
  while (dirent* e = ::readdir(d)) {
    struct stat st {};
    st.st_ino = e->d_ino;
    st.st_mode = static_cast<mode_t>(DTTOIF(e->d_type));
    if (fill(buf, e->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0))) {
      break;
    }
  }
  ::closedir(d);
  return 0;
}

// With the writeback cache the kernel reads pages of files opened
// write-only, and handles O_APPEND itself.
int adjust(int flags) {
  if ((flags & O_ACCMODE) == O_WRONLY) flags = (flags & ~O_ACCMODE) | O_RDWR;
  return flags & ~O_APPEND;
}

int pt_open(char const* path, fuse_file_info* fi) {
  int const fd = ::open(real(path).c_str(), adjust(fi->flags));
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  fi->keep_cache = 1;
  return 0;
}

int pt_create(char const* path, mode_t mode, fuse_file_info* fi) {
  int const fd = ::open(real(path).c_str(), adjust(fi->flags) | O_CREAT, mode);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  return 0;
}

int pt_read(char const*, char* buf, size_t size, off_t off,
            fuse_file_info* fi) {
  ssize_t const n = ::pread(static_cast<int>(fi->fh), buf, size, off);
  return n < 0 ? -errno : static_cast<int>(n);
}

int pt_write(char const*, char const* buf, size_t size, off_t off,
             fuse_file_info* fi) {
  ssize_t const n = ::pwrite(static_cast<int>(fi->fh), buf, size, off);
  return n < 0 ? -errno : static_cast<int>(n);
}

int pt_release(char const*, fuse_file_info* fi) {
  ::close(static_cast<int>(fi->fh));
  return 0;
}

int pt_fsync(char const*, int datasync, fuse_file_info* fi) {
  int const fd = static_cast<int>(fi->fh);
  return err(datasync ? ::fdatasync(fd) : ::fsync(fd));
}

int pt_truncate(char const* path, off_t size, fuse_file_info* fi) {
  if (fi) return err(::ftruncate(static_cast<int>(fi->fh), size));
  return err(::truncate(real(path).c_str(), size));
}

int pt_utimens(char const* path, timespec const tv[2], fuse_file_info*) {
  return err(
      ::utimensat(AT_FDCWD, real(path).c_str(), tv, AT_SYMLINK_NOFOLLOW));
}

int pt_chmod(char const* path, mode_t mode, fuse_file_info*) {
  return err(::chmod(real(path).c_str(), mode));
}

int pt_unlink(char const* path) { return err(::unlink(real(path).c_str())); }
int pt_rmdir(char const* path) { return err(::rmdir(real(path).c_str())); }
int pt_mkdir(char const* path, mode_t mode) {
  return err(::mkdir(real(path).c_str(), mode));
}
int pt_rename(char const* from, char const* to, unsigned flags) {
  if (flags) return -EINVAL;
  return err(::rename(real(from).c_str(), real(to).c_str()));
}
int pt_getxattr(char const* path, char const* name, char* value, size_t size) {
  ssize_t const n = ::lgetxattr(real(path).c_str(), name, value, size);
  return n < 0 ? -errno : static_cast<int>(n);
}
int pt_setxattr(char const* path, char const* name, char const* value,
                size_t size, int flags) {
  return err(::lsetxattr(real(path).c_str(), name, value, size, flags));
}
int pt_listxattr(char const* path, char* list, size_t size) {
  ssize_t const n = ::llistxattr(real(path).c_str(), list, size);
  return n < 0 ? -errno : static_cast<int>(n);
}
int pt_removexattr(char const* path, char const* name) {
  return err(::lremovexattr(real(path).c_str(), name));
}
int pt_statfs(char const* path, struct statvfs* sv) {
  return err(::statvfs(real(path).c_str(), sv));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s SOURCE MOUNTPOINT [fuse options]\n",
                 argv[0]);
    return 2;
  }
  char resolved[PATH_MAX];
  if (!::realpath(argv[1], resolved)) {
    std::perror(argv[1]);
    return 1;
  }
  source_dir = resolved;
  fuse_operations ops{};
  ops.init = pt_init;
  ops.getattr = pt_getattr;
  ops.readdir = pt_readdir;
  ops.open = pt_open;
  ops.create = pt_create;
  ops.read = pt_read;
  ops.write = pt_write;
  ops.release = pt_release;
  ops.fsync = pt_fsync;
  ops.truncate = pt_truncate;
  ops.utimens = pt_utimens;
  ops.chmod = pt_chmod;
  ops.unlink = pt_unlink;
  ops.rmdir = pt_rmdir;
  ops.mkdir = pt_mkdir;
  ops.rename = pt_rename;
  ops.statfs = pt_statfs;
  ops.getxattr = pt_getxattr;
  ops.setxattr = pt_setxattr;
  ops.listxattr = pt_listxattr;
  ops.removexattr = pt_removexattr;
  // argv without SOURCE: fuse_main takes MOUNTPOINT and the options.
  for (int i = 1; i + 1 < argc; ++i) argv[i] = argv[i + 1];
  return fuse_main(argc - 1, argv, &ops, nullptr);
}
