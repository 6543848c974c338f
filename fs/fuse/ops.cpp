// The FUSE binding: libfuse3 low-level operations over mount_fs, and the
// session's life (mount, daemonize, multithreaded loop, unmount). The only
// file that includes <fuse_lowlevel.h> (FUSE_USE_VERSION is set by CMake on
// this target alone).
//
// Every operation runs its body inside reply_errno(): the body sends its one
// success reply last; whatever it throws becomes exactly one error reply
// (store_error -> its errno, std::system_error -> its code, bad_alloc ->
// ENOMEM, anything else -> EIO with a log line). No exception reaches
// libfuse.

#include <fcntl.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <system_error>
#include <vector>

#include "codec/choose/chooser.h"
#include "codec/core/thread_name.h"
#include "codec/search/search_chooser.h"
#include "fs/fuse/filesystem.h"
#include "fs/fuse/mount.h"
#include "fs/fuse/mount_lock.h"
#include "fs/fuse/readahead.h"
#include "fs/fuse/stop_signals.h"
#include "fs/pipeline/event_log.h"

namespace brevis::fs {
namespace {

constexpr double attr_timeout = 1.0;
// The kernel's readahead window asked for (and, as root, set: readahead.h):
// reads of up to 1 MiB (max_pages follows max_write), several in flight.
constexpr size_t readahead_bytes = 1u << 20;
// A read reply goes out as one writev of the chunks' pieces up to this many
// (well under IOV_MAX), else gathered into one buffer first.
constexpr size_t max_reply_pieces = 64;

struct context {
  mount_fs* fs = nullptr;
};

// Tells the kernel that a file's attributes changed behind its back (its
// stored size, once compressed or staged again). Attributes only (offset
// -1): the kernel then takes no inode lock and sends no request, so an
// open's handler may tell it too.
// Closed before the session unmounts: libfuse then leaves the session's fd
// as 0, and a notice sent after that would be written to whatever fd 0 is.
class kernel_notifier {
 public:
  explicit kernel_notifier(fuse_session* se) : se_(se) {}

  void attributes_changed(uint64_t ino) {
    std::shared_lock lk(mu_);
    // Best effort: -ENOENT only means the kernel no longer caches the inode.
    if (se_) fuse_lowlevel_notify_inval_inode(se_, ino, -1, 0);
  }
  /// Has the kernel write back the file's dirty pages and drop its cached
  /// ones, waiting for those writes to be answered (invalidating a dirty
  /// page launders it first). Not from a request handler.
  bool write_back(uint64_t ino) {
    std::shared_lock lk(mu_);
    if (!se_) return false;
    int const r = fuse_lowlevel_notify_inval_inode(se_, ino, 0, 0);
    // -ENOENT: the kernel no longer has the inode, nor pages of it.
    return r == 0 || r == -ENOENT;
  }
  void close() {
    std::unique_lock lk(mu_);
    se_ = nullptr;
  }

 private:
  // Shared by notices, which may wait on the loop's answers (write_back):
  // a worker's notice must not wait behind them. close() waits for all.
  std::shared_mutex mu_;
  fuse_session* se_;
};

mount_fs& fs_of(fuse_req_t req) {
  // libfuse starts its workers itself: each names itself at its first
  // request that asks for the filesystem (all but RELEASEDIR do).
  thread_local bool const named =
      (codec::name_this_thread("brevis-fuse"), true);
  (void)named;
  return *static_cast<context*>(fuse_req_userdata(req))->fs;
}

caller caller_of(fuse_req_t req) {
  fuse_ctx const* c = fuse_req_ctx(req);
  return caller{
      static_cast<uint32_t>(c->uid), static_cast<uint32_t>(c->gid), {}};
}

// The caller's supplementary groups (libfuse reads them from /proc: only
// where a decision needs them). None when they cannot be read.
std::vector<uint32_t> groups_of(fuse_req_t req) {
  std::vector<gid_t> g(64);
  int n = fuse_req_getgroups(req, static_cast<int>(g.size()), g.data());
  if (n > static_cast<int>(g.size())) {
    g.resize(static_cast<size_t>(n));
    n = fuse_req_getgroups(req, static_cast<int>(g.size()), g.data());
  }
  if (n <= 0) return {};
  g.resize(std::min(g.size(), static_cast<size_t>(n)));
  return {g.begin(), g.end()};
}

// Whom an operation is about: a name in a directory, or an inode by its
// number. An inode the store no longer has (its last name went by unlink
// or by a rename over it while the kernel still held it) is ESTALE, not
// ENOENT: the kernel then looks the name up again and retries. A name
// replaced by rename must never look missing (open, stat and getxattr of
// it, racing the rename of a new file over it, failed with ENOENT).
enum class subject { name, inode };

// Logs an operation that failed with EIO (damage found, or a fault of
// ours): to the mount's log, which a daemon's stderr is not. At most a few
// lines a second: a damaged file read in a loop (readahead, retries) must
// not flood it; the next line says how many were left out.
void log_failure(char const* op, char const* what) {
  constexpr unsigned lines_per_second = 10;
  static std::mutex mu;
  static int64_t second = -1;
  static unsigned lines = 0;
  static uint64_t left_out = 0;
  int64_t const now = std::chrono::duration_cast<std::chrono::seconds>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
  std::string line;
  {
    std::lock_guard lk(mu);
    if (now != second) second = now, lines = 0;
    if (lines == lines_per_second) {
      ++left_out;
      return;
    }
    ++lines;
    line = std::string(op) + ": " + what;
    if (left_out > 0) {
      line += " (" + std::to_string(left_out) + " more errors left out)";
      left_out = 0;
    }
  }
  log_event(log_level::error, line);
}

template <typename F>
void reply_errno(fuse_req_t req, char const* op, F&& body,
                 subject about = subject::name) noexcept {
  int err = 0;
  try {
    err = body();
  } catch (store_error const& e) {
    err = e.errno_value();
    if (err == EIO) log_failure(op, e.what());
  } catch (std::system_error const& e) {
    err = e.code().value();
  } catch (std::bad_alloc const&) {
    err = ENOMEM;
  } catch (std::exception const& e) {
    log_failure(op, e.what());
    err = EIO;
  } catch (...) {
    log_failure(op, "unknown exception");
    err = EIO;
  }
  if (err == ENOENT && about == subject::inode) err = ESTALE;
  if (err != 0) fuse_reply_err(req, err);
}

fuse_entry_param entry_of(struct stat const& st) {
  fuse_entry_param e{};
  e.ino = st.st_ino;
  e.generation = 1;
  e.attr = st;
  e.attr_timeout = attr_timeout;
  e.entry_timeout = attr_timeout;
  return e;
}

// Replies an entry, giving the kernel a reference to its inode: counted
// first (the kernel's FORGET may come at once), and given back when the
// reply did not go out (an interrupted request), as the kernel then holds
// nothing. A negative entry (inode 0) gives no reference.
void reply_entry(fuse_req_t req, fuse_entry_param const& e) {
  mount_fs& fs = fs_of(req);
  if (e.ino != 0) fs.looked_up(e.ino);
  if (fuse_reply_entry(req, &e) != 0 && e.ino != 0) fs.forget(e.ino, 1);
}

std::string_view sv(char const* s) { return s ? std::string_view(s) : ""; }

// A directory entry's name. The kernel passes FUSE names of up to 1024
// bytes; like ext4, names past NAME_MAX are ENAMETOOLONG (the store would
// call them invalid, EINVAL, which mv reads as a move into itself).
std::string_view entry_name(char const* s) {
  std::string_view const n = sv(s);
  if (n.size() > NAME_MAX) {
    throw std::system_error(ENAMETOOLONG, std::generic_category(),
                            "name too long");
  }
  return n;
}

// ------------------------------------------------------------------- ops

void op_init(void* userdata, fuse_conn_info* conn) {
  if (conn->capable & FUSE_CAP_WRITEBACK_CACHE) {
    conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    static_cast<context*>(userdata)->fs->kernel_keeps_times(true);
  }
  if (conn->capable & FUSE_CAP_PARALLEL_DIROPS) {
    conn->want |= FUSE_CAP_PARALLEL_DIROPS;
  }
  // Replies from a staged copy's descriptor, and writes into it, go through
  // a pipe (splice): the bytes are not copied through our memory. libfuse
  // falls back to copying where the pipe cannot grow to a 1 MiB request
  // (above /proc/sys/fs/pipe-max-size without CAP_SYS_RESOURCE). Splicing
  // requests in (SPLICE_READ) is libfuse's default with write_buf.
  if (conn->capable & FUSE_CAP_SPLICE_WRITE) {
    conn->want |= FUSE_CAP_SPLICE_WRITE;
  }
  conn->max_write = 1u << 20;
  conn->max_readahead = readahead_bytes;
}

void op_lookup(fuse_req_t req, fuse_ino_t parent, char const* name) {
  reply_errno(req, "lookup", [&] {
    try {
      fuse_entry_param const e =
          entry_of(fs_of(req).lookup(parent, entry_name(name)));
      return reply_entry(req, e), 0;
    } catch (store_error const& err) {
      if (err.code() != store_errc::not_found) throw;
      // A negative entry the kernel may cache.
      fuse_entry_param e{};
      e.entry_timeout = attr_timeout;
      return reply_entry(req, e), 0;
    }
  });
}

// Inode numbers are the store's and live as long as the file; a forget
// gives back references (reply_entry), and the last one ends what the
// mount keeps of a removed inode (mount_fs::getattr).
void op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup) {
  fs_of(req).forget(ino, nlookup);
  fuse_reply_none(req);
}

void op_forget_multi(fuse_req_t req, size_t count, fuse_forget_data* forgets) {
  for (size_t i = 0; i < count; ++i) {
    fs_of(req).forget(forgets[i].ino, forgets[i].nlookup);
  }
  fuse_reply_none(req);
}

void op_getattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  reply_errno(
      req, "getattr",
      [&] {
        struct stat const st = fs_of(req).getattr(ino);
        return fuse_reply_attr(req, &st, attr_timeout), 0;
      },
      subject::inode);
}

int64_t ts_ns(timespec const& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
                fuse_file_info*) {
  reply_errno(
      req, "setattr",
      [&] {
        setattr_request r;
        if (to_set & FUSE_SET_ATTR_MODE) r.mode = attr->st_mode;
        if (to_set & FUSE_SET_ATTR_UID) r.uid = attr->st_uid;
        if (to_set & FUSE_SET_ATTR_GID) r.gid = attr->st_gid;
        if (to_set & FUSE_SET_ATTR_SIZE) {
          r.size = static_cast<uint64_t>(attr->st_size);
        }
        if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
          timespec ts{};
          ::clock_gettime(CLOCK_REALTIME, &ts);
          r.mtime_ns = ts_ns(ts);
        } else if (to_set & FUSE_SET_ATTR_MTIME) {
          r.mtime_ns = ts_ns(attr->st_mtim);
        }
        // The kernel states the ctime where it keeps the times (the
        // writeback cache): what it showed is what a remount shows.
        if (to_set & FUSE_SET_ATTR_CTIME) r.ctime_ns = ts_ns(attr->st_ctim);
        // atime is not kept (reads report mtime).
        // A new size: reads wait until the kernel has it (resize_gate.h).
        resize_gate::hold resizing;
        struct stat const st = fs_of(req).setattr(ino, r, &resizing);
        return fuse_reply_attr(req, &st, attr_timeout), 0;
      },
      subject::inode);
}

void op_readlink(fuse_req_t req, fuse_ino_t ino) {
  reply_errno(
      req, "readlink",
      [&] {
        std::string const target = fs_of(req).readlink(ino);
        return fuse_reply_readlink(req, target.c_str()), 0;
      },
      subject::inode);
}

void op_mknod(fuse_req_t req, fuse_ino_t parent, char const* name, mode_t mode,
              dev_t) {
  reply_errno(req, "mknod", [&] {
    mount_fs& fs = fs_of(req);
    if (!S_ISREG(mode)) {
      fuse_entry_param const e = entry_of(
          fs.mknod_special(parent, entry_name(name), mode, caller_of(req)));
      return reply_entry(req, e), 0;
    }
    struct stat const st =
        fs.create(parent, entry_name(name), mode, O_WRONLY, caller_of(req));
    fs.release(st.st_ino, true);
    fuse_entry_param const e = entry_of(fs.getattr(st.st_ino));
    return reply_entry(req, e), 0;
  });
}

void op_mkdir(fuse_req_t req, fuse_ino_t parent, char const* name,
              mode_t mode) {
  reply_errno(req, "mkdir", [&] {
    fuse_entry_param const e = entry_of(
        fs_of(req).mkdir(parent, entry_name(name), mode, caller_of(req)));
    return reply_entry(req, e), 0;
  });
}

void op_unlink(fuse_req_t req, fuse_ino_t parent, char const* name) {
  reply_errno(req, "unlink", [&] {
    fs_of(req).unlink(parent, entry_name(name));
    return fuse_reply_err(req, 0), 0;
  });
}

void op_rmdir(fuse_req_t req, fuse_ino_t parent, char const* name) {
  reply_errno(req, "rmdir", [&] {
    fs_of(req).rmdir(parent, entry_name(name));
    return fuse_reply_err(req, 0), 0;
  });
}

void op_symlink(fuse_req_t req, char const* link, fuse_ino_t parent,
                char const* name) {
  reply_errno(req, "symlink", [&] {
    fuse_entry_param const e = entry_of(
        fs_of(req).symlink(parent, entry_name(name), sv(link), caller_of(req)));
    return reply_entry(req, e), 0;
  });
}

void op_rename(fuse_req_t req, fuse_ino_t parent, char const* name,
               fuse_ino_t newparent, char const* newname, unsigned flags) {
  reply_errno(req, "rename", [&] {
    if (flags & ~(RENAME_NOREPLACE | RENAME_EXCHANGE)) return EINVAL;
    unsigned f = 0;
    if (flags & RENAME_NOREPLACE) f |= store::rename_noreplace;
    if (flags & RENAME_EXCHANGE) f |= store::rename_exchange;
    fs_of(req).rename(parent, entry_name(name), newparent, entry_name(newname),
                      f);
    return fuse_reply_err(req, 0), 0;
  });
}

void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
             char const* newname) {
  reply_errno(
      req, "link",
      [&] {
        fuse_entry_param const e =
            entry_of(fs_of(req).link(ino, newparent, entry_name(newname)));
        return reply_entry(req, e), 0;
      },
      subject::inode);
}

void op_open(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  reply_errno(
      req, "open",
      [&] {
        mount_fs& fs = fs_of(req);
        caller who = caller_of(req);
        if (fi->flags & O_TRUNC) who.groups = groups_of(req);
        // The kernel leaves an O_TRUNC to this open (atomic_o_trunc): reads
        // wait until it has the new size (resize_gate.h).
        resize_gate::hold resizing;
        bool const writer = fs.open(ino, fi->flags, who, &resizing);
        fi->fh = writer ? 1 : 0;
        // Contents change only through this mount, so cached pages stay valid:
        // writes and truncates go through the kernel's page cache itself, and
        // compressing or restaging a file keeps its bytes, so no page ever
        // needs invalidating (mount_read_test checks held and fresh readers).
        fi->keep_cache = 1;
        if (fuse_reply_open(req, fi) != 0) fs.release(ino, writer);
        return 0;
      },
      subject::inode);
}

void op_create(fuse_req_t req, fuse_ino_t parent, char const* name, mode_t mode,
               fuse_file_info* fi) {
  reply_errno(req, "create", [&] {
    mount_fs& fs = fs_of(req);
    fuse_entry_param const e = entry_of(
        fs.create(parent, entry_name(name), mode, fi->flags, caller_of(req)));
    fi->fh = 1;
    fi->keep_cache = 1;
    fs.looked_up(e.ino);
    if (fuse_reply_create(req, &e, fi) != 0) {
      fs.release(e.ino, true);
      fs.forget(e.ino, 1);
    }
    return 0;
  });
}

void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
             fuse_file_info*) {
  reply_errno(
      req, "read",
      [&] {
        // Straight from the decoded chunks (kept alive until the reply is
        // written): no buffer to fill and copy again.
        mount_fs::read_data const d = fs_of(req).read_view(
            ino, static_cast<uint64_t>(off), size, /*from_fd=*/true);
        if (d.fd.get() >= 0) {
          // libfuse reads it, up to the end of the file (spliced where it
          // can), and replies with an error if the read fails.
          fuse_bufvec from = FUSE_BUFVEC_INIT(d.size);
          from.buf[0].flags =
              static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD | FUSE_BUF_FD_SEEK);
          from.buf[0].fd = d.fd.get();
          from.buf[0].pos = off;
          return fuse_reply_data(req, &from, fuse_buf_copy_flags{}), 0;
        }
        if (d.pieces.empty()) return fuse_reply_buf(req, nullptr, 0), 0;
        if (d.pieces.size() <= max_reply_pieces) {
          return fuse_reply_iov(req, d.pieces.data(),
                                static_cast<int>(d.pieces.size())),
                 0;
        }
        // Many tiny chunks (small tensors): writev takes at most IOV_MAX
        // pieces, and a reply that fails to go out leaves the reader hanging.
        std::unique_ptr<char[]> buf(new char[d.size]);
        size_t at = 0;
        for (iovec const& p : d.pieces) {
          std::memcpy(buf.get() + at, p.iov_base, p.iov_len);
          at += p.iov_len;
        }
        return fuse_reply_buf(req, buf.get(), at), 0;
      },
      subject::inode);
}

// A write whose pages libfuse may hold in a pipe (spliced from the kernel):
// they are spliced on into the staged copy.
void op_write_buf(fuse_req_t req, fuse_ino_t ino, fuse_bufvec* in, off_t off,
                  fuse_file_info* /*fi*/) {
  reply_errno(
      req, "write",
      [&] {
        size_t const n = fs_of(req).write_with(
            ino, static_cast<uint64_t>(off), fuse_buf_size(in),
            [&](int fd, uint64_t at, size_t len) -> ssize_t {
              fuse_bufvec to = FUSE_BUFVEC_INIT(len);
              to.buf[0].flags = static_cast<fuse_buf_flags>(FUSE_BUF_IS_FD |
                                                            FUSE_BUF_FD_SEEK);
              to.buf[0].fd = fd;
              to.buf[0].pos = static_cast<off_t>(at);
              // Advances `in` past what it copied, so a retry goes on.
              return fuse_buf_copy(&to, in, fuse_buf_copy_flags{});
            });
        return fuse_reply_write(req, n), 0;
      },
      subject::inode);
}

// release() records and queues; a close is told of a failed write here,
// whichever descriptor the kernel gave the failure to first.
void op_flush(fuse_req_t req, fuse_ino_t ino, fuse_file_info* /*fi*/) {
  fuse_reply_err(req, fs_of(req).flush(ino));
}

void op_release(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  reply_errno(
      req, "release",
      [&] {
        fs_of(req).release(ino, fi->fh == 1);
        return fuse_reply_err(req, 0), 0;
      },
      subject::inode);
}

void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  reply_errno(
      req, "fsync",
      [&] {
        fs_of(req).fsync(ino, datasync != 0);
        return fuse_reply_err(req, 0), 0;
      },
      subject::inode);
}

// An open directory: offsets index a listing of it, so they stay stable
// across the calls that read it. A read from offset 0 after the first
// (rewinddir, or a seek back to the start) lists the directory again, as
// POSIX asks.
struct dir_handle {
  std::mutex mu;
  std::vector<mount_fs::entry> entries;
  bool served = false;
};

void op_opendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  reply_errno(
      req, "opendir",
      [&] {
        auto h = std::make_unique<dir_handle>();
        h->entries = fs_of(req).readdir(ino);
        fi->fh = reinterpret_cast<uint64_t>(h.get());
        // The kernel's handle owns it from here, until releasedir.
        if (fuse_reply_open(req, fi) == 0) (void)h.release();
        return 0;
      },
      subject::inode);
}

void op_releasedir(fuse_req_t req, fuse_ino_t /*ino*/, fuse_file_info* fi) {
  // fh is the pointer opendir stored (FUSE's handle is an integer).
  // NOLINTNEXTLINE(performance-no-int-to-ptr)
  std::unique_ptr<dir_handle> const h(reinterpret_cast<dir_handle*>(fi->fh));
  fuse_reply_err(req, 0);
}

// A directory's entries are in the index: syncing it makes them durable
// (creates and links commit without a sync).
void op_fsyncdir(fuse_req_t req, fuse_ino_t /*ino*/, int /*datasync*/,
                 fuse_file_info* /*fi*/) {
  reply_errno(
      req, "fsyncdir",
      [&] {
        fs_of(req).sync_index();
        return fuse_reply_err(req, 0), 0;
      },
      subject::inode);
}

void do_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                fuse_file_info* fi, bool plus) {
  reply_errno(req, "readdir", [&] {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the pointer opendir stored
    auto& h = *reinterpret_cast<dir_handle*>(fi->fh);
    mount_fs& fs = fs_of(req);
    std::vector<char> buf(size);
    size_t pos = 0;
    // The inodes of the entries given (readdirplus): each is a reference
    // the kernel takes, as a lookup's.
    std::vector<uint64_t> given;
    {
      // Released before the reply: once it is out, the kernel may close
      // the directory, and releasedir frees the handle.
      std::lock_guard lk(h.mu);
      if (off == 0 && h.served) h.entries = fs.readdir(ino);
      h.served = true;
      for (auto i = static_cast<size_t>(off); i < h.entries.size(); ++i) {
        mount_fs::entry const& en = h.entries[i];
        size_t need = 0;
        uint64_t held = 0;  // the inode given a reference
        auto const next = static_cast<off_t>(i + 1);
        if (plus) {
          fuse_entry_param e = entry_of(en.st);
          if (en.name == "." || en.name == "..") {
            e.ino = 0;  // no lookup ref
          } else {
            // Each entry the kernel is given here becomes a cached name: it
            // must be the name's current inode and attributes, not the
            // listing's. A name removed since the listing is left out (a
            // stale entry made open(O_CREAT) of that name fail with ENOENT).
            try {
              e = entry_of(fs.lookup(ino, en.name));
            } catch (store_error const& err) {
              if (err.code() != store_errc::not_found) throw;
              continue;
            }
          }
          need = fuse_add_direntry_plus(req, buf.data() + pos, size - pos,
                                        en.name.c_str(), &e, next);
          held = e.ino;
        } else {
          need = fuse_add_direntry(req, buf.data() + pos, size - pos,
                                   en.name.c_str(), &en.st, next);
        }
        if (need > size - pos) break;
        pos += need;
        if (held != 0) given.push_back(held);
      }
    }
    for (uint64_t i : given) fs.looked_up(i);
    if (fuse_reply_buf(req, buf.data(), pos) != 0) {
      for (uint64_t i : given) fs.forget(i, 1);
    }
    return 0;
  });
}

void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                fuse_file_info* fi) {
  do_readdir(req, ino, size, off, fi, false);
}

void op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    fuse_file_info* fi) {
  do_readdir(req, ino, size, off, fi, true);
}

void op_statfs(fuse_req_t req, fuse_ino_t) {
  reply_errno(req, "statfs", [&] {
    struct statvfs const sv = fs_of(req).statfs();
    return fuse_reply_statfs(req, &sv), 0;
  });
}

void op_setxattr(fuse_req_t req, fuse_ino_t ino, char const* name,
                 char const* value, size_t size, int flags) {
  reply_errno(
      req, "setxattr",
      [&] {
        int f = 0;
        if (flags & XATTR_CREATE) f |= store::xattr_create;
        if (flags & XATTR_REPLACE) f |= store::xattr_replace;
        fs_of(req).setxattr(ino, sv(name), std::string_view(value, size), f);
        return fuse_reply_err(req, 0), 0;
      },
      subject::inode);
}

// getxattr and listxattr: size 0 asks for the length.
int reply_sized(fuse_req_t req, std::string const& v, size_t size) {
  if (size == 0) return fuse_reply_xattr(req, v.size()), 0;
  if (v.size() > size) return ERANGE;
  return fuse_reply_buf(req, v.data(), v.size()), 0;
}

void op_getxattr(fuse_req_t req, fuse_ino_t ino, char const* name,
                 size_t size) {
  reply_errno(
      req, "getxattr",
      [&] {
        return reply_sized(req, fs_of(req).getxattr(ino, sv(name)), size);
      },
      subject::inode);
}

void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  reply_errno(
      req, "listxattr",
      [&] {
        std::string all;
        for (std::string const& n : fs_of(req).listxattr(ino, caller_of(req))) {
          all += n;
          all += '\0';
        }
        return reply_sized(req, all, size);
      },
      subject::inode);
}

void op_removexattr(fuse_req_t req, fuse_ino_t ino, char const* name) {
  reply_errno(
      req, "removexattr",
      [&] {
        fs_of(req).removexattr(ino, sv(name));
        return fuse_reply_err(req, 0), 0;
      },
      subject::inode);
}

void op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset,
                  off_t length, fuse_file_info*) {
  reply_errno(
      req, "fallocate",
      [&] {
        fs_of(req).fallocate(ino, mode, static_cast<uint64_t>(offset),
                             static_cast<uint64_t>(length));
        return fuse_reply_err(req, 0), 0;
      },
      subject::inode);
}

fuse_lowlevel_ops make_ops() {
  fuse_lowlevel_ops o{};
  o.init = op_init;
  o.lookup = op_lookup;
  o.forget = op_forget;
  o.forget_multi = op_forget_multi;
  o.getattr = op_getattr;
  o.setattr = op_setattr;
  o.readlink = op_readlink;
  o.mknod = op_mknod;
  o.mkdir = op_mkdir;
  o.unlink = op_unlink;
  o.rmdir = op_rmdir;
  o.symlink = op_symlink;
  o.rename = op_rename;
  o.link = op_link;
  o.open = op_open;
  o.create = op_create;
  o.read = op_read;
  o.write_buf = op_write_buf;
  o.flush = op_flush;
  o.release = op_release;
  o.fsync = op_fsync;
  o.opendir = op_opendir;
  o.releasedir = op_releasedir;
  o.fsyncdir = op_fsyncdir;
  o.readdir = op_readdir;
  o.readdirplus = op_readdirplus;
  o.statfs = op_statfs;
  o.setxattr = op_setxattr;
  o.getxattr = op_getxattr;
  o.listxattr = op_listxattr;
  o.removexattr = op_removexattr;
  o.fallocate = op_fallocate;
  // No getlk/setlk/flock: the kernel keeps POSIX and BSD locks locally.
  // No lseek: the kernel sends SEEK_DATA and SEEK_HOLE without writing back
  // the pages it caches for the file first, so a staged copy's holes may
  // still be data in flight; left to the kernel, the answer is data up to
  // the size it knows, never a hole over data.
  return o;
}

std::string absolute(std::string const& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) {
    throw std::system_error(errno, std::generic_category(), p);
  }
  return buf;
}

}  // namespace

int run_mount(mount_options const& opt) {
  std::string store_dir, mountpoint, mountpoint_real;
  std::unique_ptr<mount_lock> lock;
  try {
    // Locked before the store is opened, so a second mount touches
    // nothing. The store is checked (and created) before the mount, so its
    // errors reach the terminal; the daemon opens it again after the fork.
    // Private when new (its parents as the umask makes them).
    std::filesystem::path top(opt.store);
    if (!top.has_filename()) top = top.parent_path();  // "store/"
    if (top.has_parent_path()) {
      std::filesystem::create_directories(top.parent_path());
    }
    if (::mkdir(opt.store.c_str(), 0700) != 0 && errno != EEXIST) {
      throw std::system_error(errno, std::generic_category(), opt.store);
    }
    secure_store_directory(opt.store);  // before a file is made in it
    lock = std::make_unique<mount_lock>(absolute(opt.store));
    // Opened before the fork, so a bad log path reaches the terminal.
    open_event_log(!opt.log.empty()              ? opt.log
                   : opt.foreground || opt.debug ? "stderr"
                                                 : "syslog");
    {
      store s(opt.store);
      for (open_finding const& f : findings(s.report(), false)) {
        log_event(f.damage ? log_level::error : log_level::info, f.line);
      }
    }
    store_dir = absolute(opt.store);
    mountpoint = absolute(opt.mountpoint);
    // Resolved now: once mounted, a stat of it waits for the loop.
    std::error_code ec;
    mountpoint_real = std::filesystem::canonical(opt.mountpoint, ec).string();
  } catch (std::exception const& e) {
    std::fprintf(stderr, "brevis: mount: %s\n", e.what());
    return 1;
  }

  std::string mount_opts = "default_permissions,fsname=brevis,subtype=brevis";
  if (opt.allow_other) mount_opts += ",allow_other";
  std::vector<std::string> argv_s = {"brevis", "-o", mount_opts};
  if (opt.debug) argv_s.push_back("-d");
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());

  context ctx;
  fuse_lowlevel_ops const ops = make_ops();
  fuse_session* se = fuse_session_new(&args, &ops, sizeof ops, &ctx);
  if (!se) {
    std::fprintf(stderr, "brevis: mount: cannot start a FUSE session\n");
    return 1;
  }
  // libfuse installs its handlers only over the defaults. SIGINT and
  // SIGTERM stop the mount even where they came ignored (a script's
  // background job ignores SIGINT); SIGHUP ignored stays ignored, as nohup
  // asks (a terminal's hangup unmounted a `nohup brevis mount -f`).
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction now {};
    bool const ignored =
        ::sigaction(sig, nullptr, &now) == 0 && now.sa_handler == SIG_IGN;
    if (sig != SIGHUP || !ignored) std::signal(sig, SIG_DFL);
  }
  if (fuse_set_signal_handlers(se) != 0 ||
      fuse_session_mount(se, mountpoint.c_str()) != 0) {
    std::fprintf(stderr, "brevis: mount: cannot mount on %s\n",
                 mountpoint.c_str());
    fuse_session_destroy(se);
    return 1;
  }
  // Before the loop answers INIT, which only ever lowers the window.
  if (!mountpoint_real.empty()) {
    raise_mount_readahead(mountpoint_real, readahead_bytes);
  }
  fuse_daemonize(opt.foreground ? 1 : 0);
  lock->note_pid();

  // The stop signals' handlers (fs/fuse/stop_signals.h) set the session's
  // exit flag, or wake a thread that sets it; fuse_session_loop_mt notices
  // it when a signal interrupts its sem_wait on this thread. The kernel may
  // hand a process-wide signal to any thread that does not block it (e.g. one
  // that just unblocked signals after a pthread_create, as glibc and ASan do),
  // and handled on one of our threads it woke nothing: the daemon hung until
  // the next request came in. So our threads (the compression queue, prefetch,
  // and every thread they start: masks are inherited) block these signals; this
  // thread unblocks them when it enters the loop. libfuse blocks them in its
  // own workers.
  sigset_t stop_set;
  sigemptyset(&stop_set);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_set, sig);
  pthread_sigmask(SIG_BLOCK, &stop_set, nullptr);
  int rc = 0;
  kernel_notifier notifier(se);
  try {
    store s(store_dir);
    auto chooser = codec::make_store_chooser();
    mount_fs::options fo;
    fo.quiet_ms = opt.quiet_ms;
    fo.compress = opt.compress;
    fo.cache_bytes = opt.cache_bytes;
    fo.prefetch = opt.prefetch;
    fo.pipeline_memory = opt.pipeline_memory;
    fo.attributes_changed = [&notifier](uint64_t ino) {
      notifier.attributes_changed(ino);
    };
    mount_fs fs(s, *chooser, fo);
    ctx.fs = &fs;
    fs.start();
    fuse_loop_config* cfg = fuse_loop_cfg_create();
    if (opt.threads) fuse_loop_cfg_set_max_threads(cfg, opt.threads);
    // At a stop signal, what the kernel holds of files still open for
    // writing is written back before the session ends (closed files have
    // nothing left: a close writes back and waits). Invalidating a file's
    // pages launders the dirty ones and waits for their answers. syncfs
    // did not wait for them on 6.18 (a held file's bytes were lost in 8
    // runs in 100 under load), and where the kernel copies pages to write
    // them back (before 6.16 or so), pages already on their way are clean
    // and the invalidation does not wait for them: so the loop serves on
    // until writes have been quiet a moment.
    auto write_back = [&](std::function<bool()> const& hurry) {
      std::vector<uint64_t> const held = fs.begin_write_back();
      size_t failed = 0;
      for (uint64_t ino : held) {
        if (hurry()) return;
        failed += !notifier.write_back(ino);
      }
      if (failed != 0) {
        log_event(log_level::error,
                  "stopping: the kernel's cached writes of " +
                      std::to_string(failed) +
                      " files still open could not be asked for");
      }
      if (!held.empty()) fs.wait_for_quiet_writes(hurry);
    };
    // Its flushing thread starts with the signals blocked, as ours must.
    stop_signals stopping(se, write_back);
    // A signal that came meanwhile is taken here and starts the stop.
    pthread_sigmask(SIG_UNBLOCK, &stop_set, nullptr);
    rc = fuse_session_loop_mt(se, cfg);
    stopping.loop_ended();
    fuse_loop_cfg_destroy(cfg);
    // Stop serving first, then stop taking work; what was not compressed
    // stays staged and the next mount queues it again.
    notifier.close();
    fuse_session_unmount(se);
    fs.shutdown();
    try {
      if (size_t const n = fs.release_all_at_stop()) {
        log_event(log_level::info,
                  "files released at the stop, as the kernel's last "
                  "release of each had not come: " +
                      std::to_string(n));
      }
    } catch (std::exception const& e) {
      log_event(log_level::error,
                std::string("releasing the files still open at the stop: ") +
                    e.what() + " (the next mount tidies them)");
    }
    ctx.fs = nullptr;
  } catch (std::exception const& e) {
    log_event(log_level::error, e.what());
    notifier.close();
    fuse_session_unmount(se);
    rc = 1;
  }
  fuse_remove_signal_handlers(se);
  fuse_session_destroy(se);
  fuse_opt_free_args(&args);
  // libfuse returns the signal number after SIGTERM/SIGINT/SIGHUP: a
  // requested, clean stop.
  return rc >= 0 ? 0 : 1;
}

int run_unmount(std::string const& mountpoint, bool lazy) {
  pid_t const pid = ::fork();
  if (pid < 0) {
    std::perror("brevis: unmount: fork");
    return 1;
  }
  if (pid == 0) {
    if (lazy) {
      ::execlp("fusermount3", "fusermount3", "-u", "-z", mountpoint.c_str(),
               static_cast<char*>(nullptr));
    } else {
      ::execlp("fusermount3", "fusermount3", "-u", mountpoint.c_str(),
               static_cast<char*>(nullptr));
    }
    std::perror("brevis: unmount: fusermount3");
    ::_exit(127);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}

}  // namespace brevis::fs
