#pragma once
// The program store (DESIGN 3.1, FORMAT.md S): a directory holding
//   index/    one LMDB environment: inodes, directory entries, chunk records,
//             programs and payloads (with reference counts), packs, meta;
//   packs/    append-only pack files of chunk payloads, each record framed
//             with its length and XXH3-128;
//   staging/  plain files not yet compressed.
// A file is added by running the codec over it (regions, programs, chunks),
// appending the payloads the store does not hold yet to a pack, syncing the
// pack, and committing every record in one LMDB write transaction. Reads
// decode only the chunks a byte range covers.
//
// Caveats:
//  - One writer at a time: add, unlink, fsck --repair and gc serialize on a
//    mutex within the process and an flock (index/writer.lock) across
//    processes. Readers never wait for the writer (LMDB MVCC).
//  - The environment is opened with MDB_NOTLS, so reads may run on any
//    oneTBB worker thread; each read uses its own short read transaction.
//  - Pack records are written and fsynced before the transaction that points
//    at them commits; bytes past a pack's committed end are an interrupted
//    append and are truncated when the store is next opened by a writer.
//  - Growing the LMDB map waits for in-flight reads of this process.
//  - Do not use a store object across fork(); open a new one in the child.
//
// Errors: every method throws store_error (fs/store/error.h). A payload or
// chunk that fails its checksum gives store_errc::corrupt (EIO), never wrong
// bytes; a full disk or a map at max_map_size gives store_errc::no_space
// (ENOSPC) and leaves the store as it was before the call.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/choose/chooser.h"
#include "codec/container/archive.h"
#include "codec/core/bytes.h"
#include "fs/store/error.h"

namespace brevis::fs {

inline constexpr uint64_t root_inode = 1;

enum class file_state : uint32_t { compressed = 1, staged = 2 };

struct inode_attr {
  uint64_t ino = 0;
  uint32_t mode = 0;  // S_IFREG | 0644, S_IFDIR | 0755, ...
  uint32_t nlink = 0;
  uint32_t uid = 0, gid = 0;
  uint64_t size = 0;    // logical bytes
  uint64_t stored = 0;  // bytes of the payloads it names, each once
  int64_t mtime_ns = 0, ctime_ns = 0;
  uint64_t checksum = 0;  // XXH3-64 of the whole file
  uint32_t chunk_count = 0;
  file_state state = file_state::compressed;
};

struct dir_entry {
  std::string name;
  inode_attr attr;
};

struct store_options {
  bool create = true;  // create the directory layout when missing
  /// Opens the index read-only (MDB_RDONLY): no writer lock, no recovery,
  /// and every write throws. For `brevis stats` beside a live mount.
  bool read_only = false;
  uint64_t initial_map_size = 64ull << 20;
  uint64_t max_map_size = 1ull << 40;  // growth past this is ENOSPC
  uint64_t pack_limit = 1ull << 30;    // start a new pack past this size
  uint32_t chunk_size = codec::default_chunk_size;
  /// How long after a payload's last file went its record is punched out
  /// of its pack (FORMAT.md S.2.1); a store being closed punches what is
  /// left at once.
  uint32_t punch_delay_ms = 5000;
  /// Called at named points of the write path ("pack_write", "pack_synced",
  /// "commit" (just before it), "committed", "gc_copied", "unlink_drop"
  /// (a remove or rename dropping the inode, under the writer lock), ...);
  /// tests use it to fail, kill or wait there. The environment variable
  /// BREVIS_STORE_KILL_AT=POINT:N raises SIGKILL at the Nth time POINT is
  /// reached (crash tests of the binary).
  std::function<void(std::string_view point)> fault_hook;
};

/// What opening the store found and repaired.
struct open_report {
  bool recovered = false;  // false when another process held the writer lock
  std::vector<std::string> truncated;      // "PACK: N bytes past committed end"
  std::vector<std::string> removed_packs;  // packs no commit refers to
  std::vector<std::string> short_packs;    // packs shorter than committed
  // Packs whose index record is damaged (of another size, or ending before
  // payloads it holds): left as they are, and never appended to (fsck
  // --repair rebuilds the record).
  std::vector<std::string> damaged_packs;
  std::vector<std::string> staged_uncommitted;  // staging/ files
};

/// A line of what an open found, and whether it is damage (else routine
/// recovery): what the CLI prints and the mount logs. Staged files without
/// a committed version are listed only `with_staged` (a mount has them as a
/// matter of course: files not compressed yet).
struct open_finding {
  bool damage = false;
  std::string line;
};
std::vector<open_finding> findings(open_report const& r, bool with_staged);

struct add_result {
  uint64_t ino = 0;
  uint64_t size = 0;
  uint64_t stored = 0;   // bytes of the payloads it names, each once
  uint64_t written = 0;  // payload bytes newly appended to packs
  uint64_t chunks = 0;
  uint64_t dedup_chunks = 0;  // chunks whose payload was already stored
  // Payloads stored already but damaged or missing, stored anew: every
  // file naming one reads it from the new copy.
  uint64_t healed = 0;
  bool replaced = false;  // an earlier file of that name was dropped
};

/// One finished compression of the mount, kept in a ring of the last
/// job_ring_size in the store (FORMAT.md S.3, `extra` under inode 0).
struct job_record {
  int64_t finished_ns = 0;  // wall clock (CLOCK_REALTIME)
  uint64_t ino = 0;
  uint64_t size = 0;    // logical bytes
  uint64_t stored = 0;  // bytes of the payloads it names, each once
  uint64_t micros = 0;  // from the job's start to its commit
  std::string name;
};
inline constexpr uint64_t job_ring_size = 32;

/// What the mount's compression queue is doing, as last written by the
/// mount (at every job's start and end).
struct pipeline_status {
  int64_t updated_ns = 0;  // wall clock
  uint64_t queued = 0;     // files waiting (quiet period or queue)
  uint64_t running = 0;    // the inode being compressed, 0 when idle
  uint64_t running_size = 0;
  int64_t running_since_ns = 0;
  std::string running_name;
};

struct store_stats {
  uint64_t files = 0, dirs = 0;
  uint64_t staged_files = 0, staged_bytes = 0;  // not compressed yet
  uint64_t logical = 0;                         // sum of file sizes
  uint64_t referenced = 0;  // payload bytes of every chunk reference
  uint64_t unique = 0;      // payload bytes stored once (what dedup keeps)
  uint64_t payloads = 0;    // distinct payloads
  uint64_t programs = 0;
  uint64_t packs = 0;
  uint64_t pack_bytes = 0;       // committed bytes of all packs
  uint64_t live_bytes = 0;       // bytes of referenced records in packs
  uint64_t pack_disk_bytes = 0;  // what the pack files take on the disk
  uint64_t map_size = 0, map_used = 0;
};

struct fsck_options {
  bool repair = false;
  bool decode = true;  // decode every chunk and check its XXH3
  /// A live mount holds the store: an inode with no name and a link count
  /// of 0 is a file it keeps open after its last unlink (an orphan, see
  /// remove() with a keep_fn), not damage. Without a mount it is left over
  /// from a crash: a problem, dropped by --repair (as the next mount would).
  bool mounted = false;
};

struct fsck_report {
  uint64_t records = 0, chunks = 0, files = 0;
  std::vector<std::string> problems;
  std::vector<std::string> repairs;
  // Files whose programs only a newer brevis reads (intact: not problems,
  // and --repair keeps them).
  std::vector<std::string> too_new;
  // Files a live mount keeps open after their last unlink (kept).
  std::vector<std::string> open_orphans;
  bool clean() const { return problems.empty(); }
};

struct gc_report {
  uint64_t packs_rewritten = 0, packs_removed = 0;
  uint64_t records_moved = 0, bytes_moved = 0;
  uint64_t bytes_reclaimed = 0;
  uint64_t programs_removed = 0;
  // Dead records punched out of the packs kept (FORMAT.md S.2.1), and the
  // disk space that freed.
  uint64_t records_punched = 0, bytes_punched = 0;
  // Nothing punched: a plain check (fsck) was reading the store, and may
  // still read the dead records. The next gc punches them.
  bool punching_deferred = false;
  // Packs left as they are because a live record in them is damaged
  // (fsck --repair decides about it): each with the first damage found.
  std::vector<std::string> damaged;
};

/// Refuses a store directory, or an index/, packs/ or staging/ in it (links
/// followed), that someone other than the caller and root could change:
/// one owned by another user, writable by others, or writable by a group
/// other than its owner's private one. Whoever could change them could
/// point the store's writes elsewhere (a root mount of another user's store
/// wrote and deleted through links planted there). Then makes index/,
/// packs/ and staging/ 0700 (stores made before were open to all), so that
/// stored files are read only through the mount, where their own
/// permissions apply. Throws store_error (bad_store). Writer opens call it;
/// so does the mount, before it makes its lock file.
void secure_store_directory(std::string const& dir);

class store {
 public:
  /// Opens (or creates) the store at `dir`, then, when no other process is
  /// writing, truncates uncommitted pack tails and removes packs no commit
  /// refers to (see report()).
  explicit store(std::string dir, store_options opt = {});
  ~store();
  store(store const&) = delete;
  store& operator=(store const&) = delete;

  open_report const& report() const;
  std::string const& dir() const;
  /// Closes this process's descriptors of packs that gc (in this or another
  /// process) removed, so that their space is freed: a mount asks before it
  /// reports free space.
  void forget_removed_packs() const;
  /// Makes every commit so far durable. Creates, links and attribute
  /// changes commit without a sync, and are synced within a second
  /// (FORMAT.md S.4); a file's fsync on the mount asks for this.
  void sync() const;
  /// Logical bytes per chunk of new files (store_options::chunk_size).
  uint32_t chunk_size() const;

  /// The inode of `name` in directory `parent`, or nullopt.
  std::optional<uint64_t> lookup(uint64_t parent, std::string_view name) const;
  /// Throws not_found.
  inode_attr stat(uint64_t ino) const;
  /// Whether inode `ino` is in the store (linked, or kept by a remove),
  /// once any write transaction of this process in progress has ended. The
  /// mount counts a handle, then asks: a remove that saw no handle and drops
  /// the inode has then committed, where stat() could still see it.
  bool exists_settled(uint64_t ino) const;
  /// Entries of a directory, in name order.
  std::vector<dir_entry> list(uint64_t dir) const;

  /// Compresses `data` and commits it as `name` in `parent`, replacing a
  /// file of that name atomically. Payloads already stored are referenced,
  /// not written again. `threads` bounds parallel encoding (0: TBB's).
  add_result add_file(uint64_t parent, std::string_view name,
                      codec::byte_view data,
                      codec::program_chooser const& chooser, uint32_t mode,
                      int64_t mtime_ns);
  /// Reads up to `length` bytes at `offset` (fewer at the end of the file),
  /// decoding only the chunks that cover them, in parallel when there are
  /// several. Returns the count. Thread-safe.
  size_t read(uint64_t ino, uint64_t offset, size_t length, uint8_t* out) const;
  /// One chunk of a compressed file: where it sits and what rebuilds it.
  struct chunk_span {
    uint64_t offset = 0;                         // in the file
    uint32_t length = 0;                         // logical bytes
    std::shared_ptr<codec::node const> program;  // null unless asked for
  };
  enum class with_programs { no, yes };
  /// The chunks of `ino` in file order (empty for a staged or empty file);
  /// the mount's cache reads whole chunks with read(). Programs are parsed
  /// (and checked) only when asked for: the mount's first read of a file
  /// waits for its map, and parsing every program of a 300 MB checkpoint
  /// there took tens of milliseconds on one core; read() parses each
  /// chunk's program when it first decodes it. Thread-safe.
  std::vector<chunk_span> chunk_map(
      uint64_t ino, with_programs programs = with_programs::yes) const;
  /// Removes a name; when its inode has no other link, drops its chunks'
  /// references (payloads no one references stop counting as live).
  void unlink(uint64_t parent, std::string_view name);

  // ------------------------------------------------- filesystem operations
  // What the mount (fs/fuse) does to the namespace; each is one write
  // transaction. Inodes keep their numbers for life; a directory knows its
  // parent; symlink targets and extended attributes live in `extra`.

  /// What make_node creates.
  struct node_spec {
    // S_IFDIR, S_IFREG (an empty staged file), S_IFLNK, or S_IFIFO or
    // S_IFSOCK (the kernel's alone: the store keeps only the inode)
    uint32_t mode = 0;
    uint32_t uid = 0, gid = 0;
    int64_t time_ns = 0;
    std::string_view link_target;  // S_IFLNK only
  };
  /// Creates `name` in directory `parent`. Errors: exists, not_dir,
  /// not_found (no parent), invalid (bad name or mode).
  inode_attr make_node(uint64_t parent, std::string_view name,
                       node_spec const& spec);
  /// Adds the name `name` in `parent` for non-directory `ino` (a hard link).
  inode_attr link(uint64_t ino, uint64_t parent, std::string_view name,
                  int64_t time_ns);

  /// What removing a name did to the inode it named.
  struct unlink_result {
    uint64_t ino = 0;      // 0: no inode lost a name (rename onto nothing)
    uint32_t nlink = 0;    // links left
    bool dropped = false;  // the inode and its chunks are gone
    file_state state = file_state::compressed;
    /// When dropped: the inode as it went (nlink 0, ctime the removal's),
    /// for a mount whose kernel may still hold it (an open directory).
    inode_attr attr;
  };
  /// Keeps an inode whose last name goes (nlink 0) for drop_orphan() later:
  /// the mount passes "is it open".
  using keep_fn = std::function<bool(uint64_t ino)>;
  /// unlink (dir = false) or rmdir (dir = true). Errors: not_found, is_dir,
  /// not_dir, not_empty.
  unlink_result remove(uint64_t parent, std::string_view name, bool dir,
                       keep_fn const& keep, int64_t time_ns);
  enum rename_flags : unsigned { rename_noreplace = 1, rename_exchange = 2 };
  /// rename(2) semantics: replaces a target of the same kind (an empty
  /// directory for a directory), refuses to move a directory under itself
  /// (invalid). Returns what happened to the replaced inode.
  unlink_result rename(uint64_t parent, std::string_view name,
                       uint64_t new_parent, std::string_view new_name,
                       unsigned flags, keep_fn const& keep, int64_t time_ns);
  /// Drops an inode with no links left (kept by remove/rename for an open
  /// file); a no-op when it has links again or is gone.
  void drop_orphan(uint64_t ino);
  /// The directory holding directory `dir` (the root's is the root).
  uint64_t parent_of(uint64_t dir) const;

  struct attr_update {
    std::optional<uint32_t> mode;  // permission bits only
    std::optional<uint32_t> uid, gid;
    std::optional<uint64_t> size;  // staged files only: the logical size
    std::optional<int64_t> mtime_ns;
    std::optional<int64_t> ctime_ns;  // kept when empty
  };
  inode_attr set_attr(uint64_t ino, attr_update const& u);
  /// Errors: invalid when ino is not a symlink.
  std::string read_link(uint64_t ino) const;

  /// Extended attributes (the mount's user.* names; any bytes as value).
  enum xattr_flags : int { xattr_create = 1, xattr_replace = 2 };
  /// A file's attribute names, each with its NUL, fit in this much, so
  /// that listxattr's answer (with the mount's own user.brevis.* names)
  /// stays within the kernel's 64 KiB; its values in total, in
  /// xattr_values_max.
  static constexpr size_t xattr_names_max = 60 << 10;
  static constexpr size_t xattr_values_max = 1 << 20;
  std::optional<std::string> get_xattr(uint64_t ino,
                                       std::string_view name) const;
  /// Errors: exists (xattr_create), no_attr (xattr_replace), no_space
  /// (past xattr_names_max or xattr_values_max).
  void set_xattr(uint64_t ino, std::string_view name, std::string_view value,
                 int flags);
  std::vector<std::string> list_xattr(uint64_t ino) const;
  /// Errors: no_attr.
  void remove_xattr(uint64_t ino, std::string_view name);

  // -------------------------------------------------------- staged files
  // A staged file's bytes are in staging/INODE (staging_path); its inode
  // says state staged and has no chunks. compress_staged() moves them into
  // packs; unstage() goes the other way. Nothing else touches staging/.

  std::string staging_path(uint64_t ino) const;
  /// Makes the reserve again if an unlink or rename on a full disk used it
  /// (16 MiB beside the index that such an operation gives up to commit);
  /// best effort. The mount calls it once a removal has freed space.
  void keep_reserve();
  /// Compresses `data` (the staged file's bytes) into staged inode `ino`
  /// and marks it compressed, in one transaction; the caller removes the
  /// staged copy afterwards. `name` helps the parser pick a format.
  /// `cancelled` is asked between stages and batches. Errors: not_found
  /// (inode gone, unlinked, or no longer staged), cancelled, no_space.
  add_result compress_staged(uint64_t ino, std::string_view name,
                             codec::byte_view data,
                             codec::program_chooser const& chooser,
                             int64_t mtime_ns,
                             std::function<bool()> const& cancelled);
  /// Marks compressed `ino` staged with `size` bytes and drops its chunks;
  /// the caller has already written and synced staging_path(ino).
  void unstage(uint64_t ino, uint64_t size);
  /// Regular inodes with links in state staged (what a mount queues).
  std::vector<uint64_t> staged_inodes() const;
  /// After a crash or an unclean unmount: drops inodes with no links and
  /// deletes staging files whose inode is gone or compressed. Returns the
  /// number of things removed.
  size_t tidy();

  store_stats stats() const;
  /// What this process punched out of packs so far (FORMAT.md S.2.1), and
  /// how often the packs were busy (a job, a check) when it tried.
  struct punch_counts {
    uint64_t records = 0, bytes = 0, busy = 0;
  };
  punch_counts punched() const;
  /// The last finished compression jobs, oldest first.
  std::vector<job_record> recent_jobs() const;
  std::optional<pipeline_status> get_pipeline_status() const;
  /// The mount records its queue (one small write transaction).
  void set_pipeline_status(pipeline_status const& st);
  /// Checks every pack record, every chunk, program and reference count.
  /// With repair: removes files that cannot be read, fixes counts, drops
  /// dangling records; never touches anything readable.
  fsck_report fsck(fsck_options const& opt);
  /// Rewrites packs whose live fraction is under `threshold` (0..1) and
  /// deletes packs with nothing live; reads go on meanwhile.
  gc_report gc(double threshold = 0.5);

  struct impl;

 private:
  friend class staged_commit;
  std::unique_ptr<impl> impl_;
};

}  // namespace brevis::fs
