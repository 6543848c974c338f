#include "fs/fuse/filesystem.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <system_error>
#include <thread>

#include "codec/dsl/program.h"
#include "fs/pipeline/compress_graph.h"
#include "fs/pipeline/event_log.h"
#include "fs/store/pack.h"

namespace brevis::fs {

namespace {

constexpr std::string_view brevis_prefix = "user.brevis.";
constexpr char const* virtual_xattrs[] = {
    "user.brevis.state", "user.brevis.logical", "user.brevis.stored",
    "user.brevis.ratio", "user.brevis.programs"};
// Linux refuses xattr values past 64 KiB; the programs list stops short.
constexpr size_t max_xattr_text = 60000;

[[noreturn]] void sys_fail(int err, std::string const& what) {
  throw std::system_error(err, std::generic_category(), what);
}

// The attribute namespaces the mount keeps: user.* and trusted.*. As ext4
// answers, a name with nothing after its namespace is EINVAL, and an
// unknown namespace EOPNOTSUPP. security.* and system.* (ACLs) carry policy
// the mount does not enforce: none is ever set (EOPNOTSUPP), so reading or
// removing one finds nothing (ENODATA, as on ext4 for a file without one).
enum class xattr_use { read, write };
void check_xattr_name(std::string_view name, xattr_use use) {
  constexpr std::array<std::string_view, 2> kept = {"user.", "trusted."};
  for (std::string_view const space : kept) {
    if (name.starts_with(space)) {
      if (name.size() == space.size()) sys_fail(EINVAL, "attribute name");
      return;
    }
  }
  if (use == xattr_use::read &&
      (name.starts_with("security.") || name.starts_with("system."))) {
    store_fail(store_errc::no_attr, "no attribute");
  }
  sys_fail(EOPNOTSUPP, "attribute namespace");
}

int64_t now_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/// For the stop's quiet wait: a clock that does not jump.
int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

timespec to_ts(int64_t ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1000000000);
  ts.tv_nsec = static_cast<long>(ns % 1000000000);
  if (ts.tv_nsec < 0) {
    ts.tv_nsec += 1000000000;
    --ts.tv_sec;
  }
  return ts;
}

int64_t from_ts(timespec const& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool for_writing(int flags) {
  return (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) != 0;
}

void log_error(uint64_t ino, std::string const& what) {
  log_event(log_level::error, "inode " + std::to_string(ino) + ": " + what);
}

// A staged copy that lost a write carries the sticky bit (which Linux
// ignores on files), so the loss outlives the mount (FORMAT.md S.1): an
// fchmod needs no space, where a record or a marker file could not be
// written on the full disk that caused it.
constexpr mode_t staged_mode = S_IRUSR | S_IWUSR;
void mark_lost_write(int fd, bool lost) {
  (void)::fchmod(fd, staged_mode | (lost ? S_ISVTX : 0));
}
bool lost_a_write(std::string const& staged_path) {
  struct stat st {};
  return ::stat(staged_path.c_str(), &st) == 0 && (st.st_mode & S_ISVTX) != 0;
}

constexpr int64_t unknown_time = INT64_MIN;

}  // namespace

struct mount_fs::node {
  explicit node(uint64_t i) : ino(i) {}
  uint64_t const ino;

  std::mutex mu;  // guards the fields up to `name`
  std::condition_variable cv;
  unsigned writers = 0;
  bool compressing = false;
  // No name left, kept while open or (after a rename over it) while the
  // kernel holds it.
  bool orphan = false;
  bool dropping = false;  // an orphan being dropped
  bool gone = false;      // the store dropped it; nothing opens it again
  std::string name;       // last known name (helps the parser)
  // Changed under mu; read without it by the store's keep callback (it
  // runs under the store's writer lock, which ranks after mu).
  std::atomic<unsigned> opens{0};
  std::atomic<bool> cancel{false};
  // Whether fsync has synced staging/ since this node's copy was created:
  // once is enough for its entry (a copy staged again is renamed into
  // place with a sync).
  std::atomic<bool> entry_synced{false};
  // The first failed write of the staged copy (an errno; 0: none). With the
  // kernel's writeback cache, write() has long returned when the kernel
  // writes its pages here, and the kernel reports a failure to the first
  // close or fsync of any descriptor of the file (a forked child's, a
  // reader's) and then forgets it: the writer's own close succeeded, and
  // the bytes lost were compressed as the file. Kept, it is the answer to
  // every flush and fsync, and keeps the file from being compressed, until
  // the file is truncated to nothing (rewritten whole) or goes.
  std::atomic<int> write_error{0};
  // The file's mtime as the kernel last stated it (unknown_time: not
  // known): the staged copy's when it was opened, then each setattr's.
  // With the writeback cache the last writer's close records it (see
  // mount_fs::kernel_keeps_times); the copy's own moved with every write.
  // The ctime likewise, from the setattrs alone (a copy keeps none).
  // Read and written under mu only.
  int64_t mtime_ns = unknown_time;
  int64_t ctime_ns = unknown_time;
  void remember_times() {
    struct stat st {};
    if (fd >= 0 && ::fstat(fd, &st) == 0) mtime_ns = from_ts(st.st_mtim);
    ctime_ns = unknown_time;
  }
  // The store took `ctime` while the file may be open for writing (a
  // chmod, say): the last writer's close must not record an older one.
  void note_ctime(int64_t ctime) {
    if (writers > 0) ctime_ns = ctime;
  }
  resize_gate gate;  // reads against truncates, until their replies
  // Keeps reads of `self` off until the hold goes (resize_gate.h). Taken
  // once no compression runs (mu held): a truncate waiting for one to
  // cancel would otherwise hold every read of the file that long.
  static resize_gate::hold hold_reads_off(std::shared_ptr<node> const& self) {
    return resize_gate::enter_resize(
        std::shared_ptr<resize_gate>(self, &self->gate));
  }
  std::shared_mutex io;  // shared: use of fd; exclusive: state changes
  bool staged = false;
  int fd = -1;       // the staged copy, open while the file is open and staged
  uint64_t gen = 0;  // the cache's generation of the stored bytes (io)

  std::mutex map_mu;  // guards the chunk map and the read pattern
  std::shared_ptr<std::vector<store::chunk_span> const> map;
  uint64_t map_gen = 0;
  uint64_t seq_end = 0;    // the furthest a read of the run has reached
  uint64_t seq_start = 0;  // where the current sequential run began
  uint64_t run = 0;        // counts the runs (a new one: reset)
  // The run's bytes before `served_to` have all been read; the reads that
  // ended past it with a gap before them are `served_ahead` (start -> end),
  // at most 16 (kept per inode while the kernel caches it: 16 map nodes).
  uint64_t served_to = 0;
  std::map<uint64_t, uint64_t> served_ahead;
  size_t drop_next = 0;      // the first chunk a sequential reader kept
  size_t prefetch_next = 0;  // the first chunk not yet offered to prefetch
};

mount_fs::mount_fs(store& s, codec::program_chooser const& chooser, options opt)
    : store_(s),
      chooser_(chooser),
      opt_(opt),
      // Idle buffers: a few chunks' worth, beside the cache's budget.
      buffers_(
          chunk_buffers::make(std::min<size_t>(opt.cache_bytes, 8u << 20))),
      cache_(opt.cache_bytes),
      decoders_(opt.decoders),
      prefetch_(opt.cache_bytes && opt.prefetch
                    ? (opt.prefetch_threads
                           ? opt.prefetch_threads
                           : std::max(2u, std::thread::hardware_concurrency()))
                    : 0,
                256) {
  queue_ = std::make_unique<compress_queue>(
      [this](uint64_t ino) { compress_job(ino); }, opt_.workers);
}

mount_fs::~mount_fs() {
  shutdown();
  for (auto& [ino, n] : nodes_) {
    if (n->fd >= 0) ::close(n->fd);
  }
}

void mount_fs::start() {
  if (size_t n = store_.tidy()) {
    log_event(log_level::info,
              "removed " + std::to_string(n) + " leftovers of an unclean stop");
  }
  if (!opt_.compress) return;
  for (uint64_t ino : store_.staged_inodes()) {
    if (lost_a_write(store_.staging_path(ino))) {
      log_error(ino,
                "a write of its staged copy was lost before (its "
                "writer was told): it is not compressed until it is "
                "truncated to nothing or removed");
      continue;
    }
    queue_->schedule(ino, std::chrono::milliseconds(0));
  }
}

void mount_fs::shutdown() {
  if (stopping_.exchange(true)) return;  // the destructor calls it again
  prefetch_.stop();
  if (queue_) queue_->stop();
  // What the reads cost: every miss was a chunk decoded (twice for one
  // chunk where it was evicted or dropped and read again). Best effort:
  // the destructor may be the caller, and must not throw.
  try {
    chunk_cache::counters const c = cache_.stats();
    log_event(log_level::info,
              "read cache: " + std::to_string(c.misses) + " chunks decoded, " +
                  std::to_string(c.hits) + " hits, " +
                  std::to_string(c.joined) + " joined a decode, " +
                  std::to_string(c.evictions) + " evicted");
    // What removed files gave back without gc (those removed in the last
    // seconds are punched as the store closes, after this line).
    store::punch_counts const p = store_.punched();
    log_event(log_level::info,
              "space given back: " + std::to_string(p.records) +
                  " dead payload records punched out of packs (" +
                  std::to_string(p.bytes) + " bytes)");
  } catch (...) {  // NOLINT(bugprone-empty-catch): only a log line lost
  }
}

std::shared_ptr<mount_fs::node> mount_fs::find_node(uint64_t ino) {
  std::lock_guard lk(nodes_mu_);
  auto it = nodes_.find(ino);
  return it == nodes_.end() ? nullptr : it->second;
}

std::shared_ptr<mount_fs::node> mount_fs::get(uint64_t ino) {
  if (std::shared_ptr<node> n = find_node(ino)) return n;
  // The store is asked with nodes_mu_ released (it is a leaf); when two
  // threads make the node at once, the first one in wins. Only a node's
  // own locks change its state, so the record cannot be stale meanwhile.
  inode_attr const a = store_.stat(ino);
  auto n = std::make_shared<node>(ino);
  n->staged = S_ISREG(a.mode) && a.state == file_state::staged;
  if (n->staged && lost_a_write(store_.staging_path(ino))) n->write_error = EIO;
  n->gen = next_gen_++;
  std::lock_guard lk(nodes_mu_);
  return nodes_.try_emplace(ino, std::move(n)).first->second;
}

bool mount_fs::alive(uint64_t ino) {
  // Settled, not a plain stat: the store asks keep_fn before it commits, so
  // a drop decided before our count could still be uncommitted.
  return store_.exists_settled(ino);
}

void mount_fs::erase_node(std::shared_ptr<node> const& n) {
  std::lock_guard lk(nodes_mu_);
  auto it = nodes_.find(n->ino);
  if (it != nodes_.end() && it->second == n) nodes_.erase(it);
}

void mount_fs::forget_node(uint64_t ino) {
  std::shared_ptr<node> n = find_node(ino);
  if (!n) return;
  bool closed = false;
  {
    std::scoped_lock lk(n->mu, n->io);
    n->gone = true;
    // An open that raced with the drop keeps its descriptor (the file is
    // anonymous now) until its release.
    closed = n->opens == 0;
    if (closed && n->fd >= 0) {
      ::close(n->fd);
      n->fd = -1;
    }
    new_generation(*n);
  }
  if (closed) erase_node(n);
}

std::vector<std::shared_ptr<mount_fs::node>> mount_fs::all_nodes() {
  std::lock_guard lk(nodes_mu_);
  std::vector<std::shared_ptr<node>> all;
  all.reserve(nodes_.size());
  for (auto const& [ino, n] : nodes_) all.push_back(n);
  return all;
}

std::vector<uint64_t> mount_fs::begin_write_back() {
  // From now on writes are timed; the start counts as one, so the wait
  // covers a write already on its way when the stop began.
  last_write_ns_ = steady_ns();
  timing_writes_ = true;
  std::vector<uint64_t> out;
  for (std::shared_ptr<node> const& n : all_nodes()) {
    std::lock_guard lk(n->mu);
    if (n->writers > 0 && !n->gone) out.push_back(n->ino);
  }
  return out;
}

void mount_fs::wait_for_quiet_writes(std::function<bool()> const& hurry) {
  using clock = std::chrono::steady_clock;
  constexpr auto quiet = std::chrono::milliseconds(200);
  auto const give_up = clock::now() + std::chrono::seconds(5);
  while (!hurry() && clock::now() < give_up) {
    auto const since = std::chrono::nanoseconds(steady_ns() - last_write_ns_);
    if (since >= quiet) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

size_t mount_fs::release_all_at_stop() {
  // The kernel sends a release without waiting for its answer: one still
  // on its way when the session ended never arrives. A writer's last close
  // then never put the mtime the kernel stated on the staged copy (after a
  // remount the file showed its last write-back's time instead) nor
  // recorded its size, and an orphan stayed in the store (an offline fsck
  // saw an inode with no directory entry; a CI run). Each is released here
  // as the kernel would have; nothing is queued, as the mount is stopping.
  size_t files = 0;
  for (std::shared_ptr<node> const& n : all_nodes()) {
    unsigned writers = 0;
    unsigned readers = 0;
    {
      std::lock_guard lk(n->mu);
      writers = std::min<unsigned>(n->writers, n->opens);
      readers = n->opens - writers;
    }
    files += writers + readers > 0;
    for (; writers > 0; --writers) release(n->ino, true);
    for (; readers > 0; --readers) release(n->ino, false);
  }
  // Files a rename replaced, kept for the kernel: its references end with
  // the session, and its FORGETs need not have come.
  for (std::shared_ptr<node> const& n : all_nodes()) {
    {
      std::lock_guard lk(n->mu);
      if (!n->orphan || n->opens > 0 || n->dropping || n->gone) continue;
      n->dropping = true;
    }
    drop_orphan(*n);
  }
  return files;
}

void mount_fs::drop_orphan(node& n) {
  // Its attributes stay for the kernel, which may hold it still (an O_PATH
  // descriptor), as those of an inode dropped at its unlink do.
  std::optional<struct stat> last;
  try {
    last = to_stat(store_.stat(n.ino));
  } catch (store_error const&) {  // already gone: nothing to keep
  }
  store_.drop_orphan(n.ino);
  ::unlink(store_.staging_path(n.ino).c_str());
  store_.keep_reserve();
  forget_node(n.ino);
  if (last && !store_.exists_settled(n.ino)) keep_removed(n.ino, *last);
}

void mount_fs::requeue(node& n) {
  if (!opt_.compress || stopping_) return;
  {
    std::scoped_lock lk(n.mu, n.io);
    if (!n.staged || n.writers > 0 || n.orphan || n.gone ||
        n.write_error != 0) {
      return;
    }
  }
  queue_->schedule(n.ino, std::chrono::milliseconds(opt_.quiet_ms));
}

void mount_fs::new_generation(node& n) {
  n.gen = next_gen_++;
  {
    std::lock_guard lk(n.map_mu);
    n.map.reset();
    n.seq_end = n.seq_start = n.served_to = 0;
    n.served_ahead.clear();
    ++n.run;
    n.drop_next = 0;
    n.prefetch_next = 0;
  }
  cache_.invalidate(n.ino);
}

struct stat mount_fs::to_stat(inode_attr const& a) {
  struct stat st {};
  st.st_ino = a.ino;
  st.st_mode = a.mode;
  st.st_nlink = a.nlink;
  st.st_uid = a.uid;
  st.st_gid = a.gid;
  st.st_blksize = 1 << 16;
  st.st_mtim = to_ts(a.mtime_ns);
  st.st_atim = st.st_mtim;
  st.st_ctim = to_ts(a.ctime_ns);
  if (S_ISDIR(a.mode)) {
    st.st_size = 4096;
    st.st_blocks = 8;
    return st;
  }
  st.st_size = static_cast<off_t>(a.size);
  // du shows what the file costs: payload bytes once compressed, the
  // staged copy's blocks while staged.
  st.st_blocks = static_cast<blkcnt_t>((a.stored + 511) / 512);
  if (S_ISREG(a.mode) && a.state == file_state::staged) {
    struct stat ss {};
    if (::stat(store_.staging_path(a.ino).c_str(), &ss) == 0) {
      st.st_size = ss.st_size;
      st.st_blocks = ss.st_blocks;
      st.st_mtim = ss.st_mtim;
      st.st_atim = ss.st_mtim;
    }
  }
  return st;
}

// ---------------------------------------------------------------- names

struct stat mount_fs::getattr(uint64_t ino) {
  try {
    return to_stat(store_.stat(ino));
  } catch (store_error const& e) {
    if (e.code() != store_errc::not_found) throw;
    if (std::optional<struct stat> st = removed_attr(ino)) return *st;
    throw;
  }
}

std::optional<struct stat> mount_fs::removed_attr(uint64_t ino) {
  std::lock_guard lk(removed_mu_);
  auto const it = removed_.find(ino);
  if (it == removed_.end()) return std::nullopt;
  return it->second;
}

void mount_fs::keep_removed(uint64_t ino, struct stat const& st) {
  // Decided under removed_mu_, which forget() takes after its count: an
  // entry made here is erased by the forget that ends the kernel's last
  // reference, or not made at all (an inode the kernel never held, such
  // as one a rename dropped from a name it had not looked up, would stay
  // until unmount).
  std::lock_guard lk(removed_mu_);
  if (lookups_.held(ino)) removed_[ino] = st;
}

void mount_fs::forget(uint64_t ino, uint64_t nlookup) noexcept {
  if (!lookups_.drop(ino, nlookup)) return;
  {
    std::lock_guard lk(removed_mu_);
    removed_.erase(ino);
  }
  // An orphan (rename(); FUSE evicts an inode at its last reference, so
  // this comes once nothing holds it) goes with the kernel's last reference
  // if nothing has it open. The count dropped above, before n->mu: release
  // and after_unlink() decide under n->mu, so one of them drops it.
  std::shared_ptr<node> n = find_node(ino);
  if (!n) return;
  {
    std::lock_guard lk(n->mu);
    if (!n->orphan || n->opens > 0 || n->dropping || n->gone) return;
    n->dropping = true;
  }
  // FUSE's forget has no reply to carry an error: left to the stop (or the
  // next mount), which drops orphans nothing holds.
  std::string failed;
  try {
    drop_orphan(*n);
    return;
  } catch (std::exception const& e) {
    try {
      failed = e.what();
    } catch (...) {  // no memory: unnamed
    }
  } catch (...) {
  }
  {
    std::lock_guard lk(n->mu);
    n->dropping = false;
  }
  try {
    log_error(ino, "dropping the removed file failed: " + failed);
  } catch (...) {  // no memory for the line
  }
}

struct stat mount_fs::lookup(uint64_t parent, std::string_view name) {
  std::optional<uint64_t> ino = store_.lookup(parent, name);
  if (!ino) store_fail(store_errc::not_found, "no such entry");
  if (std::shared_ptr<node> n = find_node(*ino)) {
    std::lock_guard nl(n->mu);
    n->name = name;
  }
  return getattr(*ino);
}

void mount_fs::set_owner(uint64_t parent, store::node_spec& spec,
                         caller const& who) {
  spec.uid = who.uid;
  spec.gid = who.gid;
  // A setgid directory hands its group down, and its setgid bit to
  // subdirectories, as on ext4: FUSE leaves this to the filesystem. (The
  // kernel has already dropped a new file's own setgid bit where its
  // creator is outside the group.)
  struct stat const dir = getattr(parent);
  if ((dir.st_mode & S_ISGID) != 0) {
    spec.gid = dir.st_gid;
    if (S_ISDIR(spec.mode)) spec.mode |= S_ISGID;
  }
}

struct stat mount_fs::create(uint64_t parent, std::string_view name,
                             uint32_t mode, int flags, caller const& who) {
  store::node_spec spec;
  spec.mode = S_IFREG | (mode & 07777);
  set_owner(parent, spec, who);
  spec.time_ns = now_ns();
  inode_attr const a = store_.make_node(parent, name, spec);
  std::shared_ptr<node> n = get(a.ino);  // not_found: unlinked meanwhile
  (void)flags;  // even a read-only create leaves a file to compress
  {
    std::scoped_lock lk(n->mu, n->io);
    if (n->gone) store_fail(store_errc::not_found, "removed while created");
    n->name = name;
    // Counted before the copy is opened: an unlink from now on keeps the
    // inode as an orphan instead of dropping it under us.
    ++n->opens;
    ++n->writers;
    std::string const path = store_.staging_path(a.ino);
    // The copy make_node made (empty): an open that found the new name
    // first may have written to it, and opened it already.
    bool const opened_here = n->fd < 0;
    if (opened_here) {
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
      n->fd =
          ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    }
    if (n->fd < 0) {
      int const e = errno;
      --n->opens;
      --n->writers;
      try {
        store_.remove(parent, name, false, {}, now_ns());
      } catch (...) {
      }
      sys_fail(e, "create the staged copy");
    }
    if (opened_here) {
      ::futimens(n->fd, std::array<timespec, 2>{to_ts(spec.time_ns),
                                                to_ts(spec.time_ns)}
                            .data());
      n->mtime_ns = spec.time_ns;
    }
    if (!alive(a.ino)) {
      // Dropped by an unlink before we counted: no ghost copy stays.
      ::close(n->fd);
      n->fd = -1;
      ::unlink(path.c_str());
      --n->opens;
      --n->writers;
      store_fail(store_errc::not_found, "removed while created");
    }
  }
  return to_stat(a);
}

struct stat mount_fs::mkdir(uint64_t parent, std::string_view name,
                            uint32_t mode, caller const& who) {
  store::node_spec spec;
  spec.mode = S_IFDIR | (mode & 07777);
  set_owner(parent, spec, who);
  spec.time_ns = now_ns();
  return to_stat(store_.make_node(parent, name, spec));
}

struct stat mount_fs::symlink(uint64_t parent, std::string_view name,
                              std::string_view target, caller const& who) {
  store::node_spec spec;
  spec.mode = S_IFLNK | 0777;
  set_owner(parent, spec, who);
  spec.time_ns = now_ns();
  spec.link_target = target;
  return to_stat(store_.make_node(parent, name, spec));
}

struct stat mount_fs::mknod_special(uint64_t parent, std::string_view name,
                                    uint32_t mode, caller const& who) {
  // Devices would need their numbers stored, and the mount is nodev.
  if (!S_ISFIFO(mode) && !S_ISSOCK(mode)) sys_fail(EPERM, "mknod");
  store::node_spec spec;
  spec.mode = (mode & S_IFMT) | (mode & 07777);
  set_owner(parent, spec, who);
  spec.time_ns = now_ns();
  return to_stat(store_.make_node(parent, name, spec));
}

struct stat mount_fs::link(uint64_t ino, uint64_t parent,
                           std::string_view name) {
  return to_stat(store_.link(ino, parent, name, now_ns()));
}

std::string mount_fs::readlink(uint64_t ino) { return store_.read_link(ino); }

void mount_fs::after_unlink(store::unlink_result const& r) {
  if (r.ino == 0) return;
  if (r.dropped) {
    keep_removed(r.ino, to_stat(r.attr));
    queue_->cancel(r.ino);
    if (r.state == file_state::staged) {
      ::unlink(store_.staging_path(r.ino).c_str());
    }
    forget_node(r.ino);
    store_.keep_reserve();  // if this unlink took it, space is back now
    return;
  }
  if (r.nlink == 0) {
    // Kept because it was open, or (rename) held by the kernel: the last
    // release or the kernel's FORGET drops it -- or we do, when both came
    // between the store's check and here.
    queue_->cancel(r.ino);
    std::shared_ptr<node> n = find_node(r.ino);
    if (!n) {  // held, never opened
      try {
        n = get(r.ino);
      } catch (std::exception const& e) {
        // The removal stands; the next mount drops the orphan.
        log_error(r.ino, std::string("keeping the removed file: ") + e.what());
        return;
      }
    }
    bool drop_now = false;
    {
      std::lock_guard lk(n->mu);
      n->orphan = true;
      drop_now =
          n->opens == 0 && !lookups_.held(r.ino) && !n->dropping && !n->gone;
      if (drop_now) n->dropping = true;
    }
    if (drop_now) drop_orphan(*n);
  }
}

namespace {
/// The store's keep_fn: runs under its writer lock, so it may take leaves
/// only (nodes_mu_ through find) and read the atomic count.
template <typename Find>
store::keep_fn keep_open(Find find) {
  return [find](uint64_t ino) {
    auto n = find(ino);
    return n && n->opens > 0;
  };
}
}  // namespace

void mount_fs::unlink(uint64_t parent, std::string_view name) {
  auto keep = keep_open([this](uint64_t ino) { return find_node(ino); });
  after_unlink(store_.remove(parent, name, false, keep, now_ns()));
}

void mount_fs::rmdir(uint64_t parent, std::string_view name) {
  after_unlink(store_.remove(parent, name, true, {}, now_ns()));
}

void mount_fs::rename(uint64_t parent, std::string_view name,
                      uint64_t new_parent, std::string_view new_name,
                      unsigned flags) {
  // A file the rename replaces stays whole, an orphan, while it is open or
  // the kernel holds it: a process that looked the name up before the
  // rename opens what it found, as on a local filesystem. (Dropped at
  // once, its open got ESTALE, and when a second rename came before the
  // kernel's one retry, the caller did: a CI run of mount_stress.) An
  // unlinked name may read as missing; a renamed-over one must not.
  // Under the store's writer lock, as keep_open's: leaves only (nodes_mu_,
  // the lookup counts' shards).
  auto keep = [this](uint64_t ino) {
    std::shared_ptr<node> n = find_node(ino);
    return (n && n->opens > 0) || lookups_.held(ino);
  };
  std::optional<uint64_t> const moved = store_.lookup(parent, name);
  after_unlink(
      store_.rename(parent, name, new_parent, new_name, flags, keep, now_ns()));
  if (!moved) return;
  if (std::shared_ptr<node> n = find_node(*moved)) {
    std::lock_guard nl(n->mu);
    n->name = new_name;
  }
}

std::vector<mount_fs::entry> mount_fs::readdir(uint64_t ino) {
  std::vector<entry> out;
  // A removed directory opens empty (the kernel lists none of a removed
  // directory's entries, not even "." and "..").
  if (removed_attr(ino)) return out;
  out.push_back({".", getattr(ino)});
  out.push_back({"..", getattr(store_.parent_of(ino))});
  for (dir_entry const& e : store_.list(ino)) {
    out.push_back({e.name, to_stat(e.attr)});
  }
  return out;
}

// ------------------------------------------------------------ attributes

struct stat mount_fs::setattr(uint64_t ino, setattr_request const& r,
                              resize_gate::hold* resizing) {
  resize_gate::hold held_here;
  resize_gate::hold& gate = resizing ? *resizing : held_here;
  // A removed inode the kernel still holds (an open directory, a cwd) takes
  // a chmod, chown or utimes into what the mount keeps of it, as a local
  // filesystem's would; its size cannot change (no bytes are kept).
  if (!r.size) {
    std::lock_guard lk(removed_mu_);
    if (auto it = removed_.find(ino); it != removed_.end()) {
      struct stat& st = it->second;
      if (r.mode) st.st_mode = (st.st_mode & S_IFMT) | (*r.mode & 07777);
      if (r.uid) st.st_uid = *r.uid;
      if (r.gid) st.st_gid = *r.gid;
      if (r.mtime_ns) st.st_mtim = st.st_atim = to_ts(*r.mtime_ns);
      st.st_ctim = to_ts(r.ctime_ns.value_or(now_ns()));
      return st;
    }
  }
  std::shared_ptr<node> n;
  if (r.size || r.mtime_ns) n = get(ino);
  if (r.size) {
    // A truncate is a short write: stage, cut, then queue as on close.
    {
      std::unique_lock lk(n->mu);
      wait_not_compressing(*n, lk);
      if (n->gone) store_fail(store_errc::not_found, "removed");
      gate = node::hold_reads_off(n);
      bool const queued = queue_->cancel(ino);
      ++n->writers;
      ++n->opens;  // an unlink meanwhile keeps it (see create)
      try {
        std::unique_lock io(n->io);
        if (!n->staged) stage_locked(*n, *r.size);
        if (n->fd < 0) open_fd_locked(*n);
        if (::ftruncate(n->fd, static_cast<off_t>(*r.size)) != 0) {
          sys_fail(errno, "truncate");
        }
        if (*r.size == 0 && n->write_error.exchange(0) != 0) {
          mark_lost_write(n->fd, false);  // nothing lost is left
        }
      } catch (...) {
        --n->writers;
        --n->opens;
        lk.unlock();
        if (queued) requeue(*n);  // not cut: it stays queued
        throw;
      }
      --n->opens;
    }
    written(*n);
  }
  store::attr_update u;
  u.mode = r.mode;
  u.uid = r.uid;
  u.gid = r.gid;
  u.mtime_ns = r.mtime_ns;
  u.ctime_ns = r.ctime_ns.value_or(now_ns());
  if (!r.mtime_ns) {
    inode_attr const a = store_.set_attr(ino, u);
    if (std::shared_ptr<node> const held = find_node(ino)) {
      std::lock_guard lk(held->mu);
      held->note_ctime(*u.ctime_ns);
    }
    return to_stat(a);
  }
  // A compression commits the mtime of the copy it read; one running with
  // another mtime is cancelled first, so the user's time is the last one
  // written. mu stays held so that none starts before the copy has it.
  bool interrupted = false;
  {
    std::unique_lock lk(n->mu);
    if (!r.mode && !r.uid && !r.gid && n->writers > 0 && !n->orphan &&
        !n->gone) {
      // Open for writing (so not compressing): the last writer's close
      // records the copy's mtime and the stated ctime in the store, so the
      // kernel's time update at each close (writeback cache) costs no
      // commit of its own.
      std::shared_lock io(n->io);
      if (n->staged && n->fd >= 0) {
        n->mtime_ns = *r.mtime_ns;
        if (r.ctime_ns) n->ctime_ns = *r.ctime_ns;
        timespec const ts[2] = {to_ts(*r.mtime_ns), to_ts(*r.mtime_ns)};
        if (::futimens(n->fd, ts) != 0) sys_fail(errno, "set the times");
        return to_stat(store_.stat(ino));
      }
    }
    if (n->compressing) {
      struct stat ss {};
      bool const same = ::stat(store_.staging_path(ino).c_str(), &ss) == 0 &&
                        from_ts(ss.st_mtim) == *r.mtime_ns;
      if (!same) interrupted = wait_not_compressing(*n, lk);
    }
    inode_attr const a = store_.set_attr(ino, u);
    n->note_ctime(*u.ctime_ns);
    if (S_ISREG(a.mode) && a.state == file_state::staged) {
      n->mtime_ns = *r.mtime_ns;
      timespec const ts[2] = {to_ts(*r.mtime_ns), to_ts(*r.mtime_ns)};
      ::utimensat(AT_FDCWD, store_.staging_path(ino).c_str(), ts, 0);
    }
  }
  if (interrupted) requeue(*n);
  return to_stat(store_.stat(ino));
}

// ---------------------------------------------------------------- files

bool mount_fs::wait_not_compressing(node& n, std::unique_lock<std::mutex>& lk) {
  bool waited = false;
  while (n.compressing) {
    n.cancel = true;
    waited = true;
    n.cv.wait(lk);
  }
  return waited;
}

void mount_fs::open_fd_locked(node& n) {
  std::string const path = store_.staging_path(n.ino);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  n.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (n.fd >= 0) return n.remember_times();
  if (errno != ENOENT) sys_fail(errno, "open the staged copy");
  // No copy: the inode was dropped by an unlink (then stat throws
  // not_found) -- or a crash came between create's commit and its file.
  // Only that empty file is made again; a copy is never recreated.
  inode_attr const a = store_.stat(n.ino);
  if (a.state != file_state::staged || a.size != 0) {
    store_fail(store_errc::corrupt,
               "inode " + std::to_string(n.ino) + ": staged copy missing");
  }
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  n.fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (n.fd < 0) sys_fail(errno, "create the staged copy");
  n.entry_synced = false;
  if (!alive(n.ino)) {
    ::close(n.fd);
    n.fd = -1;
    ::unlink(path.c_str());
    store_fail(store_errc::not_found, "removed while opened");
  }
  n.remember_times();
}

void mount_fs::stage_locked(node& n, uint64_t keep) {
  inode_attr const a = store_.stat(n.ino);
  uint64_t const size = std::min(keep, a.size);
  std::string const path = store_.staging_path(n.ino);
  std::string const tmp = path + ".tmp";
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int fd = ::open(tmp.c_str(),
                  O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) sys_fail(errno, "create the staged copy");
  bool renamed = false;
  try {
    std::vector<uint8_t> buf(std::min<uint64_t>(size, 4u << 20));
    for (uint64_t off = 0; off < size;) {
      size_t const want =
          static_cast<size_t>(std::min<uint64_t>(buf.size(), size - off));
      size_t const got = store_.read(n.ino, off, want, buf.data());
      if (got != want) {
        store_fail(store_errc::corrupt, "short read while staging");
      }
      for (size_t done = 0; done < got;) {
        ssize_t const w = ::pwrite(fd, buf.data() + done, got - done,
                                   static_cast<off_t>(off + done));
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) sys_fail(errno, "write the staged copy");
        done += static_cast<size_t>(w);
      }
      off += got;
    }
    timespec const ts[2] = {to_ts(a.mtime_ns), to_ts(a.mtime_ns)};
    ::futimens(fd, ts);
    // The staged copy is durable before the store forgets the chunks.
    if (::fdatasync(fd) != 0) sys_fail(errno, "sync the staged copy");
    if (::rename(tmp.c_str(), path.c_str()) != 0) {
      sys_fail(errno, "rename the staged copy");
    }
    renamed = true;
    // The rename itself must be durable before the store drops the chunks,
    // or a power cut could leave neither copy.
    detail::sync_parent_directory(path);
    store_.unstage(n.ino, size);
  } catch (...) {
    ::close(fd);
    // Still compressed (or dropped meanwhile): no copy of ours stays. A
    // failed unstage may have committed all the same (a sync failing after
    // the write): the copy goes only once the store says it still holds
    // the compressed file, or none, and stays when it cannot tell.
    bool drop = !renamed;
    if (renamed) {
      try {
        drop = store_.stat(n.ino).state == file_state::compressed;
      } catch (store_error const& e) {
        drop = e.code() == store_errc::not_found;
      }
    }
    if (drop) ::unlink((renamed ? path : tmp).c_str());
    throw;
  }
  if (n.fd >= 0) ::close(n.fd);
  n.fd = fd;
  n.remember_times();
  n.staged = true;
  new_generation(n);
}

bool mount_fs::open(uint64_t ino, int flags, caller who,
                    resize_gate::hold* resizing) {
  std::shared_ptr<node> n = get(ino);
  bool const w = for_writing(flags);
  std::unique_lock lk(n->mu);
  if (w) wait_not_compressing(*n, lk);
  resize_gate::hold held_here;
  if (flags & O_TRUNC)
    (resizing ? *resizing : held_here) = node::hold_reads_off(n);
  // dropping: its last handle went, the store is dropping it.
  if (n->gone || n->dropping) store_fail(store_errc::not_found, "removed");
  bool queued = false;
  if (w) {
    queued = queue_->cancel(ino);  // a reopen for writing takes it off
    ++n->writers;
  }
  ++n->opens;
  bool removed = false;
  bool attrs_changed = false;
  try {
    // Counted, then asked: an unlink that saw no handle drops the inode, and
    // its after_unlink() marks the node gone only later. An open in between
    // succeeded, then its reads and fstat failed with ENOENT.
    removed = !alive(ino);
    if (removed) store_fail(store_errc::not_found, "removed while opened");
    std::unique_lock io(n->io);
    if (w && !n->staged) {
      stage_locked(*n, (flags & O_TRUNC) ? 0 : UINT64_MAX);
      attrs_changed = true;
    }
    if (n->staged && n->fd < 0) open_fd_locked(*n);
    if ((flags & O_TRUNC) && n->fd >= 0 && ::ftruncate(n->fd, 0) != 0) {
      sys_fail(errno, "truncate");
    }
    if ((flags & O_TRUNC) && n->fd >= 0 && n->write_error.exchange(0) != 0) {
      mark_lost_write(n->fd, false);  // nothing lost is left
    }
    if ((flags & O_TRUNC) && who.uid != 0) {
      // The kernel truncates an O_TRUNC open here (atomic_o_trunc), so the
      // setattr that would clear these bits never comes.
      inode_attr const a = store_.stat(ino);
      uint32_t const mode = a.mode;
      bool const in_group =
          who.gid == a.gid || std::find(who.groups.begin(), who.groups.end(),
                                        a.gid) != who.groups.end();
      uint32_t kill = S_ISUID;
      if ((mode & S_IXGRP) || !in_group) kill |= S_ISGID;
      if (S_ISREG(mode) && (mode & kill) != 0) {
        store::attr_update u;
        u.mode = mode & 07777 & ~kill;
        u.ctime_ns = now_ns();
        store_.set_attr(ino, u);
        n->note_ctime(*u.ctime_ns);
        attrs_changed = true;
      }
    }
  } catch (...) {
    --n->opens;
    if (w) --n->writers;
    lk.unlock();
    if (removed) {
      forget_node(ino);  // also a node made from a stale record by get()
    } else if (queued) {
      requeue(*n);  // nothing was written: it stays queued
    }
    throw;
  }
  // Told with no lock held: the notice is a write to the session's device.
  lk.unlock();
  if (attrs_changed && opt_.attributes_changed) opt_.attributes_changed(ino);
  return w;
}

size_t mount_fs::read(uint64_t ino, uint64_t offset, size_t size,
                      uint8_t* out) {
  read_data const d = read_view(ino, offset, size);
  size_t done = 0;
  for (iovec const& p : d.pieces) {
    std::memcpy(out + done, p.iov_base, p.iov_len);
    done += p.iov_len;
  }
  return done;
}

mount_fs::read_data mount_fs::read_view(uint64_t ino, uint64_t offset,
                                        size_t size, bool from_fd) {
  read_data d;
  std::shared_ptr<node> n = get(ino);
  d.gate = resize_gate::enter_read(std::shared_ptr<resize_gate>(n, &n->gate));
  std::shared_lock io(n->io);
  if (!n->staged && cache_.budget() != 0) {
    read_compressed(n, offset, size, d);
    return d;
  }
  if (n->staged && from_fd) {
    // A duplicate, so that the reply, sent with no lock held, reads the
    // copy even if it is compressed and removed meanwhile.
    if (n->fd < 0) sys_fail(EBADF, "read of a file that is not open");
    d.fd = owned_fd(::fcntl(n->fd, F_DUPFD_CLOEXEC, 0));
    if (d.fd.get() < 0)
      sys_fail(errno, "duplicate the staged copy's descriptor");
    d.size = size;
    return d;
  }
  d.staged.reset(new uint8_t[size]);
  uint8_t* const out = d.staged.get();
  if (!n->staged) {
    d.size = store_.read(ino, offset, size, out);
  } else {
    if (n->fd < 0) sys_fail(EBADF, "read of a file that is not open");
    while (d.size < size) {
      ssize_t const r = ::pread(n->fd, out + d.size, size - d.size,
                                static_cast<off_t>(offset + d.size));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) sys_fail(errno, "read the staged copy");
      if (r == 0) break;
      d.size += static_cast<size_t>(r);
    }
  }
  if (d.size > 0) d.pieces.push_back({out, d.size});
  return d;
}

std::shared_ptr<std::vector<store::chunk_span> const> mount_fs::chunks_of(
    node& n, uint64_t gen) {
  std::lock_guard lk(n.map_mu);
  if (!n.map || n.map_gen != gen) {
    n.map = std::make_shared<std::vector<store::chunk_span> const>(
        store_.chunk_map(n.ino, store::with_programs::no));
    n.map_gen = gen;
  }
  return n.map;
}

chunk_cache::chunk mount_fs::load_chunk(node& n, store::chunk_span const& sp,
                                        bool reader) {
  std::shared_ptr<chunk_bytes> b = buffers_->take(sp.length);
  decode_slots::slot const slot(decoders_, reader);
  if (store_.read(n.ino, sp.offset, sp.length, b->data()) != sp.length) {
    store_fail(store_errc::corrupt, "inode " + std::to_string(n.ino) +
                                        ": short chunk at " +
                                        std::to_string(sp.offset));
  }
  return chunk_cache::chunk(std::move(b));
}

uint64_t mount_fs::prefetch_window(uint64_t run) const {
  uint64_t const chunk = store_.chunk_size();
  uint64_t const base = uint64_t{opt_.prefetch} * chunk;
  uint64_t const most =
      std::max(base, std::min<uint64_t>(uint64_t{opt_.prefetch_max} * chunk,
                                        opt_.cache_bytes / 8));
  return std::clamp(run, base, most);
}

chunk_cache::chunk mount_fs::chunk_at(node& n, uint64_t gen,
                                      store::chunk_span const& sp) {
  return cache_.get_or_load({n.ino, gen, sp.offset},
                            [&] { return load_chunk(n, sp, true); });
}

void mount_fs::read_compressed(std::shared_ptr<node> const& n, uint64_t offset,
                               size_t size, read_data& d) {
  uint64_t const gen = n->gen;
  auto const map = chunks_of(*n, gen);
  // The chunk holding `offset` is the last one starting at or before it.
  auto it = std::upper_bound(
      map->begin(), map->end(), offset,
      [](uint64_t o, store::chunk_span const& c) { return o < c.offset; });
  if (it == map->begin()) return;
  size_t const first = static_cast<size_t>(it - map->begin()) - 1;
  store::chunk_span const& tail = map->back();
  uint64_t const file_end = tail.offset + tail.length;
  if (offset >= file_end || size == 0) return;
  uint64_t const end = std::min<uint64_t>(file_end, offset + size);
  // The chunks this read covers: [first, last].
  size_t last = first;
  while (last + 1 < map->size() && (*map)[last + 1].offset < end) ++last;

  // Whether this read continues a sequential run: it starts near where the
  // run has been read up to, or near its furthest read. The kernel's
  // readahead sends several READs at once and our threads take them in any
  // order, so one may start well before the furthest (up to the kernel's
  // window, which the user may raise far past sequential_slack).
  bool sequential = false;
  uint64_t run = 0;
  // The chunks offered to the prefetcher: this read's own after the first,
  // then the window past it from where earlier reads left off.
  std::vector<size_t> offer;
  {
    std::lock_guard lk(n->map_mu);
    // An established stream may also find a READ from far into the
    // kernel's window taken before the ones below it: with 8 MiB of
    // readahead, reads 4 MiB past the furthest began new runs, and the
    // chunks of the old one were never dropped (evicted instead, some
    // before they were read: decoded twice, and fresh buffers faulted in).
    uint64_t const reach = n->seq_end - n->seq_start >= (2u << 20)
                               ? far_behind()
                               : opt_.sequential_slack;
    sequential = offset + opt_.sequential_slack >= n->served_to &&
                 offset <= n->seq_end + reach;
    if (!sequential) {
      n->seq_end = end;
      n->seq_start = n->served_to = offset;
      n->served_ahead.clear();
      ++n->run;
      n->drop_next = first;
    }
    n->seq_end = std::max(n->seq_end, end);
    run = n->run;
    // The chunks after the first are decoded by the prefetcher while this
    // thread decodes the first: a 1 MiB readahead request of a checkpoint
    // of small tensors covers a dozen chunks. A sequential reader also gets
    // the chunks starting within `prefetch` chunk sizes past its end (by
    // bytes: chunks are cut per tensor, most far smaller than chunk_size).
    // Each chunk of the window is offered once (a read lands in a chunk
    // several times, and a full queue of duplicates would turn new ones
    // away). A read's own chunks are offered every time (reserve() skips
    // those taken or cached): a READ from deep in the kernel's window,
    // answered first, moves the window past the reads below it, whose
    // chunks would otherwise all be decoded by their own FUSE thread.
    for (size_t j = first + 1; j <= last; ++j) offer.push_back(j);
    if (sequential) {
      uint64_t const ahead = end + prefetch_window(n->seq_end - n->seq_start);
      size_t upto = last + 1;
      while (upto < map->size() && (*map)[upto].offset < ahead) ++upto;
      for (size_t j = std::max(last + 1, n->prefetch_next); j < upto; ++j) {
        offer.push_back(j);
      }
      n->prefetch_next = std::max({last + 1, n->prefetch_next, upto});
    } else {
      n->prefetch_next = 0;
    }
  }
  // Reserved, so that a read needing one of them before the prefetcher
  // gets to it decodes it itself, and one that comes while it is decoded
  // waits for it. A job that does not run withdraws its reservations.
  // Neighbouring small chunks go in one job, decoded in order: a job per
  // chunk cost a queue push, a wake-up and a function object each, for
  // chunks of a few KiB (the 315 MB checkpoint has 1,989 chunks, half of
  // them under 40 KiB).
  using reserved = std::pair<size_t, std::shared_ptr<chunk_cache::reservation>>;
  std::vector<reserved> group;
  uint64_t group_bytes = 0;
  for (size_t o = 0; o < offer.size() && opt_.prefetch != 0; ++o) {
    size_t const j = offer[o];
    if (auto r = cache_.reserve({n->ino, gen, (*map)[j].offset})) {
      group.emplace_back(j, std::move(r));
      group_bytes += (*map)[j].length;
    }
    if (group.empty() ||
        (group_bytes < prefetch_job_bytes && o + 1 < offer.size()))
      continue;
    size_t const group_first = group.front().first;
    bool const taken =
        prefetch_.offer([this, n, gen, map, g = std::move(group)]() mutable {
          // Not waiting for io: a state change holds it, and makes the
          // reservations moot (a reader waiting for one loads it itself).
          std::shared_lock io(n->io, std::try_to_lock);
          if (!io.owns_lock() || n->gen != gen || n->staged) return;
          for (auto& [k, r] : g) {
            if (stopping_) return;
            bool passed = false;
            {
              // Run late: the reader has passed it already.
              std::lock_guard lk(n->map_mu);
              passed = k < n->drop_next;
            }
            // Each reservation goes as soon as it is done with (withdrawn
            // when skipped), not when the whole job ends: a reader waiting
            // for a skipped chunk then loads it at once.
            size_t const at = k;
            if (!passed) {
              r->run([&] { return load_chunk(*n, (*map)[at], false); });
            }
            r.reset();
          }
        });
    group.clear();
    group_bytes = 0;
    if (!taken) {
      // The queue is full: offered again by the next read (this read
      // decodes its own chunks itself).
      std::lock_guard lk(n->map_mu);
      n->prefetch_next = std::min(n->prefetch_next, group_first);
      break;
    }
  }

  for (size_t i = first; i <= last && d.size < size; ++i) {
    store::chunk_span const& sp = (*map)[i];
    uint64_t const pos = offset + d.size;
    if (pos >= sp.offset + sp.length) continue;  // past the end
    if (pos < sp.offset) {
      store_fail(store_errc::corrupt, "inode " + std::to_string(n->ino) +
                                          ": chunks do not cover byte " +
                                          std::to_string(pos));
    }
    chunk_cache::chunk c = chunk_at(*n, gen, sp);
    size_t const take = static_cast<size_t>(
        std::min<uint64_t>(size - d.size, sp.offset + sp.length - pos));
    d.pieces.push_back(
        {const_cast<uint8_t*>(c->data() + (pos - sp.offset)), take});
    d.hold.push_back(std::move(c));
    d.size += take;
  }
  if (d.size != 0) drop_behind(*n, gen, *map, run, offset, offset + d.size);
}

void mount_fs::drop_behind(node& n, uint64_t gen,
                           std::vector<store::chunk_span> const& map,
                           uint64_t run, uint64_t offset, uint64_t end) {
  // The kernel keeps what a sequential reader has read (keep_cache), so the
  // chunks that every read of the run has passed are dropped rather than
  // left to the LRU: their buffers go to the next decodes (a fresh buffer
  // costs page faults), and a stream through a large file does not push
  // out chunks that random readers come back to. "Passed" counts the reads
  // answered, not the furthest one that arrived: with 4-8 MiB of readahead
  // in flight (read_ahead_kb raised by hand), a READ answered late found
  // its chunks dropped by those past it, 4 MiB behind the furthest (a cold
  // read of the 315 MB checkpoint decoded 101-156 of its 1,989 chunks
  // twice, and the daemon's CPU went 0.62 -> 1.05 s).
  size_t drop_from = 0, drop_to = 0;
  {
    std::lock_guard lk(n.map_mu);
    if (n.run != run) return;  // a new run began meanwhile
    if (offset <= n.served_to) {
      n.served_to = std::max(n.served_to, end);
    } else {
      uint64_t& e = n.served_ahead[offset];
      e = std::max(e, end);
    }
    // A gap the kernel never asks for (its pages were cached already) is
    // given up on once the run has gone far past it.
    uint64_t const far = far_behind();
    while (!n.served_ahead.empty()) {
      auto const it = n.served_ahead.begin();
      if (it->first > n.served_to && n.served_ahead.size() < 16 &&
          n.seq_end - n.served_to <= far) {
        break;
      }
      n.served_to = std::max(n.served_to, it->second);
      n.served_ahead.erase(it);
    }
    // Those ending a slack behind this read and the run's answered bytes:
    // a random read that begins a run keeps what it read, and a file read
    // again soon (its pages dropped) finds its tail still here.
    uint64_t const passed =
        std::min(n.served_to, offset) -
        std::min(std::min(n.served_to, offset), opt_.sequential_slack);
    drop_from = drop_to = n.drop_next;
    while (drop_to < map.size() &&
           map[drop_to].offset + map[drop_to].length <= passed) {
      ++drop_to;
    }
    n.drop_next = drop_to;
  }
  for (size_t j = drop_from; j < drop_to; ++j) {
    cache_.erase({n.ino, gen, map[j].offset});
  }
}

size_t mount_fs::write(uint64_t ino, uint64_t offset, uint8_t const* data,
                       size_t size) {
  return write_with(
      ino, offset, size, [&](int fd, uint64_t at, size_t len) -> ssize_t {
        ssize_t const r =
            ::pwrite(fd, data + (at - offset), len, static_cast<off_t>(at));
        return r < 0 ? -errno : r;
      });
}

size_t mount_fs::write_with(uint64_t ino, uint64_t offset, size_t size,
                            write_fn const& put) {
  if (timing_writes_.load(std::memory_order_relaxed))
    last_write_ns_ = steady_ns();
  std::shared_ptr<node> n = get(ino);
  std::shared_lock io(n->io);
  if (!n->staged || n->fd < 0) sys_fail(EBADF, "write to a file not open");
  size_t done = 0;
  while (done < size) {
    ssize_t const r = put(n->fd, offset + done, size - done);
    if (r == -EINTR) continue;
    if (r <= 0) {
      // No progress without an error would loop forever: a device error.
      int const e = r < 0 ? static_cast<int>(-r) : EIO;
      int none = 0;
      if (n->write_error.compare_exchange_strong(none, e)) {
        mark_lost_write(n->fd, true);
        log_error(ino, std::string("a write of the staged copy failed (") +
                           std::strerror(e) +
                           "): every close and fsync of the file says so, "
                           "and it is not compressed until it is truncated "
                           "to nothing or removed");
      }
      sys_fail(e, "write the staged copy");
    }
    done += static_cast<size_t>(r);
  }
  return done;
}

int mount_fs::flush(uint64_t ino) {
  std::shared_ptr<node> n = find_node(ino);
  return n ? n->write_error.load() : 0;
}

void mount_fs::fsync(uint64_t ino, bool datasync) {
  std::shared_ptr<node> n = get(ino);
  if (int const e = n->write_error.load()) {
    sys_fail(e, "an earlier write of the file failed");
  }
  {
    std::shared_lock io(n->io);
    if (n->staged && n->fd >= 0) {  // a compressed file's data is synced
      if ((datasync ? ::fdatasync(n->fd) : ::fsync(n->fd)) != 0) {
        sys_fail(errno, "fsync");
      }
      // The copy's name in staging/ too: create made it without a sync,
      // and a power cut could otherwise lose a file its writer had synced.
      if (!n->entry_synced) {
        detail::sync_parent_directory(store_.staging_path(ino));
        n->entry_synced = true;
      }
    }
  }
  // Then its inode and attributes, which commit without a sync.
  store_.sync();
}

void mount_fs::fallocate(uint64_t ino, int mode, uint64_t offset,
                         uint64_t length) {
  // PUNCH_HOLE comes with KEEP_SIZE (the kernel checks); the staging
  // filesystem does the rest, or says why not.
  if (mode & ~(FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE)) {
    sys_fail(EOPNOTSUPP, "fallocate mode");
  }
  std::shared_ptr<node> n = get(ino);
  std::shared_lock io(n->io);
  if (!n->staged || n->fd < 0) sys_fail(EBADF, "fallocate on a file not open");
  if (::fallocate(n->fd, mode, static_cast<off_t>(offset),
                  static_cast<off_t>(length)) != 0) {
    sys_fail(errno, "fallocate");
  }
}

void mount_fs::written(node& n) {
  bool queue = false;
  bool orphan = false;
  bool erase = false;
  {
    std::scoped_lock lk(n.mu, n.io);
    --n.writers;
    if (n.writers == 0 && n.staged && !n.gone) {
      // The kernel's mtime: it stated it before this close if it moved.
      // Writes the daemon handled after that setattr (the kernel sends the
      // two at once, and they run on different threads) moved the copy's
      // to their own time, seen after a remount (found by a POSIX probe).
      // Until the close the copy keeps its later time: a crash then leaves
      // new bytes with a newer mtime, never an older one.
      int64_t const stated = n.mtime_ns;
      if (kernel_keeps_times_ && n.fd >= 0 && stated != unknown_time) {
        std::array<timespec, 2> const ts = {timespec{0, UTIME_OMIT},
                                            to_ts(stated)};
        (void)::futimens(n.fd, ts.data());
      }
      struct stat ss {};
      if (n.fd >= 0 && ::fstat(n.fd, &ss) == 0 && !n.orphan) {
        // Record size and mtime so `brevis stats` sees them while mounted.
        store::attr_update u;
        u.size = static_cast<uint64_t>(ss.st_size);
        u.mtime_ns = from_ts(ss.st_mtim);
        // The kernel that keeps the times states the ctime of any change;
        // none stated, nothing changed (an open for writing that wrote
        // nothing), and the ctime stays, as on a local filesystem.
        if (!kernel_keeps_times_) {
          u.ctime_ns = now_ns();
        } else if (n.ctime_ns != unknown_time) {
          u.ctime_ns = n.ctime_ns;
        }
        // Recorded: the next writers state their own (a stale one would
        // take the ctime back past a chmod made between them).
        n.ctime_ns = unknown_time;
        try {
          store_.set_attr(n.ino, u);
        } catch (store_error const& e) {
          // not_found: unlinked meanwhile (an orphan from now on).
          if (e.code() != store_errc::not_found) log_error(n.ino, e.what());
        }
      }
      // Bytes a write lost would be compressed as the file's.
      queue = !n.orphan && n.write_error == 0;
    }
    if (n.opens == 0 && n.fd >= 0) {
      ::close(n.fd);
      n.fd = -1;
    }
    orphan = n.orphan && n.opens == 0 && !lookups_.held(n.ino) && !n.dropping &&
             !n.gone;
    if (orphan) n.dropping = true;
    erase = n.gone && n.opens == 0;
    queue = queue && !n.gone;
  }
  if (erase) {
    if (auto self = find_node(n.ino); self.get() == &n) erase_node(self);
    return;
  }
  if (orphan) {
    drop_orphan(n);
    return;
  }
  if (queue && opt_.compress && !stopping_) {
    queue_->schedule(n.ino, std::chrono::milliseconds(opt_.quiet_ms));
  }
}

void mount_fs::release(uint64_t ino, bool writer) {
  std::shared_ptr<node> n = get(ino);
  if (writer) {
    {
      std::lock_guard lk(n->mu);
      --n->opens;
    }
    written(*n);
    return;
  }
  bool erase = false;
  {
    std::scoped_lock lk(n->mu, n->io);
    --n->opens;
    if (n->opens == 0 && n->writers == 0 && n->fd >= 0) {
      ::close(n->fd);
      n->fd = -1;
    }
    erase = n->gone && n->opens == 0;
    if (!erase) {
      if (!n->orphan || n->opens > 0 || lookups_.held(ino) || n->dropping)
        return;
      n->dropping = true;
    }
  }
  if (erase) {
    erase_node(n);
    return;
  }
  drop_orphan(*n);
}

// ------------------------------------------------------------- the queue

void mount_fs::compress_job(uint64_t ino) {
  if (stopping_) return;
  std::shared_ptr<node> n;
  try {
    n = get(ino);
  } catch (std::exception const&) {
    return;  // gone
  }
  std::string name;
  {
    std::lock_guard lk(n->mu);
    if (n->writers > 0 || n->orphan || n->gone || n->compressing ||
        n->write_error != 0) {
      return;  // a file that lost a write: not as if whole
    }
    std::shared_lock io(n->io);
    if (!n->staged) return;
    n->compressing = true;
    n->cancel = false;
    name = n->name;
  }
  struct done_guard {
    node& n;
    ~done_guard() {
      std::lock_guard lk(n.mu);
      n.compressing = false;
      n.cv.notify_all();
    }
  } done{*n};
  compress_request req;
  req.ino = ino;
  req.name = name;
  req.staged_path = store_.staging_path(ino);
  req.memory_limit = opt_.pipeline_memory;
  req.cancelled = [&] { return n->cancel || stopping_; };
  // Files queued again at mount have no name until someone looks them up.
  std::string const label =
      name.empty() ? "inode " + std::to_string(ino)
                   : "'" + name + "' (inode " + std::to_string(ino) + ")";
  // The queue is recorded (a commit each) around jobs long enough to be
  // seen, and when the queue runs dry, not around every small file.
  bool visible = false;
  try {
    visible = store_.stat(ino).size >= status_min_bytes;
  } catch (std::exception const&) {
  }  // gone: the job finds out and says nothing
  if (visible) report_queue(ino, name);
  compress_outcome const out = compress_staged_file(store_, chooser_, req);
  if (visible || pending() <= 1) report_queue(0, {});
  if (!out.ok) {
    if (out.code == store_errc::cancelled ||
        out.code == store_errc::not_found) {
      return;  // a writer, an unlink or the unmount took it back
    }
    bool unlinked = false;
    try {
      unlinked = !alive(ino);
    } catch (std::exception const&) {
    }
    if (unlinked) return;  // unlinked meanwhile: nothing left to keep
    // A full disk needs the user: it does not pass by waiting.
    std::string const hint =
        out.code == store_errc::no_space
            ? " (the store's disk is full: free space there; brevis gc "
              "reclaims what removed files left in its packs)"
            : "";
    log_event(log_level::error, label + " left staged, tried again in " +
                                    std::to_string(retry_delay_s) +
                                    " s: " + out.error + hint);
    if (!stopping_) {
      queue_->schedule(ino, std::chrono::seconds(retry_delay_s));
    }
    return;
  }
  {
    // Committed: reads go to the store from now on, then the copy goes.
    std::scoped_lock lk(n->mu, n->io);
    n->staged = false;
    new_generation(*n);
    if (n->fd >= 0) {
      ::close(n->fd);
      n->fd = -1;
    }
    ::unlink(req.staged_path.c_str());
  }
  store_.keep_reserve();
  if (opt_.attributes_changed) opt_.attributes_changed(ino);
  add_result const& r = out.result;
  char line[200];
  std::snprintf(
      line, sizeof line,
      "%llu -> %llu bytes, ratio %.3f, %.2f s, %.1f MB/s (programs %.2f s, "
      "chunks %.2f s; process CPU %.2f and %.2f s)",
      static_cast<unsigned long long>(r.size),
      static_cast<unsigned long long>(r.stored),
      r.stored ? static_cast<double>(r.size) / static_cast<double>(r.stored)
               : 0.0,
      out.seconds,
      out.seconds > 0 ? static_cast<double>(r.size) / 1e6 / out.seconds : 0.0,
      out.choose_seconds, out.chunk_seconds, out.choose_cpu_seconds,
      out.chunk_cpu_seconds);
  std::string fell_back;
  if (out.fallbacks.refused > 0) {
    fell_back = "; " + std::to_string(out.fallbacks.refused) +
                " chunks by the fallback program, which their own could not "
                "code";
  }
  log_event(log_level::info,
            "compressed " + label + ": " + &line[0] + fell_back);
  if (out.fallbacks.faulted > 0) {
    log_event(log_level::error,
              "compressing " + label + " stored " +
                  std::to_string(out.fallbacks.faulted) +
                  " chunks with the fallback program after an encoder fault "
                  "(first: " +
                  out.fallbacks.first_fault +
                  "); they read back exactly, please report this");
  }
  if (r.healed > 0) {
    log_event(log_level::error,
              "compressing " + label + " stored " + std::to_string(r.healed) +
                  " payloads anew whose stored copies were damaged or "
                  "missing: the files naming them read whole again (run "
                  "brevis fsck for the rest)");
  }
}

void mount_fs::report_queue(uint64_t running, std::string const& name) {
  // Best effort: `brevis stats` shows it; a failure here changes nothing.
  try {
    pipeline_status st;
    st.updated_ns = now_ns();
    // This job runs inside the queue: it is one of the pending entries.
    size_t const pending = queue_ ? queue_->pending() : 0;
    st.queued = pending > 0 ? pending - 1 : 0;
    std::lock_guard lk(report_mu_);
    // Idle and empty as last recorded: a commit would say it again (each
    // small file's job ended in one, a third of its syncs).
    if (running == 0 && st.queued == 0 && reported_idle_) return;
    reported_idle_ = false;
    st.running = running;
    st.running_name = name;
    if (running) {
      st.running_since_ns = st.updated_ns;
      st.running_size = store_.stat(running).size;
    }
    store_.set_pipeline_status(st);
    reported_idle_ = running == 0 && st.queued == 0;
  } catch (std::exception const& e) {
    log_error(running, std::string("recording the queue: ") + e.what());
  }
}

// ------------------------------------------------------------------ misc

struct statvfs mount_fs::statfs() {
  // A gc run beside the mount removed packs this process may still hold
  // open: their space comes back when the descriptors close (df after gc).
  store_.forget_removed_packs();
  struct statvfs sv {};
  if (::statvfs(store_.dir().c_str(), &sv) != 0) sys_fail(errno, "statfs");
  sv.f_namemax = 255;
  return sv;
}

std::string mount_fs::getxattr(uint64_t ino, std::string_view name) {
  check_xattr_name(name, xattr_use::read);
  if (name.starts_with(brevis_prefix)) {
    inode_attr const a = store_.stat(ino);
    if (!S_ISREG(a.mode)) store_fail(store_errc::no_attr, "no attribute");
    std::string_view const key = name.substr(brevis_prefix.size());
    struct stat const st = to_stat(a);
    uint64_t const logical = static_cast<uint64_t>(st.st_size);
    uint64_t const stored = a.state == file_state::staged
                                ? static_cast<uint64_t>(st.st_blocks) * 512
                                : a.stored;
    if (key == "state") {
      if (queue_->running(ino)) return "compressing";
      if (queue_->queued(ino)) return "queued";
      return a.state == file_state::staged ? "staged" : "compressed";
    }
    if (key == "logical") return std::to_string(logical);
    if (key == "programs") {
      return a.state == file_state::staged ? std::string() : programs_text(ino);
    }
    if (key == "stored") return std::to_string(stored);
    if (key == "ratio") {
      char buf[32];
      std::snprintf(
          buf, sizeof buf, "%.3f",
          stored ? static_cast<double>(logical) / static_cast<double>(stored)
                 : 0.0);
      return buf;
    }
    store_fail(store_errc::no_attr, "no attribute");
  }
  std::optional<std::string> v = store_.get_xattr(ino, name);
  if (!v) store_fail(store_errc::no_attr, "no attribute");
  return *v;
}

std::string mount_fs::programs_text(uint64_t ino) {
  // One line per run of chunks with the same program: "START-END TEXT".
  std::vector<store::chunk_span> map;
  try {
    map = store_.chunk_map(ino);
  } catch (store_error const& e) {
    // Intact, but a newer brevis's: say so rather than fail the read.
    if (e.code() != store_errc::too_new) throw;
    return std::string("? ") + e.what() + "\n";
  }
  std::unordered_map<codec::node const*, std::string> texts;
  auto text_of = [&](store::chunk_span const& c) -> std::string const& {
    auto [it, fresh] = texts.try_emplace(c.program.get());
    if (fresh) it->second = c.program ? codec::program_text(*c.program) : "?";
    return it->second;
  };
  std::string out;
  for (size_t i = 0; i < map.size();) {
    std::string const& t = text_of(map[i]);
    size_t j = i + 1;
    while (j < map.size() && text_of(map[j]) == t &&
           map[j].offset == map[j - 1].offset + map[j - 1].length) {
      ++j;
    }
    std::string line = std::to_string(map[i].offset) + "-" +
                       std::to_string(map[j - 1].offset + map[j - 1].length) +
                       " " + t + "\n";
    if (out.size() + line.size() > max_xattr_text) {
      out += "... " + std::to_string(map.size() - i) + " more chunks\n";
      break;
    }
    out += line;
    i = j;
  }
  return out;
}

void mount_fs::setxattr(uint64_t ino, std::string_view name,
                        std::string_view value, int flags) {
  check_xattr_name(name, xattr_use::write);
  if (name.starts_with(brevis_prefix)) sys_fail(EPERM, "read-only attribute");
  store_.set_xattr(ino, name, value, flags);
}

std::vector<std::string> mount_fs::listxattr(uint64_t ino, caller who) {
  std::vector<std::string> out = store_.list_xattr(ino);
  // trusted.* names are root's to see (FUSE leaves that filter to us).
  if (who.uid != 0) {
    std::erase_if(
        out, [](std::string const& n) { return n.starts_with("trusted."); });
  }
  if (S_ISREG(store_.stat(ino).mode)) {
    out.insert(out.begin(), std::begin(virtual_xattrs),
               std::end(virtual_xattrs));
  }
  return out;
}

void mount_fs::removexattr(uint64_t ino, std::string_view name) {
  check_xattr_name(name, xattr_use::read);
  if (name.starts_with(brevis_prefix)) sys_fail(EPERM, "read-only attribute");
  store_.remove_xattr(ino, name);
}

}  // namespace brevis::fs
