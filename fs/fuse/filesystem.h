#pragma once
// The mounted filesystem's logic over the store, without libfuse (ops.cpp is
// the only file that sees <fuse_lowlevel.h>; it calls these and replies).
//
// Files are the store's inodes (the FUSE inode number is the store's). A
// regular file is either staged -- its bytes in staging/INODE, read and
// written there at disk speed -- or compressed -- read through the store's
// range reads. When the last writer closes a staged file it is queued; after
// a quiet period the worker compresses it into the store (commit first,
// then the staged copy goes). Opening a compressed file for writing, or
// truncating it, first brings it back to staging; a writer arriving while
// its file is being compressed cancels that and waits for it.
//
// Reads of compressed files go through a chunk_cache of decoded chunks
// keyed by (inode, generation, chunk offset); the generation changes under
// node::io held exclusively whenever the file's stored bytes may (staged
// again, compressed anew, forgotten), and reads hold io shared, so a
// decode never lands under a generation it does not belong to. The chunks
// a read covers are decoded in parallel (the prefetch threads take all but
// the first), sequential readers get the next chunks decoded in the
// background, and the chunks they have left behind leave the cache at once
// (the kernel keeps those pages). read_view() hands out the cached chunks
// themselves, so a FUSE reply is written straight from them, without a copy.
//
// Lock order (a thread holding one of these takes only later ones):
//   1. node::mu      a node's fields (writers, opens, compressing, ...);
//   2. node::io      the staged fd against state changes (staged <->
//                    compressed); shared for reads and writes;
//   3. the store     any store call (its writer lock, then its own locks);
//   4. leaves        nodes_mu_, node::map_mu, the queue's, the cache's:
//                    held only to touch their data, never across a call
//                    into the store or another of our locks.
// The store calls back under its writer lock (keep_fn, cancelled), so a
// callback may take leaves only: it reads node::opens and node::cancel,
// which are atomics. Waiting for a compression to end (node::cv) happens
// with nothing held but node::mu, which the wait releases. No lock is held
// while a reply is sent (the callers reply after these return).
//
// The staged copy: only create() and the restaging path make staging/INODE;
// opening it never recreates it. A node counts as open (node::opens) before
// its staged copy is touched, so a concurrent unlink keeps the inode as an
// orphan rather than dropping it under an open; a path that finds the inode
// gone after counting itself removes what it made and fails with ENOENT.
// That check (alive()) waits out a remove in progress: the store asks
// keep_fn before it commits, so a drop decided before the count may not be
// visible yet, and an open let through then would fail its reads and fstat.
//
// Errors: methods throw store_error (its errno_value() is the reply) or
// std::system_error (its code is an errno).

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "codec/choose/chooser.h"
#include "fs/cache/chunk_buffers.h"
#include "fs/cache/chunk_cache.h"
#include "fs/cache/decode_slots.h"
#include "fs/fuse/lookup_counts.h"
#include "fs/fuse/owned_fd.h"
#include "fs/fuse/resize_gate.h"
#include "fs/pipeline/compress_graph.h"
#include "fs/pipeline/compress_queue.h"
#include "fs/store/store.h"

namespace brevis::fs {

/// Who asks (from the FUSE request): new files belong to them.
struct caller {
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> groups;  // supplementary; filled only where needed
};

struct setattr_request {
  std::optional<uint32_t> mode, uid, gid;
  std::optional<uint64_t> size;
  std::optional<int64_t> mtime_ns;  // already resolved for "now"
  // The kernel's, where it keeps the times (writeback cache); else the
  // change takes the daemon's clock.
  std::optional<int64_t> ctime_ns;
};

class mount_fs {
 public:
  struct options {
    unsigned quiet_ms = 1000;  // after the last writer closes
    bool compress = true;  // false: files stay staged (tests, --no-compress)
    unsigned workers = 1;
    /// Bytes the compression pipeline may hold in flight (compress_graph.h).
    size_t pipeline_memory = default_pipeline_memory;
    size_t cache_bytes = 256u << 20;  // decoded chunks kept (0: no cache)
    /// Sequential readers get the chunks starting within this many chunk
    /// sizes (store::chunk_size) past the end of their read decoded in the
    /// background; 0: no background decoding at all. With it, the chunks a
    /// read covers past its first are decoded by the prefetch threads too.
    unsigned prefetch = 2;
    /// A long sequential stream reads further ahead: the window grows with
    /// the bytes it has read in a row, from `prefetch` chunk sizes up to
    /// this many (at most an eighth of the cache).
    unsigned prefetch_max = 8;
    unsigned prefetch_threads = 0;  // 0: one per core, at least 2
    unsigned decoders = 0;  // background chunk decodes at once (readers: one
                            // more); 0: one per core
    /// A read this close to where a sequential run has been read up to,
    /// or to its furthest read, continues the run (the kernel's readahead
    /// requests may arrive out of order); chunks ending this far behind
    /// what every read of the run has passed are dropped.
    uint64_t sequential_slack = 4u << 20;
    /// Called when a file's stored size changed behind the kernel's back,
    /// so the binding can drop the kernel's cached attributes (`du` then
    /// sees it at once): on a compression worker (several may call it at
    /// once) when a file's compressed copy is committed and its staged copy
    /// removed, and on an open's thread, with no lock held, when the open
    /// brought a compressed file back to staging. Must not throw. Unset:
    /// nothing is told.
    std::function<void(uint64_t ino)> attributes_changed;
  };

  mount_fs(store& s, codec::program_chooser const& chooser, options opt);
  ~mount_fs();
  mount_fs(mount_fs const&) = delete;
  mount_fs& operator=(mount_fs const&) = delete;

  /// Tidies the store after an unclean stop and queues the staged files.
  void start();
  /// Stops taking work and cancels what is running (left staged).
  void shutdown();
  /// At a stop: starts timing the writes that still come, and returns the
  /// files some handle holds open for writing (the kernel may hold pages
  /// of theirs not yet written back).
  std::vector<uint64_t> begin_write_back();
  /// After begin_write_back(): returns once no write has come for 200 ms,
  /// or after 5 s, or once `hurry` says so.
  void wait_for_quiet_writes(std::function<bool()> const& hurry);
  /// Releases the handles whose release never came, as their last closes
  /// would (recording sizes and times, dropping orphans), and returns how
  /// many files had any. Only after shutdown(), once the session is over:
  /// no handle is left then.
  size_t release_all_at_stop();

  /// Also of an inode whose last name went while the kernel may still hold
  /// it (an open directory, a cwd, an open FIFO, an O_PATH descriptor to an
  /// unlinked file): nlink 0, until forget(). A file open through the mount
  /// when unlinked, or held by the kernel when a rename replaced it, stays
  /// whole, an orphan, until its last release and the kernel's FORGET.
  struct stat getattr(uint64_t ino);
  /// The kernel is given a reference to `ino` (an entry reply): counted
  /// before the reply goes out, since its FORGET may follow at once.
  void looked_up(uint64_t ino) { lookups_.add(ino); }
  /// The kernel gave back `nlookup` references to `ino` (FUSE's forget, or
  /// an entry reply that did not go out); with none left, what the mount
  /// kept of a removed `ino` goes, and an orphan no handle has open is
  /// dropped from the store (a transaction; a failure is logged, and the
  /// stop or the next mount drops it).
  void forget(uint64_t ino, uint64_t nlookup) noexcept;
  /// Throws not_found.
  struct stat lookup(uint64_t parent, std::string_view name);
  /// A new size also waits until no read of `ino` is being answered, and
  /// keeps new reads waiting while `resizing` holds that (the caller keeps
  /// it until the reply is written; resize_gate.h), else until it returns.
  struct stat setattr(uint64_t ino, setattr_request const& r,
                      resize_gate::hold* resizing = nullptr);

  /// Creates and opens a staged file; the handle is a writer.
  struct stat create(uint64_t parent, std::string_view name, uint32_t mode,
                     int flags, caller const& who);
  struct stat mkdir(uint64_t parent, std::string_view name, uint32_t mode,
                    caller const& who);
  struct stat symlink(uint64_t parent, std::string_view name,
                      std::string_view target, caller const& who);
  /// A FIFO or a socket (the kernel serves their I/O; the store keeps the
  /// inode). Other types: EPERM.
  struct stat mknod_special(uint64_t parent, std::string_view name,
                            uint32_t mode, caller const& who);
  struct stat link(uint64_t ino, uint64_t parent, std::string_view name);
  std::string readlink(uint64_t ino);
  void unlink(uint64_t parent, std::string_view name);
  void rmdir(uint64_t parent, std::string_view name);
  void rename(uint64_t parent, std::string_view name, uint64_t new_parent,
              std::string_view new_name, unsigned flags);

  struct entry {
    std::string name;
    struct stat st;
  };
  /// ".", ".." and the entries, in name order.
  std::vector<entry> readdir(uint64_t ino);

  /// Returns whether the handle counts as a writer (pass it to release).
  /// An O_TRUNC by `who` other than root also clears the setuid bit, and
  /// setgid where group execute is set or `who` is not in the file's group
  /// (`who.groups` then matters), as a truncate through setattr does.
  /// An O_TRUNC holds reads off as setattr does (`resizing`).
  bool open(uint64_t ino, int flags, caller who = {},
            resize_gate::hold* resizing = nullptr);
  size_t read(uint64_t ino, uint64_t offset, size_t size, uint8_t* out);
  /// A read's bytes for a reply without a copy: `pieces` point into the
  /// decoded chunks `hold` keeps alive, or into `staged`. Or, for a staged
  /// file when the caller can read a descriptor itself (`from_fd`), none of
  /// those: `fd` is a duplicate of the staged copy's descriptor, from which
  /// the reply reads up to `size` bytes at the read's offset (FUSE splices
  /// them: no copy through our memory).
  /// `gate` keeps truncates of the file out until the reply is written
  /// (resize_gate.h).
  struct read_data {
    resize_gate::hold gate;
    std::vector<chunk_cache::chunk> hold;
    std::unique_ptr<uint8_t[]> staged;
    std::vector<iovec> pieces;
    size_t size = 0;
    owned_fd fd;
  };
  read_data read_view(uint64_t ino, uint64_t offset, size_t size,
                      bool from_fd = false);
  size_t write(uint64_t ino, uint64_t offset, uint8_t const* data, size_t size);
  /// Writes `size` bytes at `offset` of a staged file through `put`, which
  /// writes at most `len` of the rest to descriptor `fd` at `at` and returns
  /// how many, or -errno (FUSE splices a write's pages this way).
  using write_fn = std::function<ssize_t(int fd, uint64_t at, size_t len)>;
  size_t write_with(uint64_t ino, uint64_t offset, size_t size,
                    write_fn const& put);
  /// Whether the kernel keeps files' times (its writeback cache is on): it
  /// then dates every write, truncate and fallocate itself, and states the
  /// mtime (setattr) only when it moved, before the last writer's close.
  /// That close then records the mtime the kernel last stated, not the
  /// staged copy's, which moved with each write the daemon made.
  void kernel_keeps_times(bool on) { kernel_keeps_times_ = on; }
  /// What a close of a descriptor of `ino` answers (FUSE's flush): the
  /// errno of the first write of its staged copy that failed, else 0.
  int flush(uint64_t ino);
  /// Throws that error too, before syncing.
  void fsync(uint64_t ino, bool datasync);
  /// Makes every change so far durable (a directory's fsync).
  void sync_index() { store_.sync(); }
  /// `writer`: what open() returned; create() handles are writers.
  void release(uint64_t ino, bool writer);
  /// fallocate(2) modes 0, FALLOC_FL_KEEP_SIZE and FALLOC_FL_PUNCH_HOLE on
  /// a staged, open file (others: EOPNOTSUPP).
  void fallocate(uint64_t ino, int mode, uint64_t offset, uint64_t length);

  struct statvfs statfs();

  /// user.brevis.* are computed (state, logical, stored, ratio); other
  /// names are stored. Throws no_attr.
  std::string getxattr(uint64_t ino, std::string_view name);
  void setxattr(uint64_t ino, std::string_view name, std::string_view value,
                int flags);
  /// trusted.* names only to root.
  std::vector<std::string> listxattr(uint64_t ino, caller who = {});
  void removexattr(uint64_t ino, std::string_view name);

  chunk_cache const& cache() const { return cache_; }
  /// Waits for the prefetcher to go idle (tests).
  void drain_prefetch() { prefetch_.drain(); }

  /// Files queued or being compressed (tests, shutdown).
  size_t pending() const { return queue_ ? queue_->pending() : 0; }

 private:
  struct node;
  /// The node of `ino`, made from the store's record when missing.
  std::shared_ptr<node> get(uint64_t ino);
  /// The node of `ino` when there is one (takes nodes_mu_ only).
  std::shared_ptr<node> find_node(uint64_t ino);
  /// Whether the store still has `ino` (linked, or an orphan kept open),
  /// after any remove in progress has committed (store::exists_settled).
  bool alive(uint64_t ino);
  /// The store dropped `ino`: its node is marked gone and leaves nodes_
  /// now, or at its last release when it is still open.
  void forget_node(uint64_t ino);
  void erase_node(std::shared_ptr<node> const& n);
  /// Every node there is now (a copy of the table, taken under nodes_mu_).
  std::vector<std::shared_ptr<node>> all_nodes();
  /// The last handle of orphan `n` went: drop the inode and its copy.
  void drop_orphan(node& n);
  /// Queues staged `n` again after an interrupted compression.
  void requeue(node& n);
  struct stat to_stat(inode_attr const& a);
  /// Brings compressed `n` back to staging (keeping `keep` bytes) and opens
  /// its staged fd; with io held exclusively.
  void stage_locked(node& n, uint64_t keep);
  void open_fd_locked(node& n);
  /// Waits until n is not being compressed (cancelling it); n.mu held.
  /// Returns whether it had to wait.
  bool wait_not_compressing(node& n, std::unique_lock<std::mutex>& lk);
  /// A writer is done with n: record size and mtime, queue it.
  void written(node& n);
  /// The store dropped or orphaned an inode that lost its last name.
  void after_unlink(store::unlink_result const& r);
  /// A new node's owner: the caller, with the group (and for directories
  /// the setgid bit) of a setgid parent.
  void set_owner(uint64_t parent, store::node_spec& spec, caller const& who);
  void compress_job(uint64_t ino);
  /// Records the queue in the store for `brevis stats` (running: 0 idle).
  void report_queue(uint64_t running, std::string const& name);
  std::mutex report_mu_;
  bool reported_idle_ = false;  // the store says: nothing queued or running
  /// A job that failed for a reason other than a writer or an unlink.
  static constexpr unsigned retry_delay_s = 60;
  /// Jobs from this size on are recorded as running (report_queue).
  static constexpr uint64_t status_min_bytes = 16u << 20;
  /// n's chunk map for generation `gen`; io held shared.
  std::shared_ptr<std::vector<store::chunk_span> const> chunks_of(node& n,
                                                                  uint64_t gen);
  /// Decodes the chunk `sp` of `n` into a buffer of buffers_, for a reader
  /// waiting for it or in the background; io held.
  chunk_cache::chunk load_chunk(node& n, store::chunk_span const& sp,
                                bool reader);
  /// How far past its end a sequential reader that has read `run` bytes in
  /// a row gets chunks decoded: like the kernel's readahead, the window
  /// grows with the run, so a short read does not decode much for nothing
  /// while a stream keeps both cores decoding through the kernel's pauses
  /// between requests.
  uint64_t prefetch_window(uint64_t run) const;
  /// A prefetch job takes neighbouring chunks up to about this many bytes.
  static constexpr uint64_t prefetch_job_bytes = 256u << 10;
  /// The decoded chunk of n (generation `gen`) starting at `sp`; io held.
  chunk_cache::chunk chunk_at(node& n, uint64_t gen,
                              store::chunk_span const& sp);
  /// The compressed read into `d`; io held shared.
  void read_compressed(std::shared_ptr<node> const& n, uint64_t offset,
                       size_t size, read_data& d);
  /// The read [offset, end) of run `run` of n was answered: the chunks
  /// every read of the run has passed leave the cache.
  void drop_behind(node& n, uint64_t gen,
                   std::vector<store::chunk_span> const& map, uint64_t run,
                   uint64_t offset, uint64_t end);
  /// How far a sequential run's reads may be spread: a READ this far past
  /// its furthest still continues an established run, and bytes this far
  /// behind it that were never read are given up on.
  uint64_t far_behind() const {
    return 8 * std::max<uint64_t>(opt_.sequential_slack, 1u << 20);
  }
  /// The file's bytes may have changed: new generation, cache dropped. io
  /// held exclusively (or the node is being forgotten).
  void new_generation(node& n);
  std::string programs_text(uint64_t ino);

  store& store_;
  codec::program_chooser const& chooser_;
  options opt_;
  std::mutex nodes_mu_;
  std::unordered_map<uint64_t, std::shared_ptr<node>> nodes_;
  // Removed inodes, as they went, until the kernel forgets them: it still
  // stats an open directory, a cwd or an open FIFO after the last name goes.
  // Only their attributes: the bytes of a regular file go with it unless it
  // is open or a rename replaced it (an orphan, node::orphan). A leaf lock.
  // Inode numbers are never reused.
  std::mutex removed_mu_;
  std::unordered_map<uint64_t, struct stat> removed_;
  /// The attributes of removed `ino`, if it is kept in removed_.
  std::optional<struct stat> removed_attr(uint64_t ino);
  /// Keeps removed `ino`'s attributes while the kernel holds it.
  void keep_removed(uint64_t ino, struct stat const& st);
  lookup_counts lookups_;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> kernel_keeps_times_{false};
  // When the last write came in (steady clock, ns), timed only from
  // begin_write_back() on: a store by every writing thread costs the
  // write path a contended cache line.
  std::atomic<bool> timing_writes_{false};
  std::atomic<int64_t> last_write_ns_{0};
  std::unique_ptr<compress_queue> queue_;
  std::atomic<uint64_t> next_gen_{1};
  std::shared_ptr<chunk_buffers> buffers_;
  chunk_cache cache_;
  decode_slots decoders_;
  background_jobs prefetch_;
};

}  // namespace brevis::fs
