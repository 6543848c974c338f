#include "fs/store/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unordered_set>

#include "codec/core/checksum.h"
#include "codec/dsl/interpreter.h"
#include "fs/pipeline/ordered_pipeline.h"
#include "fs/store/store_impl.h"

namespace brevis::fs {

using namespace detail;

namespace {

constexpr uint64_t store_version = 1;

void make_dir(std::string const& path, bool create) {
  if (create && ::mkdir(path.c_str(), 0700) != 0 && errno != EEXIST) {
    store_fail_errno(errno, "mkdir " + path);
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    store_fail(store_errc::bad_store, path + ": not a store (missing " +
                                          "directory; create it with "
                                          "`brevis store add`)");
  }
}

std::vector<std::string> list_dir(std::string const& path) {
  std::vector<std::string> out;
  DIR* d = ::opendir(path.c_str());
  if (!d) store_fail_errno(errno, "opendir " + path);
  while (dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool parse_pack_name(std::string const& n, uint64_t& id) {
  if (n.size() != 13 || !n.ends_with(".pack")) return false;
  std::string const hex = n.substr(0, 8);
  char* end = nullptr;
  id = std::strtoull(hex.c_str(), &end, 16);
  return end == hex.c_str() + 8;
}

// Whether `st`'s group is its owner's own (a user private group: the
// owner's primary group, listing no other member), which a umask of 002
// makes directories writable by.
bool owners_private_group(struct stat const& st) {
  long const size = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buf(size > 0 ? static_cast<size_t>(size) : 16384);
  passwd pw{};
  passwd* owner = nullptr;
  if (::getpwuid_r(st.st_uid, &pw, buf.data(), buf.size(), &owner) != 0 ||
      owner == nullptr || owner->pw_gid != st.st_gid) {
    return false;
  }
  std::string const name = owner->pw_name;
  std::vector<char> gbuf(1 << 16);
  group gr{};
  group* g = nullptr;
  if (::getgrgid_r(st.st_gid, &gr, gbuf.data(), gbuf.size(), &g) != 0 ||
      g == nullptr) {
    return false;
  }
  for (char** m = g->gr_mem; *m != nullptr; ++m) {
    if (name != *m) return false;
  }
  return true;
}

// Why a store directory (`st`, links followed) must not be trusted, or "".
// Only its owner, or root, may be able to change it: another user who
// could would redirect the store's writes through links planted in it.
std::string untrusted_because(struct stat const& st) {
  if (!S_ISDIR(st.st_mode)) return "is not a directory";
  uid_t const me = ::geteuid();
  if (st.st_uid != me && st.st_uid != 0) {
    return "belongs to uid " + std::to_string(st.st_uid) +
           ", not to you (uid " + std::to_string(me) + ") or root";
  }
  if (st.st_mode & S_IWOTH) return "may be written by others (chmod o-w it)";
  if ((st.st_mode & S_IWGRP) && !owners_private_group(st)) {
    return "may be written by its group (chmod g-w it)";
  }
  return "";
}

}  // namespace

void secure_store_directory(std::string const& dir) {
  auto const refuse = [&](std::string const& path, std::string const& why) {
    store_fail(store_errc::bad_store,
               path + " " + why +
                   ": refused, since whoever can change it could redirect the "
                   "store's writes");
  };
  struct stat st {};
  // The top may be reached through a link (a user's ~/store -> /data/x).
  if (::stat(dir.c_str(), &st) != 0) store_fail_errno(errno, "stat " + dir);
  if (std::string const why = untrusted_because(st); !why.empty()) {
    refuse(dir, why);
  }
  for (char const* sub : {"index", "packs", "staging"}) {
    // A link here was put there by someone the top's check trusts (packs/
    // moved to another disk): what it points to is checked.
    std::string const path = dir + "/" + sub;
    if (::stat(path.c_str(), &st) != 0) {
      if (errno == ENOENT) continue;
      store_fail_errno(errno, "stat " + path);
    }
    if (std::string const why = untrusted_because(st); !why.empty()) {
      refuse(path, why);
    }
    // Stores made before were open to all; the top directory is the
    // user's to set, these are ours. Best effort: a filesystem without
    // modes (vfat) refuses, and its mount options decide.
    if ((st.st_mode & 077) != 0) (void)::chmod(path.c_str(), 0700);
  }
}

void detail::check_name(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name.size() > 255 ||
      name.find('/') != std::string_view::npos ||
      name.find('\0') != std::string_view::npos) {
    store_fail(store_errc::invalid,
               "invalid file name '" + std::string(name) + "'");
  }
}

inode_attr to_attr(uint64_t ino, inode_rec const& r) {
  inode_attr a;
  a.ino = ino;
  a.mode = r.mode;
  a.nlink = r.nlink;
  a.uid = r.uid;
  a.gid = r.gid;
  a.size = r.size;
  a.stored = r.stored;
  a.mtime_ns = r.mtime_ns;
  a.ctime_ns = r.ctime_ns;
  a.checksum = r.checksum;
  a.chunk_count = r.chunk_count;
  a.state = static_cast<file_state>(r.state);
  return a;
}

// ------------------------------------------------------------- open/close

store::impl::impl(std::string d, store_options o)
    : dir(std::move(d)), opt(std::move(o)) {
  bool const create = opt.create && !opt.read_only;
  make_dir(dir, create);
  if (!opt.read_only) secure_store_directory(dir);
  make_dir(index_dir(), create);
  make_dir(packs_dir(), create);
  make_dir(staging_dir(), create);
  if (char const* k = std::getenv("BREVIS_STORE_KILL_AT")) {
    std::string s = k;
    size_t colon = s.rfind(':');
    kill_point = s.substr(0, colon);
    kill_count = colon == std::string::npos
                     ? 1
                     : std::strtoull(s.c_str() + colon + 1, nullptr, 10);
  }

  if (!opt.read_only) {
    std::string const lock_path = index_dir() + "/writer.lock";
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
    lock_fd = ::open(lock_path.c_str(),
                     O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock_fd < 0) store_fail_errno(errno, "open " + lock_path);
    std::string const append_path = index_dir() + "/append.lock";
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
    append_fd = ::open(append_path.c_str(),
                       O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (append_fd < 0) {
      int const e = errno;
      ::close(lock_fd);
      store_fail_errno(e, "open " + append_path);
    }
  }

  try {
    lmdb_check(mdb_env_create(&env), "create environment");
    lmdb_check(mdb_env_set_maxdbs(env, 8), "set maxdbs");
    lmdb_check(mdb_env_set_mapsize(env, opt.initial_map_size), "set mapsize");
    // MDB_NOMETASYNC: commit() syncs the meta page itself, and
    // commit_unsynced() leaves it to a later sync (store_impl.h).
    lmdb_check(
        mdb_env_open(env, index_dir().c_str(),
                     MDB_NOTLS | (opt.read_only ? MDB_RDONLY : MDB_NOMETASYNC),
                     0600),
        "open environment");
    if (opt.read_only) {
      txn t(env, false);
      auto open_db = [&](char const* name, MDB_dbi& dbi) {
        lmdb_check(mdb_dbi_open(t.get(), name, 0, &dbi), name);
      };
      open_db("meta", meta);
      open_db("inodes", inodes);
      open_db("dirents", dirents);
      open_db("chunks", chunks);
      open_db("programs", programs);
      open_db("payloads", payloads);
      open_db("packs", packs);
      open_db("extra", extra);
      auto v = t.get(meta, as_bytes_view("version"));
      if (!v || v->size() != 8 ||
          codec::load_le<uint64_t>(v->data()) != store_version) {
        store_fail(store_errc::bad_store,
                   dir + ": store version is not supported");
      }
      t.commit();  // keeps the database handles
      return;
    }
    // A writer's, made here (inside the try: a throw closes the index),
    // not at the first unsynced commit: nothing is allocated between a
    // commit and its return (its thread starts at the first due()).
    syncer = std::make_unique<detail::deferred_sync>(
        [this] {
          std::shared_lock lk(env_lock);  // it may read the meta pages
          sync_index();
        },
        std::chrono::milliseconds(unsynced_ms));
    writer_guard g(*this);
    txn t(env, true);
    auto open_db = [&](char const* name, MDB_dbi& dbi) {
      lmdb_check(mdb_dbi_open(t.get(), name, MDB_CREATE, &dbi), name);
    };
    open_db("meta", meta);
    open_db("inodes", inodes);
    open_db("dirents", dirents);
    open_db("chunks", chunks);
    open_db("programs", programs);
    open_db("payloads", payloads);
    open_db("packs", packs);
    open_db("extra", extra);
    auto vkey = as_bytes_view("version");
    if (auto v = t.get(meta, vkey)) {
      if (v->size() != 8 ||
          codec::load_le<uint64_t>(v->data()) != store_version) {
        store_fail(store_errc::bad_store,
                   dir + ": store version is not supported");
      }
    } else {
      // A new index is made only for a new store. Packs or staged files
      // beside an index without a store in it mean the index was lost or
      // damaged: a fresh one would name none of them, and recovery would
      // then delete every pack as uncommitted.
      if (!list_dir(packs_dir()).empty() || !list_dir(staging_dir()).empty()) {
        store_fail(store_errc::bad_store,
                   "the index (" + index_dir() +
                       ") holds no store, but packs/ or staging/ hold data: "
                       "the index is missing or damaged; nothing was changed");
      }
      codec::bytes vb;
      codec::put_le(vb, store_version);
      t.put(meta, vkey, vb);
      // The root belongs to whoever creates the store (as mkdir would make
      // it), so a user's own mount is writable by that user.
      inode_rec root;
      root.mode = S_IFDIR | 0755;
      root.nlink = 2;
      root.uid = ::getuid();
      root.gid = ::getgid();
      timespec now{};
      ::clock_gettime(CLOCK_REALTIME, &now);
      root.mtime_ns = int64_t{now.tv_sec} * 1000000000 + now.tv_nsec;
      root.ctime_ns = root.mtime_ns;
      t.put(inodes, inode_key(root_inode), encode(root));
      codec::bytes nb;
      codec::put_le<uint64_t>(nb, root_inode + 1);
      t.put(meta, as_bytes_view("next_ino"), nb);
    }
    commit(t);
  } catch (...) {
    if (env) mdb_env_close(env);
    if (lock_fd >= 0) ::close(lock_fd);
    if (append_fd >= 0) ::close(append_fd);
    throw;
  }
  recover();
  keep_reserve();
  puncher = std::make_unique<hole_puncher>(
      std::chrono::milliseconds(opt.punch_delay_ms),
      [this](std::span<dead_record const> dead) { return punch_dead(dead); });
}

store::impl::~impl() {
  puncher.reset();  // punches what is queued, with the index still open
  syncer.reset();
  try {
    if (env) sync_index();
  } catch (...) {  // a sync that fails here would have failed the commit
  }
  mdb_env_close(env);
  if (lock_fd >= 0) ::close(lock_fd);
  if (append_fd >= 0) ::close(append_fd);
}

void store::impl::sync_index() {
  // Held across the sync: a caller that finds another's sync running
  // returns only once it is done (or tries itself, if it failed).
  std::lock_guard lk(sync_mu);
  if (!unsynced.exchange(false)) return;
  try {
    lmdb_check(mdb_env_sync(env, 1), "sync the index");
  } catch (...) {
    unsynced = true;
    throw;
  }
  hit("index_synced");
}

namespace {
// Takes this process's mutex, then the flock on `fd` that other processes
// take (`path` names the lock file in errors): both, so that threads and
// processes alike take turns.
void lock_both(std::string const& dir, std::mutex& mu, int fd,
               std::string const& path) {
  if (fd < 0) {
    store_fail(store_errc::invalid, dir + ": the store is open read-only");
  }
  mu.lock();
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno != EINTR) {
      int e = errno;
      mu.unlock();
      store_fail_errno(e, "lock " + path);
    }
  }
}

void unlock_both(std::mutex& mu, int fd) {
  ::flock(fd, LOCK_UN);
  mu.unlock();
}
}  // namespace

store::impl::writer_guard::writer_guard(impl& s) : s_(s) {
  lock_both(s_.dir, s_.writer_mu, s_.lock_fd, s_.index_dir() + "/writer.lock");
}

store::impl::writer_guard::~writer_guard() {
  unlock_both(s_.writer_mu, s_.lock_fd);
}

store::impl::append_guard::append_guard(impl& s) : s_(s) {
  lock_both(s_.dir, s_.append_mu, s_.append_fd,
            s_.index_dir() + "/append.lock");
}

store::impl::append_guard::append_guard(impl& s,
                                        std::try_to_lock_t /*try_only*/)
    : s_(s), owns_(false) {
  if (!s_.append_mu.try_lock()) return;
  while (::flock(s_.append_fd, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EINTR) {
      s_.append_mu.unlock();
      return;
    }
  }
  owns_ = true;
}

store::impl::append_guard::~append_guard() {
  if (owns_) unlock_both(s_.append_mu, s_.append_fd);
}

int store::impl::open_check_lock() const {
  std::string const path = index_dir() + "/check.lock";
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  return ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
}

store::impl::punch_permit store::impl::may_punch() const {
  int const check = open_check_lock();
  if (check < 0) return punch_permit::no_lock_file;
  bool const checking = ::flock(check, LOCK_EX | LOCK_NB) != 0;
  ::close(check);
  return checking ? punch_permit::checking : punch_permit::granted;
}

void store::impl::queue_dying() {
  // After the commit: nothing here may fail it. A record not queued stays
  // dead, as gc finds it.
  try {
    if (puncher && !dying.empty()) puncher->add(dying);
  } catch (...) {
  }
  dying.clear();
}

size_t store::impl::punch_dead(std::span<dead_record const> dead) {
  // Under the append lock, which compression jobs hold for their whole run.
  // Pack bytes change only under it: fsck --repair may cut a pack's end back
  // before a dead record, and appends then write there. And a payload is
  // named (stored, or named again) only under it: a job names one it found
  // before its last file went again at its commit if it still reads back.
  // Never waited for (a job takes seconds), and held for a slice of the
  // batch at a time (punching a 300 MB checkpoint's records takes ~0.4 s on
  // ext4), so that a job starting meanwhile waits little.
  constexpr auto slice = std::chrono::milliseconds(20);
  size_t done = 0;
  while (done < dead.size()) {
    append_guard const appends(*this, std::try_to_lock);
    if (!appends.owns_lock()) {
      ++punch_busy;
      return done;
    }
    switch (may_punch()) {
      case punch_permit::granted:
        break;
      case punch_permit::checking:
        ++punch_busy;
        return done;
      case punch_permit::no_lock_file:
        return dead.size();  // left dead, as gc finds them
    }
    auto const until = std::chrono::steady_clock::now() + slice;
    std::unordered_map<uint64_t, std::unique_ptr<pack_file>> open;
    read_txn([&](txn const& t) {
      // At least one record a slice, however long the transaction took to
      // begin.
      size_t const first = done;
      while (done < dead.size() &&
             (done == first || std::chrono::steady_clock::now() < until)) {
        dead_record const& d = dead[done++];
        if (auto v = t.get(payloads, d.key.b)) {
          payload_rec const pr = decode_payload(*v);
          if (pr.pack == d.pack && pr.offset == d.offset) continue;  // again
        }
        if (!t.get(packs, pack_key(d.pack))) continue;  // gc removed its pack
        try {
          auto& p = open[d.pack];
          if (!p) {
            p = std::make_unique<pack_file>(pack_path(d.pack), false, true);
          }
          if (uint64_t const n = p->punch_record(d.offset, d.key, d.length)) {
            ++punched_records;
            punched_bytes += n;
          }
        } catch (store_error const&) {
          // The pack cannot be opened for writing: gc reclaims the record.
        }
      }
      return 0;
    });
  }
  return done;
}

std::unique_ptr<pack_file> store::impl::create_pack(uint64_t id, txn const* t) {
  std::string const path = pack_path(id);
  if (::access(path.c_str(), F_OK) == 0) {
    auto const holds_payloads = [&](txn const& tx) {
      return payload_pack_ends(tx).contains(id);
    };
    if (t ? holds_payloads(*t)
          : read_txn([&](txn& tx) { return holds_payloads(tx); })) {
      store_fail(store_errc::bad_store,
                 path +
                     " holds stored payloads, but the index gives its id "
                     "to a new pack: not replaced (run brevis fsck)");
    }
    if (::unlink(path.c_str()) != 0) store_fail_errno(errno, "unlink " + path);
    report.removed_packs.push_back(pack_name(id));
  }
  forget_pack(id);  // a reader's descriptor of the leftover
  return std::make_unique<pack_file>(path, true, true);
}

void store::impl::hit(std::string_view point) {
  if (opt.fault_hook) opt.fault_hook(point);
  if (!kill_point.empty() && point == kill_point &&
      ++hits[std::string(point)] == kill_count) {
    ::raise(SIGKILL);
  }
}

void store::impl::grow_map() {
  std::unique_lock lk(env_lock);
  MDB_envinfo info;
  mdb_env_info(env, &info);
  uint64_t const cur = info.me_mapsize;
  if (cur >= opt.max_map_size) {
    store_fail(store_errc::no_space, "index map is full (" +
                                         std::to_string(cur >> 20) +
                                         " MiB, the maximum)");
  }
  uint64_t const next = std::min(opt.max_map_size, cur * 2);
  lmdb_check(mdb_env_set_mapsize(env, next), "grow map");
}

void store::impl::adopt_map_size() {
  std::unique_lock lk(env_lock);
  lmdb_check(mdb_env_set_mapsize(env, 0), "adopt map size");
}

std::unique_ptr<pack_file> store::impl::open_for_append(uint64_t id,
                                                        byte_view v,
                                                        pack_rec& rec) const {
  if (v.size() != pack_rec_size) return nullptr;
  pack_rec const r = decode_pack(v);
  if (r.end >= opt.pack_limit) return nullptr;
  std::unique_ptr<pack_file> p;
  try {
    p = std::make_unique<pack_file>(pack_path(id), false, true);
  } catch (store_error const&) {
    return nullptr;  // missing or unreadable: fsck reports it
  }
  if (p->file_size() != r.end) return nullptr;
  rec = r;
  return p;
}

void store::impl::truncate_interrupted_appends(
    std::unordered_map<uint64_t, pack_rec> const& committed,
    std::vector<std::pair<uint64_t, uint64_t>> const& long_packs) {
  if (long_packs.empty()) return;
  // Bytes past a pack's committed end are an interrupted append, unless a
  // payload record points there: then the end itself is damaged, and
  // truncating would destroy committed data (one scan of the payloads, only
  // when some pack is longer than its end, as after a crash).
  std::unordered_map<uint64_t, uint64_t> payload_end =
      read_txn([&](txn& t) { return payload_pack_ends(t); });
  for (auto const& [id, size] : long_packs) {
    uint64_t const end = committed.at(id).end;
    std::string const n = pack_name(id);
    if (payload_end[id] > end) {
      report.damaged_packs.push_back(n + ": its index record ends it at " +
                                     std::to_string(end) +
                                     ", before payloads it holds (up to " +
                                     std::to_string(payload_end[id]) + ")");
      continue;
    }
    pack_file p(pack_path(id), false, true);
    p.truncate(end);
    p.sync();
    report.truncated.push_back(n + ": " + std::to_string(size - end) +
                               " bytes past the committed end");
  }
}

void store::impl::recover() {
  // A live writer or appender elsewhere owns its pack tails: leave them.
  if (::flock(append_fd, LOCK_EX | LOCK_NB) != 0) return;
  struct unlock {
    int fd;
    ~unlock() { ::flock(fd, LOCK_UN); }
  } ua{append_fd};
  if (::flock(lock_fd, LOCK_EX | LOCK_NB) != 0) return;
  unlock u{lock_fd};
  report.recovered = true;

  std::unordered_map<uint64_t, pack_rec> committed;
  std::unordered_map<uint64_t, size_t> bad_records;  // id, the value's size
  read_txn([&](txn& t) {
    cursor c(t, packs);
    for (bool ok = c.first(); ok; ok = c.next()) {
      if (c.key().size() != 8) continue;
      if (c.value().size() == pack_rec_size) {
        committed[key_u64(c.key())] = decode_pack(c.value());
      } else {
        bad_records[key_u64(c.key())] = c.value().size();
      }
    }
    return 0;
  });
  // The packs payload records point into, found on first need (one scan,
  // only when a pack has no record, as after a crash).
  std::optional<std::unordered_map<uint64_t, uint64_t>> in_use;
  auto const payload_packs = [&]() -> auto const& {
    if (!in_use) {
      in_use = read_txn([&](txn& t) { return payload_pack_ends(t); });
    }
    return *in_use;
  };
  std::unordered_set<uint64_t> seen;
  std::vector<std::pair<uint64_t, uint64_t>> long_packs;  // id, file size
  for (std::string const& n : list_dir(packs_dir())) {
    uint64_t id = 0;
    std::string const path = packs_dir() + "/" + n;
    if (!parse_pack_name(n, id)) continue;
    if (auto bad = bad_records.find(id); bad != bad_records.end()) {
      // Its committed end is unknown: neither truncated nor deleted.
      seen.insert(id);
      report.damaged_packs.push_back(
          n + ": its index record has " + std::to_string(bad->second) +
          " bytes, not " + std::to_string(pack_rec_size));
      continue;
    }
    auto it = committed.find(id);
    if (it == committed.end()) {
      // Created by an add or gc that never committed, or left by a gc
      // that committed but was stopped before deleting it: no payload is
      // in it. One that payloads point into lost its record (a damaged
      // index), and its bytes are all there is of them: kept.
      if (payload_packs().contains(id)) {
        seen.insert(id);
        report.damaged_packs.push_back(
            n + ": no index record, but payloads are stored in it (kept)");
        continue;
      }
      if (::unlink(path.c_str()) != 0)
        store_fail_errno(errno, "unlink " + path);
      report.removed_packs.push_back(n);
      continue;
    }
    seen.insert(id);
    uint64_t const size = pack_file(path, false, false).file_size();
    if (size > it->second.end) {
      long_packs.emplace_back(id, size);
    } else if (size < it->second.end) {
      report.short_packs.push_back(n + ": " +
                                   std::to_string(it->second.end - size) +
                                   " committed bytes missing");
    }
  }
  auto const note_missing = [&](uint64_t id) {
    if (!seen.contains(id)) {
      report.short_packs.push_back(pack_name(id) + ": missing");
    }
  };
  for (auto const& [id, r] : committed) note_missing(id);
  for (auto const& [id, size] : bad_records) note_missing(id);
  truncate_interrupted_appends(committed, long_packs);
  // Staged files are named by inode; report those with no committed copy.
  for (std::string const& n : list_dir(staging_dir())) {
    char* end = nullptr;
    uint64_t ino = std::strtoull(n.c_str(), &end, 10);
    bool committed_copy = false;
    if (end && *end == '\0') {
      committed_copy = read_txn([&](txn& t) {
        auto v = t.get(inodes, inode_key(ino));
        return v && decode_inode(*v).state ==
                        static_cast<uint32_t>(file_state::compressed);
      });
    }
    if (!committed_copy) report.staged_uncommitted.push_back(n);
  }
}

store::store(std::string dir, store_options opt)
    : impl_(std::make_unique<impl>(std::move(dir), std::move(opt))) {}

store::~store() = default;

open_report const& store::report() const { return impl_->report; }

void store::sync() const {
  std::shared_lock lk(impl_->env_lock);  // a sync may read the meta pages
  impl_->sync_index();
}

store::punch_counts store::punched() const {
  return {impl_->punched_records.load(), impl_->punched_bytes.load(),
          impl_->punch_busy.load()};
}

std::vector<open_finding> findings(open_report const& r, bool with_staged) {
  std::vector<open_finding> out;
  for (auto const& t : r.truncated) {
    out.push_back({false, "truncated an interrupted append: " + t});
  }
  for (auto const& p : r.removed_packs) {
    out.push_back({false, "removed uncommitted pack " + p});
  }
  for (auto const& p : r.short_packs) {
    out.push_back({true, "pack damaged: " + p + " (run brevis fsck)"});
  }
  for (auto const& p : r.damaged_packs) {
    out.push_back({true, "pack record damaged, the pack left as it is: " + p +
                             " (run brevis fsck --repair)"});
  }
  for (auto const& n : r.staged_uncommitted) {
    if (!with_staged) break;
    out.push_back({false, "staged file without a committed version: " + n});
  }
  return out;
}
std::string const& store::dir() const { return impl_->dir; }
uint32_t store::chunk_size() const { return impl_->opt.chunk_size; }

// ---------------------------------------------------------------- helpers

std::shared_ptr<codec::node const> store::impl::program(txn const& t,
                                                        uint64_t hash) const {
  {
    std::lock_guard lk(prog_mu);
    auto it = prog_cache.find(hash);
    if (it != prog_cache.end()) return it->second;
  }
  auto v = t.get(programs, program_key(hash));
  if (!v) {
    store_fail(store_errc::corrupt,
               "index: program " + std::to_string(hash) + " is missing");
  }
  if (hash64(*v) != hash) {
    store_fail(store_errc::corrupt, "index: program " + std::to_string(hash) +
                                        " is damaged: its hash differs");
  }
  // Intact bytes that do not parse: an opcode or parameter of a later
  // format version (FORMAT.md section S), not damage.
  std::shared_ptr<codec::node const> p;
  try {
    p = std::make_shared<codec::node const>(codec::parse_program(*v));
  } catch (codec::error const& e) {
    store_fail(store_errc::too_new, "index: program " + std::to_string(hash) +
                                        " needs a newer brevis: " + e.what());
  }
  std::lock_guard lk(prog_mu);
  return prog_cache.emplace(hash, std::move(p)).first->second;
}

std::shared_ptr<pack_file> store::impl::pack_for_read(uint64_t id) const {
  std::lock_guard lk(pack_mu);
  auto it = pack_cache.find(id);
  if (it != pack_cache.end()) return it->second;
  auto p = std::make_shared<pack_file>(pack_path(id), false, false);
  if (pack_cache.size() > 256) pack_cache.clear();  // bound open descriptors
  // A pack not seen before may be a gc's destination: the packs it emptied
  // and removed are let go (see forget_removed_packs).
  drop_removed_packs_locked();
  pack_cache.emplace(id, p);
  return p;
}

namespace {

// Bytes free on the filesystem of `fs` to this process (root may use the
// blocks kept for it).
uint64_t free_bytes(struct statvfs const& fs) {
  return (::geteuid() == 0 ? fs.f_bfree : fs.f_bavail) * fs.f_frsize;
}

}  // namespace

void store::impl::keep_reserve() const {
  if (opt.read_only || ::access(reserve_path().c_str(), F_OK) == 0) return;
  // A 64th of a small filesystem (1 MiB at least): a test's or a USB
  // stick's disk is not to be filled by it. Made only with room to spare:
  // taking the last of the space would fail writes meanwhile.
  struct statvfs fs {};
  if (::statvfs(index_dir().c_str(), &fs) != 0) return;
  auto const disk = static_cast<off_t>(fs.f_blocks * fs.f_frsize);
  off_t const bytes = std::clamp(disk / 64, off_t{1} << 20, reserve_bytes);
  if (free_bytes(fs) < 4 * static_cast<uint64_t>(bytes)) return;
  // One at a time in this process, under a name of its own among
  // processes; whole or not at all (a partial one would be taken for one).
  static std::mutex making;
  std::lock_guard lk(making);
  if (::access(reserve_path().c_str(), F_OK) == 0) return;
  std::string const tmp = reserve_path() + ".new." + std::to_string(::getpid());
  int const fd = ::open(  // NOLINT(cppcoreguidelines-pro-type-vararg)
      tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  bool const made = ::posix_fallocate(fd, 0, bytes) == 0;
  ::close(fd);
  if (!made || ::rename(tmp.c_str(), reserve_path().c_str()) != 0) {
    ::unlink(tmp.c_str());
  }
}

bool store::impl::disk_full() const {
  struct statvfs fs {};
  return ::statvfs(index_dir().c_str(), &fs) == 0 &&
         free_bytes(fs) < (uint64_t{1} << 20);
}

bool store::impl::release_reserve() const {
  return ::unlink(reserve_path().c_str()) == 0;
}

void store::keep_reserve() { impl_->keep_reserve(); }

std::vector<uint64_t> store::impl::pack_files() const {
  std::vector<uint64_t> ids;
  for (std::string const& n : list_dir(packs_dir())) {
    uint64_t id = 0;
    if (parse_pack_name(n, id)) ids.push_back(id);
  }
  return ids;
}

std::unordered_map<uint64_t, uint64_t> store::impl::payload_pack_ends(
    txn const& t) const {
  std::unordered_map<uint64_t, uint64_t> ends;
  cursor c(t, payloads);
  for (bool ok = c.first(); ok; ok = c.next()) {
    if (c.value().size() != payload_rec_size) continue;
    payload_rec const r = decode_payload(c.value());
    uint64_t& end = ends[r.pack];
    end = std::max(end, r.offset + record_size(r.length));
  }
  return ends;
}

bool store::impl::payload_intact(payload_rec const& pr,
                                 payload_key const& key) const {
  thread_local codec::bytes buf;  // reused: no page faults per record
  try {
    pack_for_read(pr.pack)->read_record(pr.offset, key, pr.length, buf);
    return true;
  } catch (store_error const&) {
    return false;
  }
}

uint64_t store::impl::repoint_payload(txn& t, payload_rec& pr, uint64_t pack,
                                      uint64_t offset, uint64_t length) {
  uint64_t const dead = record_size(pr.length);  // as Live counted it
  uint64_t const old_pack = pr.pack;
  pr.pack = pack;
  pr.offset = offset;
  pr.length = length;
  if (old_pack == pack) return dead;
  if (t.get(packs, pack_key(old_pack))) {
    add_live(t, old_pack, -static_cast<int64_t>(dead));
  }
  return 0;
}

void store::impl::forget_pack(uint64_t id) const {
  std::lock_guard lk(pack_mu);
  pack_cache.erase(id);
}

void store::impl::forget_removed_packs() const {
  std::lock_guard lk(pack_mu);
  drop_removed_packs_locked();
}

void store::impl::drop_removed_packs_locked() const {
  std::erase_if(pack_cache, [](auto const& e) { return e.second->unlinked(); });
}

void store::forget_removed_packs() const { impl_->forget_removed_packs(); }

inode_rec store::impl::get_inode(txn const& t, uint64_t ino) const {
  auto v = t.get(inodes, inode_key(ino));
  if (!v) {
    store_fail(store_errc::not_found,
               "no inode " + std::to_string(ino) + " in the store");
  }
  return decode_inode(*v);
}

void store::impl::add_live(txn& t, uint64_t pack, int64_t delta) {
  auto v = t.get(packs, pack_key(pack));
  if (!v) {
    store_fail(store_errc::bad_store,
               "index: pack " + pack_name(pack) + " has no record");
  }
  // A damaged record keeps its bytes: fsck --repair recounts Live, and
  // refusing would fail every unlink of a file in that pack.
  if (v->size() != pack_rec_size) return;
  pack_rec r = decode_pack(*v);
  r.live = static_cast<uint64_t>(
      std::max<int64_t>(0, static_cast<int64_t>(r.live) + delta));
  t.put(packs, pack_key(pack), encode(r));
}

void store::impl::unref_payload(txn& t, payload_key const& key) {
  auto v = t.get(payloads, key.b);
  if (!v) return;  // already gone (fsck reports dangling chunks)
  payload_rec r = decode_payload(*v);
  if (r.refs > 1) {
    --r.refs;
    t.put(payloads, key.b, encode(r));
    return;
  }
  t.del(payloads, key.b);
  if (t.get(packs, pack_key(r.pack))) {
    add_live(t, r.pack, -static_cast<int64_t>(record_size(r.length)));
  }
  dying.push_back({r.pack, r.offset, r.length, key});
}

void store::impl::drop_inode(txn& t, uint64_t ino) {
  drop_chunks(t, ino);
  t.del(inodes, inode_key(ino));
  drop_extra(t, ino);
}

void store::impl::drop_chunks(txn& t, uint64_t ino) {
  std::vector<std::array<uint8_t, 16>> keys;
  std::vector<payload_key> refs;
  {
    cursor c(t, chunks);
    for (bool ok = c.seek(chunk_key(ino, 0)); ok; ok = c.next()) {
      if (c.key().size() != 16 || key_u64(c.key()) != ino) break;
      std::memcpy(keys.emplace_back().data(), c.key().data(), 16);
      // A record that does not decode (a damaged index) goes too, so that
      // its file can still be removed; its payload's count is fsck's to
      // mend (--repair recounts them).
      try {
        refs.push_back(decode_chunk(c.value()).payload);
      } catch (store_error const&) {
      }
    }
  }
  for (auto const& k : keys) t.del(chunks, k);
  for (auto const& k : refs) unref_payload(t, k);
}

uint64_t store::impl::next_counter(txn& t, char const* name, uint64_t first) {
  auto key = as_bytes_view(name);
  uint64_t v = first;
  if (auto cur = t.get(meta, key); cur && cur->size() == 8) {
    v = std::max(first, codec::load_le<uint64_t>(cur->data()));
  }
  codec::bytes nb;
  codec::put_le<uint64_t>(nb, v + 1);
  t.put(meta, key, nb);
  return v;
}

// ------------------------------------------------------------------ names

std::optional<uint64_t> store::lookup(uint64_t parent,
                                      std::string_view name) const {
  return impl_->read_txn([&](txn& t) -> std::optional<uint64_t> {
    auto v = t.get(impl_->dirents, dirent_key(parent, name));
    if (!v || v->size() != 8) return std::nullopt;
    return codec::load_le<uint64_t>(v->data());
  });
}

inode_attr store::stat(uint64_t ino) const {
  return impl_->read_txn(
      [&](txn& t) { return to_attr(ino, impl_->get_inode(t, ino)); });
}

bool store::exists_settled(uint64_t ino) const {
  // A write transaction holds the writer mutex from its start to its commit.
  { std::lock_guard lk(impl_->writer_mu); }
  return impl_->read_txn(
      [&](txn& t) { return t.get(impl_->inodes, inode_key(ino)).has_value(); });
}

std::vector<dir_entry> store::list(uint64_t dir) const {
  return impl_->read_txn([&](txn& t) {
    std::vector<dir_entry> out;
    cursor c(t, impl_->dirents);
    auto const prefix = inode_key(dir);
    for (bool ok = c.seek(prefix); ok; ok = c.next()) {
      auto k = c.key();
      if (k.size() < 8 || read_be64(k.data()) != dir) break;
      if (c.value().size() != 8) {
        store_fail(store_errc::bad_store, "index: bad directory entry");
      }
      uint64_t const ino = codec::load_le<uint64_t>(c.value().data());
      dir_entry e;
      e.name.assign(reinterpret_cast<char const*>(k.data() + 8), k.size() - 8);
      auto v = t.get(impl_->inodes, inode_key(ino));
      if (!v) continue;  // dangling (fsck reports it)
      e.attr = to_attr(ino, decode_inode(*v));
      out.push_back(std::move(e));
    }
    return out;
  });
}

// -------------------------------------------------------------------- add

// Encodes w's chunks and records them for `ino`: payloads the store lacks
// are appended to `pack` at `pos`, the others referenced. Encoding runs in
// parallel, overlapped with the in-order stage that looks payloads up,
// appends and records them; at most `tokens` encoded chunks wait (bounded
// memory). `cancelled` (when set) is asked per chunk; true throws
// store_errc::cancelled and the caller's transaction is aborted.
//
// The write transaction is only touched by the in-order stage, one chunk at
// a time, from whichever thread runs it: LMDB ties the writer mutex (taken
// at begin, released at commit or abort, both on the caller's thread) and
// read slots to a thread, not the puts and gets of a write transaction.
void store::impl::write_chunks(txn& t, encode_plan const& plan, uint64_t ino,
                               pack_append& pa, add_result& res,
                               std::function<bool()> const& cancelled) {
  impl& s = *this;
  codec::archive_writer const& w = plan.w;
  auto const& prog_bytes = plan.prog_bytes;
  auto const& prog_hash = plan.prog_hash;
  size_t const count = w.chunk_count();
  size_t const tokens = std::max<size_t>(
      4, 2 * static_cast<size_t>(tbb::this_task_arena::max_concurrency()));
  std::unordered_set<uint64_t> progs_stored;
  std::unordered_map<uint64_t, chunk_rec> by_offset;  // for ref chunks
  // The payloads the file names, each counted once in its stored size.
  std::unordered_set<payload_key, payload_key_hash> named;
  auto chunks = w.chunks();
  auto check_cancelled = [&] {
    if (cancelled && cancelled()) {
      store_fail(store_errc::cancelled, "compression cancelled");
    }
  };
  size_t next = 0;  // the chunk the in-order stage records next
  ordered_pipeline(
      count, tokens,
      [&](size_t i) {
        check_cancelled();
        // A ref chunk copies earlier bytes: nothing to encode.
        return chunks[i].is_ref ? codec::encoded_chunk{} : w.encode(i);
      },
      [&](codec::encoded_chunk const& c) {
        check_cancelled();
        codec::chunk_entry const& e = chunks[next++];
        chunk_rec cr;
        uint64_t payload_len = 0;
        if (e.is_ref) {
          cr = by_offset.at(e.ref_offset);
          auto v = t.get(s.payloads, cr.payload.b);
          payload_rec pr = decode_payload(*v);
          ++pr.refs;
          payload_len = pr.length;
          t.put(s.payloads, cr.payload.b, encode(pr));
          ++res.dedup_chunks;
        } else {
          uint32_t const p = c.program;
          if (progs_stored.insert(p).second &&
              !t.get(s.programs, program_key(prog_hash[p]))) {
            t.put(s.programs, program_key(prog_hash[p]), prog_bytes[p]);
          }
          cr.length = e.length;
          cr.program = prog_hash[p];
          cr.payload = hash_payload(c.payload);
          cr.checksum = e.checksum;
          payload_len = c.payload.size();
          auto v = t.get(s.payloads, cr.payload.b);
          std::optional<payload_rec> known;
          if (v) known = decode_payload(*v);
          if (known && !named.contains(cr.payload) &&
              !s.payload_intact(*known, cr.payload)) {
            // Damaged or missing: stored anew, for every file naming it
            // (as staged_commit::add_chunk does).
            payload_rec pr = *known;
            uint64_t const at = pa.pos;
            pa.pos = pa.pack->write_record(pa.pos, cr.payload, c.payload);
            pa.prec.live += record_size(c.payload.size());
            pa.prec.live -=
                std::min(pa.prec.live,
                         s.repoint_payload(t, pr, pa.id, at, c.payload.size()));
            ++pr.refs;
            res.written += c.payload.size();
            ++res.healed;
            t.put(s.payloads, cr.payload.b, encode(pr));
            s.hit("pack_write");
          } else if (known) {
            payload_rec pr = *known;
            ++pr.refs;
            t.put(s.payloads, cr.payload.b, encode(pr));
            ++res.dedup_chunks;
          } else {
            payload_rec pr{pa.id, pa.pos, c.payload.size(), 1};
            pa.pos = pa.pack->write_record(pa.pos, cr.payload, c.payload);
            pa.prec.live += record_size(c.payload.size());
            res.written += c.payload.size();
            t.put(s.payloads, cr.payload.b, encode(pr));
            s.hit("pack_write");
          }
          by_offset[e.offset] = cr;
        }
        if (named.insert(cr.payload).second) res.stored += payload_len;
        t.put(s.chunks, chunk_key(ino, e.offset), encode(cr));
      });
}

store::impl::encode_plan::encode_plan(codec::byte_view data,
                                      std::string_view name,
                                      codec::program_chooser const& chooser,
                                      uint32_t chunk_size,
                                      std::function<bool()> const& cancelled)
    : w(data, name, chooser, chunk_size) {
  tbb::parallel_for(size_t{0}, w.region_count(), [&](size_t r) {
    if (!cancelled || !cancelled()) w.choose_program(r);
  });
  if (cancelled && cancelled()) {
    store_fail(store_errc::cancelled, "compression cancelled");
  }
  w.plan_chunks(codec::archive_writer::file_hash::compute);
  for (codec::node const& p : w.programs()) {
    prog_bytes.push_back(codec::serialize_program(p));
    prog_hash.push_back(hash64(prog_bytes.back()));
  }
  size = data.size();
  whole = *w.file_checksum();
}

store::impl::pack_append::pack_append(impl& s, txn& t) {
  // The newest pack while it is small, else a new one whose record this
  // transaction creates.
  {
    cursor c(t, s.packs);
    if (c.last() && c.key().size() == 8) {
      pack = s.open_for_append(key_u64(c.key()), c.value(), prec);
      if (pack) {
        id = key_u64(c.key());
        fresh = false;
      }
    }
  }
  if (fresh) {
    id = s.next_counter(t, "next_pack", 1);
    pack = s.create_pack(id, &t);
    prec = {pack_header_size, 0};
  }
  path = s.pack_path(id);
  start = pos = prec.end;
}

store::impl::pack_append::~pack_append() {
  // Undo the append unless a commit was tried: the index never points past
  // `start` then, so this is only tidiness (open would truncate too). After
  // a failed commit the bytes may be committed after all: leave them.
  if (done || committing || !pack) return;
  if (fresh) {
    ::unlink(path.c_str());
  } else {
    try {
      pack->truncate(start);
    } catch (...) {
    }
  }
}

void store::impl::pack_append::record(impl& s, txn& t) {
  prec.end = pos;
  t.put(s.packs, pack_key(id), encode(prec));
}

void store::impl::pack_append::sync() {
  if (pos != start) pack->sync();
}

add_result store::add_file(uint64_t parent, std::string_view name,
                           codec::byte_view data,
                           codec::program_chooser const& chooser, uint32_t mode,
                           int64_t mtime_ns) {
  check_name(name);
  impl& s = *impl_;
  impl::encode_plan plan(data, name, chooser, s.opt.chunk_size, {});

  impl::append_guard appending(s);
  return s.write_txn([&](txn& t) {
    add_result res;
    res.size = data.size();
    res.chunks = plan.w.chunk_count();
    inode_rec const dir = s.get_inode(t, parent);
    if (!S_ISDIR(dir.mode)) {
      store_fail(store_errc::invalid, "parent is not a directory");
    }
    impl::pack_append pa(s, t);
    uint64_t const ino = s.next_counter(t, "next_ino", root_inode + 1);
    s.write_chunks(t, plan, ino, pa, res, {});
    // Before the old version is dropped: that updates live bytes too.
    pa.record(s, t);

    inode_rec r;
    r.mode = S_IFREG | (mode & 07777);
    r.nlink = 1;
    r.uid = ::getuid();
    r.gid = ::getgid();
    r.size = data.size();
    r.stored = res.stored;
    r.mtime_ns = mtime_ns;
    r.ctime_ns = mtime_ns;
    r.checksum = plan.whole;
    r.chunk_count = static_cast<uint32_t>(res.chunks);
    r.state = static_cast<uint32_t>(file_state::compressed);
    t.put(s.inodes, inode_key(ino), encode(r));

    codec::bytes const dk = dirent_key(parent, name);
    if (auto old = t.get(s.dirents, dk)) {
      uint64_t const old_ino = dirent_ino(*old);
      inode_rec o = s.get_inode(t, old_ino);
      if (S_ISDIR(o.mode)) {
        store_fail(store_errc::is_dir, std::string(name) + " is a directory");
      }
      if (o.nlink > 1) {
        --o.nlink;
        t.put(s.inodes, inode_key(old_ino), encode(o));
      } else {
        s.drop_inode(t, old_ino);
      }
      res.replaced = true;
    }
    codec::bytes ib;
    codec::put_le<uint64_t>(ib, ino);
    t.put(s.dirents, dk, ib);

    pa.sync();
    s.hit("pack_synced");
    pa.committing = true;
    s.hit("commit");  // tests: a commit whose outcome is unknown
    s.commit(t);
    pa.done = true;
    s.hit("committed");
    res.ino = ino;
    return res;
  });
}

// ------------------------------------------------------------------- read

namespace {

struct piece {
  uint64_t offset = 0;  // of the chunk in the file
  chunk_rec chunk;
  payload_rec payload;
  std::shared_ptr<codec::node const> program;
};

}  // namespace

size_t store::read(uint64_t ino, uint64_t offset, size_t length,
                   uint8_t* out) const {
  impl const& s = *impl_;
  for (int attempt = 0;; ++attempt) {
    std::vector<piece> pieces;
    uint64_t const size = s.read_txn([&](txn& t) -> uint64_t {
      inode_rec const r = s.get_inode(t, ino);
      if (S_ISDIR(r.mode)) store_fail(store_errc::is_dir, "is a directory");
      if (offset >= r.size || length == 0) return r.size;
      uint64_t const end = offset + std::min<uint64_t>(length, r.size - offset);
      cursor c(t, s.chunks);
      auto on_inode = [&] {
        return c.key().size() == 16 && key_u64(c.key()) == ino;
      };
      // The chunk holding `offset` is the last one starting at or before it.
      bool ok = c.seek(chunk_key(ino, offset));
      if (!ok || !on_inode() || key_u64(c.key(), 8) > offset) {
        ok = ok ? c.prev() : c.last();
      }
      uint64_t expect = 0;
      bool first = true;
      for (; ok && on_inode(); ok = c.next()) {
        piece p;
        p.offset = key_u64(c.key(), 8);
        if (p.offset >= end) break;
        p.chunk = decode_chunk(c.value());
        if ((first &&
             (p.offset > offset || p.offset + p.chunk.length <= offset)) ||
            (!first && p.offset != expect)) {
          break;  // a gap: reported below
        }
        first = false;
        expect = p.offset + p.chunk.length;
        auto v = t.get(s.payloads, p.chunk.payload.b);
        if (!v) {
          store_fail(store_errc::corrupt,
                     "inode " + std::to_string(ino) + " chunk at " +
                         std::to_string(p.offset) + ": payload " +
                         p.chunk.payload.hex() + " is missing");
        }
        p.payload = decode_payload(*v);
        p.program = s.program(t, p.chunk.program);
        pieces.push_back(std::move(p));
      }
      if (first || expect < end) {
        store_fail(store_errc::corrupt,
                   "inode " + std::to_string(ino) +
                       ": chunk records do not cover bytes " +
                       std::to_string(first ? offset : expect));
      }
      return r.size;
    });
    if (offset >= size || length == 0) return 0;
    if (s.opt.fault_hook) s.opt.fault_hook("read_looked_up");
    size_t const n =
        static_cast<size_t>(std::min<uint64_t>(length, size - offset));
    std::atomic<bool> missing_pack{false};
    try {
      auto decode = [&](piece const& p) {
        std::shared_ptr<pack_file> pack;
        try {
          pack = s.pack_for_read(p.payload.pack);
        } catch (store_error const& e) {
          if (e.code() == store_errc::not_found) missing_pack = true;
          throw;
        }
        // Record buffers stay with their thread: a fresh one per chunk
        // costs zeroing and page faults, measured at ~8% of a read. Taken
        // out while in use, so a nested read on this thread gets its own.
        // Not the codec's scratch (tried): its take() sets a buffer's exact
        // size, and growing it again zero-fills, where this one only grows.
        // The payload's XXH3-128 is not checked here: the decoded bytes'
        // XXH3-64 below catches a damaged payload (the decoders validate
        // what they read, so it cannot crash them), and fsck checks it.
        thread_local codec::bytes spare;
        codec::bytes record = std::move(spare);
        codec::byte_view const payload = pack->read_payload(
            p.payload.offset, p.chunk.payload, p.payload.length, record);
        uint64_t const from = std::max(offset, p.offset);
        uint64_t const to = std::min(offset + n, p.offset + p.chunk.length);
        bool const whole = from == p.offset && to == p.offset + p.chunk.length;
        codec::bytes scratch;
        uint8_t* dst = out + (from - offset);
        if (!whole) {
          scratch.resize(p.chunk.length);
          dst = scratch.data();
        }
        auto where = [&] {
          return "inode " + std::to_string(ino) + " bytes " +
                 std::to_string(p.offset) + ".." +
                 std::to_string(p.offset + p.chunk.length);
        };
        try {
          codec::decode_chunk(*p.program, payload, p.chunk.length, dst);
        } catch (codec::error const& e) {
          store_fail(store_errc::corrupt,
                     where() + ": payload does not decode: " + e.what());
        }
        if (codec::xxh3(codec::byte_view(dst, p.chunk.length)) !=
            p.chunk.checksum) {
          store_fail(store_errc::corrupt,
                     where() + ": checksum mismatch of the decoded bytes");
        }
        if (!whole) {
          std::memcpy(out + (from - offset), scratch.data() + (from - p.offset),
                      to - from);
        }
        // Kept up to a few default chunks' worth, to bound what idle
        // threads hold.
        if (record.capacity() <= (8u << 20)) spare = std::move(record);
      };
      if (pieces.size() == 1) {
        decode(pieces[0]);
      } else {
        tbb::parallel_for(size_t{0}, pieces.size(),
                          [&](size_t i) { decode(pieces[i]); });
      }
      return n;
    } catch (store_error const& e) {
      // Look again once, in a fresh snapshot: after ours, gc may have moved
      // a payload and deleted its old pack, or another process may have
      // removed the file and punched its records out (FORMAT.md S.2.1),
      // which then read as damage. A pack missing still is damage (EIO),
      // not a file that went (ENOENT, which the mount answers ESTALE).
      bool const missing = e.code() == store_errc::not_found;
      if (!missing && e.code() != store_errc::corrupt) throw;
      if (attempt > 0 && missing && missing_pack) {
        store_fail(store_errc::corrupt,
                   std::string(e.what()) + " (inode " + std::to_string(ino) +
                       " names it: a damaged store, run brevis fsck)");
      }
      if (attempt > 0) throw;
    }
  }
}

std::vector<store::chunk_span> store::chunk_map(uint64_t ino,
                                                with_programs programs) const {
  impl const& s = *impl_;
  return s.read_txn([&](txn& t) {
    std::vector<chunk_span> out;
    inode_rec const r = s.get_inode(t, ino);
    if (S_ISDIR(r.mode)) store_fail(store_errc::is_dir, "is a directory");
    cursor c(t, s.chunks);
    for (bool ok = c.seek(chunk_key(ino, 0));
         ok && c.key().size() == 16 && key_u64(c.key()) == ino; ok = c.next()) {
      chunk_span sp;
      sp.offset = key_u64(c.key(), 8);
      chunk_rec const ch = decode_chunk(c.value());
      sp.length = ch.length;
      if (programs == with_programs::yes) {
        sp.program = s.program(t, ch.program);
      }
      out.push_back(std::move(sp));
    }
    // A compressed file's chunks tile it: a gap, or a map short of its
    // size at either end, is a damaged index, whose missing bytes a reader
    // would otherwise get as zeros (a short read past the last chunk).
    if (r.state == static_cast<uint32_t>(file_state::compressed)) {
      uint64_t end = 0;
      for (chunk_span const& sp : out) {
        if (sp.offset != end) break;
        end += sp.length;
      }
      if (end != r.size) {
        store_fail(store_errc::corrupt,
                   "inode " + std::to_string(ino) +
                       ": its chunk records do not cover its " +
                       std::to_string(r.size) +
                       " bytes (a damaged index: run brevis fsck)");
      }
    }
    return out;
  });
}

// ----------------------------------------------------------------- unlink

void store::unlink(uint64_t parent, std::string_view name) {
  impl& s = *impl_;
  s.freeing_txn([&](txn& t) {
    codec::bytes const dk = dirent_key(parent, name);
    auto v = t.get(s.dirents, dk);
    if (!v) {
      store_fail(store_errc::not_found,
                 "no file '" + std::string(name) + "' in the store");
    }
    uint64_t const ino = dirent_ino(*v);
    inode_rec r = s.get_inode(t, ino);
    if (S_ISDIR(r.mode)) {
      store_fail(store_errc::is_dir, std::string(name) + " is a directory");
    }
    t.del(s.dirents, dk);
    if (r.nlink > 1) {
      --r.nlink;
      t.put(s.inodes, inode_key(ino), encode(r));
    } else {
      s.drop_inode(t, ino);
    }
    return 0;
  });
}

// ------------------------------------------------------------------ stats

store_stats store::stats() const {
  impl const& s = *impl_;
  store_stats st = s.read_txn([&](txn& t) {
    store_stats x;
    {
      cursor c(t, s.inodes);
      for (bool ok = c.first(); ok; ok = c.next()) {
        inode_rec r = decode_inode(c.value());
        if (S_ISDIR(r.mode)) {
          ++x.dirs;
        } else {
          ++x.files;
          x.logical += r.size;
          if (S_ISREG(r.mode) && r.nlink > 0 &&
              r.state == static_cast<uint32_t>(file_state::staged)) {
            ++x.staged_files;
            x.staged_bytes += r.size;
          }
        }
      }
    }
    {
      cursor c(t, s.payloads);
      for (bool ok = c.first(); ok; ok = c.next()) {
        payload_rec const p = decode_payload(c.value());
        ++x.payloads;
        x.unique += p.length;
        // Every chunk naming it, a file's repeats too (a file's stored
        // size counts each of its payloads once).
        x.referenced += p.length * p.refs;
      }
    }
    {
      cursor c(t, s.packs);
      for (bool ok = c.first(); ok; ok = c.next()) {
        ++x.packs;
        // A damaged record (fsck reports it) adds no bytes.
        if (c.value().size() != pack_rec_size) continue;
        pack_rec const r = decode_pack(c.value());
        x.pack_bytes += r.end;
        x.live_bytes += r.live;
      }
    }
    MDB_stat ps;
    lmdb_check(mdb_stat(t.get(), s.programs, &ps), "stat");
    x.programs = ps.ms_entries;
    return x;
  });
  MDB_envinfo info;
  mdb_env_info(s.env, &info);
  MDB_stat es;
  mdb_env_stat(s.env, &es);
  st.map_size = info.me_mapsize;
  st.map_used = (info.me_last_pgno + 1) * es.ms_psize;
  // Less than pack_bytes where dead records were punched out.
  for (uint64_t const id : s.pack_files()) {
    struct stat ps {};
    if (::stat(s.pack_path(id).c_str(), &ps) == 0) {
      st.pack_disk_bytes += static_cast<uint64_t>(ps.st_blocks) * 512;
    }
  }
  return st;
}

}  // namespace brevis::fs
