#pragma once
// The store's internals, shared by store.cpp and store_maint.cpp.

#include <lmdb.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <system_error>
#include <unordered_map>

#include "codec/container/archive.h"
#include "codec/dsl/program.h"
#include "fs/store/deferred_sync.h"
#include "fs/store/hole_puncher.h"
#include "fs/store/lmdb_util.h"
#include "fs/store/pack.h"
#include "fs/store/records.h"
#include "fs/store/store.h"

namespace brevis::fs {

namespace detail {
/// Throws invalid for "", ".", "..", names over 255 bytes or with '/' or NUL.
void check_name(std::string_view name);
}  // namespace detail

struct store::impl {
  std::string dir;
  store_options opt;
  open_report report;

  MDB_env* env = nullptr;
  MDB_dbi meta = 0, inodes = 0, dirents = 0, chunks = 0, programs = 0,
          payloads = 0, packs = 0, extra = 0;
  // Shared by every transaction of this process, exclusive while the map
  // is resized (LMDB requires no active transaction then).
  mutable std::shared_mutex env_lock;
  std::mutex writer_mu;
  int lock_fd = -1;
  // Appending to packs (FORMAT.md S.4): one appender at a time, taken
  // before the writer lock, so a long compression appends while metadata
  // writers go on.
  std::mutex append_mu;
  int append_fd = -1;
  /// The newest pack, `id` with index record `v`, opened to append at its
  /// End (into `rec`); null when appends must start a new pack: its record
  /// is damaged, it is full, or its file is not exactly End bytes long.
  /// Bytes past End that no open truncated are a failed commit's, another
  /// process's interrupted append, or committed payloads past a damaged
  /// End; bytes short of it are lost. Decided from the disk, under the
  /// append lock, so every process decides alike.
  std::unique_ptr<detail::pack_file> open_for_append(
      uint64_t id, detail::byte_view v, detail::pack_rec& rec) const;

  mutable std::mutex prog_mu;
  mutable std::unordered_map<uint64_t, std::shared_ptr<codec::node const>>
      prog_cache;
  mutable std::mutex pack_mu;
  mutable std::unordered_map<uint64_t, std::shared_ptr<detail::pack_file>>
      pack_cache;

  // Records whose payload died in the write transaction running (under the
  // writer lock), handed to the puncher once it commits.
  std::vector<detail::dead_record> dying;
  /// Punches dead records out of their packs (null when read-only).
  /// Declared after everything punch_dead uses, so destroyed before it.
  std::unique_ptr<detail::hole_puncher> puncher;
  /// The puncher's work: each record that no payload names again, and whose
  /// pack still holds it, is deallocated. Returns how many of `dead` (from
  /// the front) it handled: fewer when the packs became busy.
  size_t punch_dead(std::span<detail::dead_record const> dead);
  std::atomic<uint64_t> punched_records{0}, punched_bytes{0}, punch_busy{0};
  /// After a write transaction commits: its dead records to the puncher.
  void queue_dying();
  /// gc's last step: punches the dead records of the packs that remain.
  void punch_kept_packs(gc_report& rep) const;
  /// Opens index/check.lock (-1 on failure). A plain fsck holds it shared
  /// for its run, reading one snapshot for minutes with no other lock.
  int open_check_lock() const;
  /// Whether dead records may be punched now: index/check.lock taken
  /// exclusively, without waiting, and let go at once, so that nothing is
  /// punched that a plain fsck may still read. A check that starts after
  /// takes its snapshot after the commits that killed the records, and
  /// finds them dead already.
  enum class punch_permit { granted, checking, no_lock_file };
  punch_permit may_punch() const;
  std::string kill_point;
  uint64_t kill_count = 0;
  std::unordered_map<std::string, uint64_t> hits;

  impl(std::string d, store_options o);
  ~impl();

  std::string index_dir() const { return dir + "/index"; }
  std::string packs_dir() const { return dir + "/packs"; }
  std::string staging_dir() const { return dir + "/staging"; }
  std::string pack_path(uint64_t id) const {
    return packs_dir() + "/" + detail::pack_name(id);
  }

  /// Runs a fault point: the option hook, then BREVIS_STORE_KILL_AT.
  void hit(std::string_view point);

  /// Grows the map (doubling, up to opt.max_map_size) or throws no_space.
  void grow_map();
  /// Picks up a map size another process set.
  void adopt_map_size();

  /// Runs f(txn&) in a read transaction.
  template <typename F>
  auto read_txn(F&& f) const {
    for (int attempt = 0;; ++attempt) {
      try {
        std::shared_lock lk(env_lock);
        detail::txn t(env, false);
        return f(t);
      } catch (detail::map_resized const&) {
        if (attempt > 3) throw;
        const_cast<impl*>(this)->adopt_map_size();
      }
    }
  }

  /// Holds the writer lock (this process's mutex and the store's flock).
  class writer_guard {
   public:
    explicit writer_guard(impl& s);
    ~writer_guard();
    writer_guard(writer_guard const&) = delete;
    writer_guard& operator=(writer_guard const&) = delete;

   private:
    impl& s_;
  };

  /// Holds the append lock (this process's mutex and index/append.lock).
  /// Anything that appends to or cuts packs takes it before the writer lock.
  class append_guard {
   public:
    explicit append_guard(impl& s);
    /// Takes it only if no one holds it: see owns_lock().
    append_guard(impl& s, std::try_to_lock_t try_only);
    ~append_guard();
    append_guard(append_guard const&) = delete;
    append_guard& operator=(append_guard const&) = delete;
    append_guard(append_guard&&) = delete;
    append_guard& operator=(append_guard&&) = delete;
    bool owns_lock() const { return owns_; }

   private:
    impl& s_;
    bool owns_ = true;
  };
  /// Creates pack `id`, which no committed record names. With the append
  /// lock held: a file of that name is a leftover of an append that never
  /// committed (when crash recovery was skipped) and is replaced -- unless
  /// payloads are stored in it (looked up in `t`, the caller's transaction,
  /// or a read of its own): then the index lost its record and next_pack's
  /// bump, and the file is all there is of them (bad_store).
  std::unique_ptr<detail::pack_file> create_pack(
      uint64_t id, detail::txn const* t = nullptr);

  /// Runs f(txn&) in a write transaction under the writer lock and commits
  /// it; grows the map and runs f again when it fills.
  template <typename F>
  auto write_txn(F&& f) {
    writer_guard g(*this);
    return write_txn_locked(f);
  }
  /// write_txn whose commit is not synced (commit_unsynced): for records
  /// no irreversible step follows, such as a new inode or new attributes.
  template <typename F>
  auto unsynced_write_txn(F&& f) {
    writer_guard g(*this);
    return write_txn_locked(f, false);
  }
  /// Same, for a caller that already holds the writer lock.
  /// write_txn for an operation that frees space (an unlink, a rename over
  /// a file): on a full disk it gives up the reserve and tries once more.
  /// LMDB copies every page a commit changes, so a full disk would fail
  /// even a removal, and nothing could be freed (ext4's unlink works).
  template <typename F>
  auto freeing_txn(F&& f) {
    try {
      return write_txn(f);
    } catch (store_error const& e) {
      // Only for a full disk (not a map at its maximum size).
      if (e.code() != store_errc::no_space || !disk_full() ||
          !release_reserve()) {
        throw;
      }
    }
    return write_txn(f);
  }
  /// The reserve: up to reserve_bytes kept allocated beside the index for
  /// freeing_txn. Made when missing (best effort: not on a full disk).
  std::string reserve_path() const { return index_dir() + "/reserve"; }
  static constexpr off_t reserve_bytes = off_t{16} << 20;
  void keep_reserve() const;
  /// Removes the reserve; whether there was one.
  bool release_reserve() const;

  template <typename F>
  auto write_txn_locked(F&& f, bool synced = true) {
    for (;;) {
      try {
        std::shared_lock lk(env_lock);
        detail::txn t(env, true);
        dying.clear();
        auto r = f(t);
        if (t.get()) {  // f may commit itself
          // Records it made dead are punched once it commits: synced first.
          if (synced || !dying.empty()) {
            commit(t);
          } else {
            commit_unsynced(t);
          }
        }
        queue_dying();
        return r;
      } catch (detail::map_full const&) {
        grow_map();
      } catch (detail::map_resized const&) {
        adopt_map_size();
      }
    }
  }
  /// Whether the index's filesystem has (next to) no space left.
  bool disk_full() const;
  /// Commits `t` and syncs the index: durable once it returns, with every
  /// commit before it (FORMAT.md S.4). LMDB's EIO for a write a full disk
  /// cut short is ENOSPC.
  /// A sync that fails throws with the commit visible but not durable:
  /// the caller then skips the irreversible step that was to follow (a
  /// staged copy or a pack stays, for tidy() or gc).
  void commit(detail::txn& t) {
    commit_txn(t);
    unsynced = true;
    sync_index();
  }
  /// Commits `t` without syncing the index (the environment is opened
  /// MDB_NOMETASYNC: its pages are synced, its meta page is not). A power
  /// loss or an OS crash may undo it (never a process's crash), leaving
  /// the index as the commit before it left it; the next synced commit,
  /// sync_index(), or the deferred sync a moment later makes it durable.
  void commit_unsynced(detail::txn& t) {
    commit_txn(t);
    unsynced = true;
    try {
      syncer->due();
    } catch (...) {  // no thread (or no memory for one): sync now, then
      sync_index();
    }
  }
  void commit_txn(detail::txn& t) {
    try {
      t.commit();
    } catch (detail::map_resized const&) {
      throw;  // the caller adopts the new size and runs it again
    } catch (store_error const& e) {
      if (e.code() != store_errc::io || !disk_full()) throw;
      store_fail(store_errc::no_space,
                 std::string(e.what()) + " (the disk is full)");
    }
  }
  /// Makes every commit so far durable (one fdatasync; none when every one
  /// was synced). Hit point "index_synced" after it synced. With env_lock
  /// held (shared): LMDB's sync may read the meta pages a resize remaps.
  void sync_index();
  /// How long a commit may stay unsynced.
  static constexpr unsigned unsynced_ms = 1000;
  std::atomic<bool> unsynced{false};
  std::mutex sync_mu;  // sync_index's, around the flag and the sync
  // Made once the store is open (a writer's only), never replaced.
  std::unique_ptr<detail::deferred_sync> syncer;

  std::shared_ptr<codec::node const> program(detail::txn const& t,
                                             uint64_t hash) const;
  std::shared_ptr<detail::pack_file> pack_for_read(uint64_t id) const;
  /// The ids of the pack files in packs/, in order.
  std::vector<uint64_t> pack_files() const;
  /// For each pack that payload records point into, where its last such
  /// record ends (one scan of the payloads). Records of another size are
  /// fsck's to judge and are left out.
  std::unordered_map<uint64_t, uint64_t> payload_pack_ends(
      detail::txn const& t) const;
  /// Whether the stored copy `pr` of payload `key` reads back whole (its
  /// record's framing and hash): false when it is damaged or its pack is
  /// missing or unreadable. A new file naming that payload then stores it
  /// again and repoints it (repoint_payload), healing every file naming it.
  bool payload_intact(detail::payload_rec const& pr,
                      detail::payload_key const& key) const;
  /// Points payload record `pr` at a fresh copy of `length` bytes at
  /// `offset` of pack `pack` (the length too: a damaged one made the copy
  /// look damaged). The old copy's bytes stop counting as live in its pack
  /// (when that pack has a record); returned instead when it is `pack`,
  /// whose Live the caller counts.
  uint64_t repoint_payload(detail::txn& t, detail::payload_rec& pr,
                           uint64_t pack, uint64_t offset, uint64_t length);
  void forget_pack(uint64_t id) const;
  /// Closes the cached descriptors of packs another process removed (gc).
  void forget_removed_packs() const;
  void drop_removed_packs_locked() const;  // pack_mu held

  detail::inode_rec get_inode(detail::txn const& t, uint64_t ino) const;
  /// Drops one chunk reference to a payload; frees it at zero.
  void unref_payload(detail::txn& t, detail::payload_key const& key);
  void add_live(detail::txn& t, uint64_t pack, int64_t delta);
  /// Deletes an inode, its chunk records (dropping their references) and
  /// its extra entries.
  void drop_inode(detail::txn& t, uint64_t ino);
  /// Deletes an inode's chunk records and drops their references.
  void drop_chunks(detail::txn& t, uint64_t ino);
  uint64_t next_counter(detail::txn& t, char const* name, uint64_t first);

  /// A file's regions parsed, programs chosen and chunks planned (the slow,
  /// lock-free part of an add); `data` must outlive it.
  struct encode_plan {
    encode_plan(codec::byte_view data, std::string_view name,
                codec::program_chooser const& chooser, uint32_t chunk_size,
                std::function<bool()> const& cancelled);
    codec::archive_writer w;
    std::vector<codec::bytes> prog_bytes;
    std::vector<uint64_t> prog_hash;
    uint64_t size = 0;
    uint64_t whole = 0;  // XXH3-64 of the file
  };
  /// The pack a write transaction appends to (the append lock held);
  /// truncates what it appended when the transaction did not commit, and
  /// leaves it when a commit was attempted and failed (it may have reached
  /// the disk: the next writer's open reconciles the tail with the index).
  struct pack_append {
    pack_append(impl& s, detail::txn& t);
    ~pack_append();
    pack_append(pack_append const&) = delete;
    pack_append& operator=(pack_append const&) = delete;
    /// Puts the pack record (end = pos) into the transaction.
    void record(impl& s, detail::txn& t);
    /// fdatasyncs what was appended (before the commit).
    void sync();
    std::unique_ptr<detail::pack_file> pack;
    std::string path;
    uint64_t id = 0;
    detail::pack_rec prec;
    bool fresh = true;
    uint64_t start = 0, pos = 0;
    bool committing = false;  // set just before the commit
    bool done = false;
  };
  /// Encodes plan's chunks in batches and puts their records under `ino`;
  /// payloads the store lacks are appended to pa, the others referenced.
  void write_chunks(detail::txn& t, encode_plan const& plan, uint64_t ino,
                    pack_append& pa, add_result& res,
                    std::function<bool()> const& cancelled);
  /// Deletes an inode's entries in `extra` (symlink target, parent, xattrs).
  void drop_extra(detail::txn& t, uint64_t ino);

  void recover();
  /// Truncates each of `long_packs` (id, file size) to its committed end,
  /// unless payloads lie past that end (then it is reported damaged and
  /// left as it is).
  void truncate_interrupted_appends(
      std::unordered_map<uint64_t, detail::pack_rec> const& committed,
      std::vector<std::pair<uint64_t, uint64_t>> const& long_packs);
};

inode_attr to_attr(uint64_t ino, detail::inode_rec const& r);

}  // namespace brevis::fs
