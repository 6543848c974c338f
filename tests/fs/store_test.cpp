// The store on its own: real LMDB and pack files in temporary directories.

#include "fs/store/store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/falloc.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "codec/choose/chooser.h"
#include "codec/dsl/program.h"
#include "codec/search/search_chooser.h"
#include "fs/fuse/owned_fd.h"
#include "tests/cli/helpers.h"

namespace brevis::fs {
namespace {

using cli_test::temp_dir;
namespace stdfs = std::filesystem;

codec::byte_view view(std::string const& s) { return codec::as_bytes(s); }

std::string checkpoint(uint64_t seed, size_t elems = 200000) {
  return cli_test::make_safetensors(
      {{"a.weight",
        "BF16",
        {elems / 2},
        cli_test::bf16_weights(elems / 2, seed)},
       {"b.bias",
        "BF16",
        {elems / 2},
        cli_test::bf16_weights(elems / 2, seed + 1)}});
}

store_options small_chunks() {
  store_options o;
  o.chunk_size = 64 << 10;
  return o;
}

std::string read_all(store const& s, uint64_t ino) {
  std::string out(s.stat(ino).size, '\0');
  size_t n = s.read(ino, 0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
  out.resize(n);
  return out;
}

uint64_t add(store& s, std::string const& name, std::string const& data,
             add_result* res = nullptr) {
  static auto chooser = codec::make_store_chooser();
  add_result r = s.add_file(root_inode, name, view(data), *chooser, 0644, 0);
  if (res) *res = r;
  return r.ino;
}

::testing::AssertionResult fsck_clean(store& s) {
  fsck_report r = s.fsck({});
  if (r.clean()) return ::testing::AssertionSuccess();
  auto f = ::testing::AssertionFailure();
  for (auto const& p : r.problems) f << p << "\n";
  return f;
}

std::vector<stdfs::path> pack_files(stdfs::path const& dir) {
  std::vector<stdfs::path> v;
  for (auto const& e : stdfs::directory_iterator(dir / "packs")) {
    v.push_back(e.path());
  }
  std::sort(v.begin(), v.end());
  return v;
}

TEST(store_test, add_and_read_back) {
  temp_dir d;
  std::string const data = checkpoint(1);
  store s((d / "s").string(), small_chunks());
  add_result r;
  uint64_t ino = add(s, "model.safetensors", data, &r);
  EXPECT_GT(r.chunks, 4u);
  EXPECT_LT(r.written, data.size());
  EXPECT_EQ(read_all(s, ino), data);
  EXPECT_EQ(s.lookup(root_inode, "model.safetensors"), ino);
  // Random ranges, including ones across chunk edges and past the end.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 40; ++i) {
    uint64_t off = rng() % data.size();
    size_t len = rng() % (200 << 10);
    std::string buf(len, '\0');
    size_t n = s.read(ino, off, len, reinterpret_cast<uint8_t*>(buf.data()));
    ASSERT_EQ(n, std::min<uint64_t>(len, data.size() - off));
    ASSERT_EQ(buf.substr(0, n), data.substr(off, n)) << off << "+" << len;
  }
  auto ls = s.list(root_inode);
  ASSERT_EQ(ls.size(), 1u);
  EXPECT_EQ(ls[0].name, "model.safetensors");
  EXPECT_EQ(ls[0].attr.size, data.size());
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, empty_and_tiny_files) {
  temp_dir d;
  store s((d / "s").string());
  uint64_t a = add(s, "empty", "");
  uint64_t b = add(s, "tiny", "xyz");
  EXPECT_EQ(read_all(s, a), "");
  EXPECT_EQ(read_all(s, b), "xyz");
  EXPECT_THROW(add(s, "a/b", "x"), store_error);
  EXPECT_THROW(add(s, "", "x"), store_error);
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, reopen_keeps_files) {
  temp_dir d;
  std::string const data = checkpoint(2);
  {
    store s((d / "s").string(), small_chunks());
    add(s, "m", data);
  }
  store s((d / "s").string(), small_chunks());
  EXPECT_TRUE(s.report().truncated.empty());
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "m")), data);
}

// Creates, links and attribute changes commit without a sync (FORMAT.md
// S.4): a process that ends at once (no destructor, no deferred sync) has
// still committed them, as a killed daemon has.
TEST(store_test, unsynced_commits_outlive_their_process) {
  temp_dir d;
  { store s((d / "s").string()); }
  pid_t const pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    int rc = 1;
    try {
      store s((d / "s").string());
      store::node_spec spec;
      spec.mode = S_IFREG | 0640;
      spec.time_ns = 1'000'000'000;
      uint64_t const ino = s.make_node(root_inode, "f", spec).ino;
      s.link(ino, root_inode, "g", 2'000'000'000);
      store::attr_update u;
      u.mode = 0600;
      u.size = 0;
      u.mtime_ns = 3'000'000'000;
      u.ctime_ns = 4'000'000'000;
      s.set_attr(ino, u);
      rc = 0;
    } catch (...) {
    }
    ::_exit(rc);  // before the deferred sync's second
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  store s((d / "s").string());
  std::optional<uint64_t> const f = s.lookup(root_inode, "f");
  ASSERT_TRUE(f);
  EXPECT_EQ(s.lookup(root_inode, "g"), f);
  inode_attr const a = s.stat(*f);
  EXPECT_EQ(a.mode & 07777, 0600u);
  EXPECT_EQ(a.nlink, 2u);
  EXPECT_EQ(a.mtime_ns, 3'000'000'000);
  EXPECT_EQ(a.ctime_ns, 4'000'000'000);
  EXPECT_NO_THROW(s.sync());
  EXPECT_TRUE(fsck_clean(s));
}

// When each kind of commit reaches the disk: creates and attribute changes
// a second later (one sync for all of them), or at sync(); removals at once.
TEST(store_test, unsynced_commits_are_synced_a_moment_later) {
  temp_dir d;
  std::atomic<int> synced{0};
  store_options o;
  o.fault_hook = [&](std::string_view p) {
    if (p == "index_synced") ++synced;
  };
  store s((d / "s").string(), o);
  int const opened = synced.load();
  store::node_spec spec;
  spec.mode = S_IFDIR | 0755;
  for (std::string const name : {"a", "b", "c"}) {
    s.make_node(root_inode, name, spec);
  }
  store::attr_update u;
  u.mode = 0700;
  u.ctime_ns = 1;
  s.set_attr(*s.lookup(root_inode, "a"), u);
  EXPECT_EQ(synced.load(), opened);  // none synced as it committed
  auto const end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (synced.load() == opened && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(synced.load(), opened + 1);  // one sync took the four
  s.make_node(root_inode, "d", spec);
  s.sync();
  EXPECT_EQ(synced.load(), opened + 2);
  s.sync();  // nothing left to sync
  EXPECT_EQ(synced.load(), opened + 2);
  s.remove(root_inode, "d", true, {}, 2);
  EXPECT_EQ(synced.load(), opened + 3);  // synced as it committed
}

TEST(store_test, a_new_store_root_belongs_to_its_creator) {
  temp_dir d;
  int64_t const before =
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::system_clock::now().time_since_epoch())
          .count();
  uid_t uid = ::getuid();
  gid_t gid = ::getgid();
  if (::geteuid() == 0) {
    // Root makes it as nobody, so that the owner is not root by default.
    uid = 65534;
    gid = 65534;
    stdfs::permissions(d.path(), stdfs::perms::all);
    pid_t const pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      int rc = 1;
      if (::setgid(gid) == 0 && ::setuid(uid) == 0) {
        try {
          store s((d / "s").string());
          rc = 0;
        } catch (...) {
        }
      }
      ::_exit(rc);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  // Read-only: a writer open refuses a store of another user.
  store_options ro;
  ro.read_only = true;
  store s((d / "s").string(), ro);
  inode_attr const root = s.stat(root_inode);
  EXPECT_EQ(root.uid, uid);
  EXPECT_EQ(root.gid, gid);
  EXPECT_EQ(root.mode, S_IFDIR | 0755u);
  // Created now, not at the epoch.
  EXPECT_GE(root.mtime_ns, before - 1000000000);
  EXPECT_EQ(root.ctime_ns, root.mtime_ns);
}

// The message of the store_error that opening `dir` for writing throws,
// or "" when it opens.
std::string writer_open_error(std::string const& dir) {
  try {
    store s(dir);
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::bad_store) << e.what();
    return e.what();
  }
  return "";
}

TEST(store_test, a_new_store_is_private_to_its_owner) {
  temp_dir d;
  std::string const dir = (d / "s").string();
  store_options o = small_chunks();
  {
    store s(dir, o);
    add(s, "m", checkpoint(1));
  }
  auto const mode = [](stdfs::path const& p) {
    struct stat st;
    EXPECT_EQ(::lstat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  EXPECT_EQ(mode(dir), 0700u);
  for (char const* sub : {"index", "packs", "staging"}) {
    EXPECT_EQ(mode(d / "s" / sub) & 077, 0u) << sub;
  }
  for (auto const& e : stdfs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      EXPECT_EQ(mode(e.path()) & 077, 0u) << e.path();
    }
  }
  // A store an older brevis made open to all is closed at its next open;
  // its top directory is left as the user set it.
  ASSERT_EQ(::chmod(dir.c_str(), 0755), 0);
  for (char const* sub : {"index", "packs", "staging"}) {
    ASSERT_EQ(::chmod((d / "s" / sub).c_str(), 0755), 0);
  }
  { store s(dir, o); }
  EXPECT_EQ(mode(dir), 0755u);
  for (char const* sub : {"index", "packs", "staging"}) {
    EXPECT_EQ(mode(d / "s" / sub), 0700u) << sub;
  }
}

TEST(store_test, a_store_others_could_change_is_refused_for_writing) {
  temp_dir d;
  std::string const dir = (d / "s").string();
  { store s(dir, small_chunks()); }
  // Writable by others: anyone could plant links in it.
  ASSERT_EQ(::chmod(dir.c_str(), 0707), 0);
  EXPECT_NE(writer_open_error(dir).find("written by others"),
            std::string::npos);
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  // staging/ a link to a directory others may write: the start-up tidy
  // would delete there, and writes would go where they point.
  stdfs::create_directory(d / "open");
  ASSERT_EQ(::chmod((d / "open").c_str(), 0777), 0);
  std::ofstream(d / "open" / "precious") << "keep me";
  stdfs::rename(d / "s" / "staging", d / "staging.old");
  stdfs::create_directory_symlink(d / "open", d / "s" / "staging");
  EXPECT_NE(writer_open_error(dir).find("written by others"),
            std::string::npos);
  EXPECT_TRUE(stdfs::exists(d / "open" / "precious"));
  // Reading (brevis stats beside a mount) is still allowed.
  store_options ro;
  ro.read_only = true;
  EXPECT_NO_THROW(store(dir, ro));
  stdfs::remove(d / "s" / "staging");
  stdfs::rename(d / "staging.old", d / "s" / "staging");
  EXPECT_EQ(writer_open_error(dir), "");
  // packs/ moved to another disk and linked back by the owner: fine.
  stdfs::rename(d / "s" / "packs", d / "packs.elsewhere");
  stdfs::create_directory_symlink(d / "packs.elsewhere", d / "s" / "packs");
  EXPECT_EQ(writer_open_error(dir), "");
  if (::geteuid() == 0) {
    // Group-writable through the owner's private group (umask 002): only
    // the owner is in it. Root's primary group has no other member here.
    ASSERT_EQ(::chmod(dir.c_str(), 0770), 0);
    EXPECT_EQ(writer_open_error(dir), "");
    // Through another group: its members could plant links.
    ASSERT_EQ(::chown(dir.c_str(), 0, 65534), 0);
    EXPECT_NE(writer_open_error(dir).find("written by its group"),
              std::string::npos);
    ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
    // Another user's store: root would write where that user points it.
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    EXPECT_NE(writer_open_error(dir).find("belongs to uid 65534"),
              std::string::npos);
  }
}

TEST(store_test, open_missing_without_create_fails) {
  temp_dir d;
  store_options o;
  o.create = false;
  try {
    store s((d / "nope").string(), o);
    FAIL();
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::bad_store);
  }
}

TEST(store_test, dedup_same_file_twice) {
  temp_dir d;
  std::string const data = checkpoint(3);
  store s((d / "s").string(), small_chunks());
  add_result r1, r2;
  uint64_t a = add(s, "one", data, &r1);
  uint64_t b = add(s, "two", data, &r2);
  EXPECT_GT(r1.written, 0u);
  EXPECT_EQ(r2.written, 0u);
  EXPECT_EQ(r2.dedup_chunks, r2.chunks);
  store_stats st = s.stats();
  EXPECT_EQ(st.files, 2u);
  EXPECT_EQ(st.logical, 2 * data.size());
  EXPECT_EQ(st.referenced, 2 * st.unique);
  s.unlink(root_inode, "one");
  EXPECT_EQ(read_all(s, b), data);
  EXPECT_THROW(s.stat(a), store_error);
  EXPECT_TRUE(fsck_clean(s));
  s.unlink(root_inode, "two");
  st = s.stats();
  EXPECT_EQ(st.payloads, 0u);
  EXPECT_EQ(st.live_bytes, 0u);
  gc_report g = s.gc();
  EXPECT_EQ(g.packs_removed, 1u);
  EXPECT_TRUE(pack_files(d / "s").empty());
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, repeated_tensor_counts_once_in_stored_size) {
  temp_dir d;
  std::string const w = cli_test::bf16_weights(100000, 12);
  std::string const data = cli_test::make_safetensors(
      {{"w", "BF16", {100000}, w},
       {"b", "BF16", {30000}, cli_test::bf16_weights(30000, 13)},
       {"w2", "BF16", {100000}, w}});
  store s((d / "s").string(), small_chunks());
  add_result r;
  uint64_t const ino = add(s, "m", data, &r);
  EXPECT_GT(r.dedup_chunks, 0u);  // the repeat names stored payloads
  store_stats const st = s.stats();
  // The file alone holds every payload: its stored size is each once, and
  // the repeat's references are the dedup savings.
  EXPECT_EQ(r.stored, st.unique);
  EXPECT_EQ(s.stat(ino).stored, st.unique);
  EXPECT_GT(st.referenced, st.unique);
  EXPECT_EQ(read_all(s, ino), data);
  EXPECT_TRUE(fsck_clean(s));
}

// The store's programs carry rans_static's wide-lanes parameter (12) into
// the index, and read back with it: chunks of 64 KiB are 32768 bf16
// elements, coded with 32 states.
TEST(store_test, stored_programs_keep_the_wide_lanes_parameter) {
  temp_dir d;
  std::string const data = cli_test::make_safetensors(
      {{"w", "BF16", {100000}, cli_test::bf16_weights(100000, 21)}});
  store s((d / "s").string(), small_chunks());
  uint64_t const ino = add(s, "m", data);
  size_t wide = 0;
  for (auto const& c : s.chunk_map(ino, store::with_programs::yes)) {
    std::string const text = codec::program_text(*c.program);
    wide += text.find("rans_static:12[") != std::string::npos;
  }
  EXPECT_GT(wide, 0u);
  EXPECT_EQ(read_all(s, ino), data);
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, shared_tensor_across_checkpoints_stored_once) {
  temp_dir d;
  std::string const shared = cli_test::bf16_weights(100000, 9);
  std::string const c1 = cli_test::make_safetensors(
      {{"emb", "BF16", {100000}, shared},
       {"x", "BF16", {50000}, cli_test::bf16_weights(50000, 10)}});
  std::string const c2 = cli_test::make_safetensors(
      {{"emb", "BF16", {100000}, shared},
       {"y", "BF16", {50000}, cli_test::bf16_weights(50000, 11)}});
  store s((d / "s").string(), small_chunks());
  add_result r1, r2;
  add(s, "c1", c1, &r1);
  add(s, "c2", c2, &r2);
  // The chunks of the shared tensor (aligned identically) are not rewritten.
  EXPECT_GT(r2.dedup_chunks, 0u);
  EXPECT_LT(r2.written, r1.written * 3 / 4);
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "c2")), c2);
}

// Whether `dir`'s filesystem deallocates punched ranges (ext4, xfs, tmpfs).
bool punches_holes(stdfs::path const& dir) {
  std::string const probe = (dir / "probe").string();
  cli_test::write_file(probe, std::string(1 << 16, 'x'));
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int const fd = ::open(probe.c_str(), O_RDWR);
  bool const ok =
      fd >= 0 && ::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                             1 << 16) == 0;
  if (fd >= 0) ::close(fd);
  stdfs::remove(probe);
  return ok;
}

uint64_t pack_disk_bytes(stdfs::path const& dir) {
  return cli_test::disk_bytes_of_files(dir / "packs");
}

// rm gives space back without gc (FORMAT.md S.2.1): the records of payloads
// no file names any more are punched out of their pack; those another file
// still names stay, and the store stays clean and readable, reopened too.
TEST(store_test, a_removed_files_own_payloads_are_punched_out_of_their_pack) {
  temp_dir d;
  if (!punches_holes(d.path())) GTEST_SKIP() << "no hole punching here";
  store_options o = small_chunks();
  o.punch_delay_ms = 0;
  std::string const shared = cli_test::bf16_weights(200000, 31);
  std::string const c1 = cli_test::make_safetensors(
      {{"emb", "BF16", {200000}, shared},
       {"x", "BF16", {200000}, cli_test::bf16_weights(200000, 32)}});
  std::string const c2 = cli_test::make_safetensors(
      {{"emb", "BF16", {200000}, shared},
       {"y", "BF16", {200000}, cli_test::bf16_weights(200000, 33)}});
  uint64_t before = 0, dead = 0;
  {
    store s((d / "s").string(), o);
    add(s, "c1", c1);
    add(s, "c2", c2);
    before = pack_disk_bytes(d / "s");
    uint64_t const live_before = s.stats().live_bytes;
    s.unlink(root_inode, "c1");
    store_stats const st = s.stats();
    dead = live_before - st.live_bytes;  // x's records
    ASSERT_GT(dead, 100000u);
    EXPECT_LT(dead, live_before / 2);  // emb's stay: c2 names them
    // The puncher's thread: the dead bytes go, up to the partial blocks at
    // the records' ends.
    for (int i = 0; i < 500 && pack_disk_bytes(d / "s") > before - dead / 2;
         ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_LE(pack_disk_bytes(d / "s"), before - dead / 2);
    EXPECT_GT(s.punched().records, 0u);
    EXPECT_LE(s.punched().bytes, dead);
    EXPECT_EQ(read_all(s, *s.lookup(root_inode, "c2")), c2);
    EXPECT_TRUE(fsck_clean(s));
  }
  // Closed: every punch is done.
  EXPECT_LE(pack_disk_bytes(d / "s"), before - dead * 3 / 4);
  EXPECT_GE(pack_disk_bytes(d / "s") + dead, before);  // no more than dead
  store s((d / "s").string(), o);
  EXPECT_EQ(s.stats().pack_disk_bytes, pack_disk_bytes(d / "s"));
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "c2")), c2);
  EXPECT_TRUE(fsck_clean(s));
  // gc still compacts the punched pack.
  gc_report const g = s.gc(0.9);
  EXPECT_GT(g.bytes_reclaimed, 0u);
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "c2")), c2);
  EXPECT_TRUE(fsck_clean(s));
}

// index/check.lock held shared for its lifetime, as a plain fsck holds it
// for its run (FORMAT.md S.1): nothing may be punched meanwhile.
class check_running {
 public:
  explicit check_running(stdfs::path const& store_dir) {
    std::string const lock = (store_dir / "index" / "check.lock").string();
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
    fd_ = owned_fd(::open(lock.c_str(), O_RDWR | O_CREAT, 0600));
    held_ = fd_.get() >= 0 && ::flock(fd_.get(), LOCK_SH) == 0;
  }
  bool held() const { return held_; }
  void end() { fd_.reset(); }

 private:
  owned_fd fd_;
  bool held_ = false;
};

// A plain fsck beside a writer (another process) reads one snapshot with
// no lock, and records that die meanwhile are in it: while it holds
// index/check.lock shared, nothing is punched; once it lets go, the
// puncher's next try does it.
TEST(store_test, nothing_is_punched_while_a_check_reads) {
  temp_dir d;
  if (!punches_holes(d.path())) GTEST_SKIP() << "no hole punching here";
  store_options o = small_chunks();
  o.punch_delay_ms = 0;
  store s((d / "s").string(), o);
  add(s, "m", checkpoint(43));
  uint64_t const before = pack_disk_bytes(d / "s");
  check_running check(d / "s");
  ASSERT_TRUE(check.held());
  s.unlink(root_inode, "m");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(pack_disk_bytes(d / "s"), before);
  check.end();
  for (int i = 0; i < 500 && pack_disk_bytes(d / "s") >= before / 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_LT(pack_disk_bytes(d / "s"), before / 4);
  EXPECT_TRUE(fsck_clean(s));
}

// gc punches the dead records of the packs it keeps: those of files removed
// while nothing could punch (here a check held index/check.lock as the
// store closed), as in a store an older brevis wrote. Once: a second gc
// finds nothing left to punch.
TEST(store_test, gc_punches_what_died_unpunched_in_the_packs_it_keeps) {
  temp_dir d;
  if (!punches_holes(d.path())) GTEST_SKIP() << "no hole punching here";
  store_options o = small_chunks();
  o.punch_delay_ms = 0;
  std::string const keep = checkpoint(51);
  uint64_t dead = 0;
  {
    store s((d / "s").string(), o);
    add(s, "keep", keep);
    add(s, "gone", checkpoint(52));
  }
  uint64_t const before = pack_disk_bytes(d / "s");
  check_running check(d / "s");
  ASSERT_TRUE(check.held());
  {
    store s((d / "s").string(), o);
    uint64_t const live = s.stats().live_bytes;
    s.unlink(root_inode, "gone");
    dead = live - s.stats().live_bytes;
  }  // closed with the lock held: nothing punched
  EXPECT_EQ(pack_disk_bytes(d / "s"), before);
  store s((d / "s").string(), o);
  // Nor by a gc while the check still reads, which says why.
  gc_report const during = s.gc(0.0);
  EXPECT_EQ(during.records_punched, 0u);
  EXPECT_TRUE(during.punching_deferred);
  EXPECT_EQ(pack_disk_bytes(d / "s"), before);
  check.end();
  gc_report const g = s.gc(0.0);  // no pack rewritten
  EXPECT_FALSE(g.punching_deferred);
  EXPECT_EQ(g.packs_rewritten, 0u);
  EXPECT_GT(g.records_punched, 0u);
  EXPECT_GE(g.bytes_punched, dead / 2);
  EXPECT_EQ(pack_disk_bytes(d / "s") + g.bytes_punched, before);
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "keep")), keep);
  EXPECT_TRUE(fsck_clean(s));
  gc_report const again = s.gc(0.0);
  EXPECT_EQ(again.records_punched, 0u);
  EXPECT_EQ(again.bytes_punched, 0u);
}

// A dead record whose header's length was damaged to reach over the live
// records after it: gc's walk does not line up with the index, and it
// punches nothing in that pack (the live file reads back) and says so.
TEST(store_test, gc_punches_nothing_where_headers_do_not_match_the_index) {
  temp_dir d;
  if (!punches_holes(d.path())) GTEST_SKIP() << "no hole punching here";
  store_options o = small_chunks();
  o.punch_delay_ms = 0;
  std::string const keep = checkpoint(53);
  {
    store s((d / "s").string(), o);
    // Its records first, at offset 16 (a header of its own: no chunk of it
    // is shared with keep).
    add(s, "gone",
        cli_test::make_safetensors({{"gone.weight",
                                     "BF16",
                                     {100000},
                                     cli_test::bf16_weights(100000, 54)}}));
    add(s, "keep", keep);
  }
  check_running check(d / "s");
  ASSERT_TRUE(check.held());
  {
    store s((d / "s").string(), o);
    s.unlink(root_inode, "gone");
  }  // closed with the lock held: nothing punched
  check.end();
  stdfs::path const pack = pack_files(d / "s").at(0);
  {
    std::fstream f(pack, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(16 + 8);  // the first record's length
    uint64_t const far = 3u << 20;
    f.write(reinterpret_cast<char const*>(&far), sizeof far);  // little-endian
  }
  uint64_t const before = pack_disk_bytes(d / "s");
  store s((d / "s").string(), o);
  gc_report const g = s.gc(0.0);
  EXPECT_EQ(g.records_punched, 0u);
  EXPECT_EQ(pack_disk_bytes(d / "s"), before);
  ASSERT_EQ(g.damaged.size(), 1u);
  EXPECT_NE(g.damaged[0].find("do not match the index"), std::string::npos);
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "keep")), keep);
}

// A reader in another process than the one removing a file may look its
// chunks up just before the removal commits, then find their records
// punched (`store get` while `store rm` runs): it looks again, and finds
// the file gone (not_found), not damage.
TEST(store_test, a_read_racing_a_removal_in_another_process_finds_it_gone) {
  temp_dir d;
  if (!punches_holes(d.path())) GTEST_SKIP() << "no hole punching here";
  std::string const data = checkpoint(57);
  {
    store s((d / "s").string(), small_chunks());
    add(s, "gone", data);
  }
  store_options o = small_chunks();
  o.read_only = true;
  cli_test::run_result removed;
  o.fault_hook = [&](std::string_view p) {
    if (p != "read_looked_up" || removed.exit_code != -1) return;
    // Its records are punched as the command closes the store.
    removed = cli_test::brevis({"store", "rm", (d / "s").string(), "gone"});
  };
  store const s((d / "s").string(), o);
  uint64_t const ino = *s.lookup(root_inode, "gone");
  std::string out(data.size(), '\0');
  try {
    s.read(ino, 0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
    ADD_FAILURE() << "read a removed file";
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::not_found) << e.what();
  }
  EXPECT_EQ(removed.exit_code, 0) << removed.err;
}

// The same through a store closed before its delay passed (a CLI `store
// rm`): closing punches what is queued.
TEST(store_test, closing_the_store_punches_what_died) {
  temp_dir d;
  if (!punches_holes(d.path())) GTEST_SKIP() << "no hole punching here";
  store_options o = small_chunks();
  o.punch_delay_ms = 3600 * 1000;
  std::string const data = checkpoint(41);
  uint64_t before = 0;
  {
    store s((d / "s").string(), o);
    add(s, "m", data);
    before = pack_disk_bytes(d / "s");
    s.unlink(root_inode, "m");
    EXPECT_EQ(pack_disk_bytes(d / "s"), before);  // not yet
  }
  EXPECT_LT(pack_disk_bytes(d / "s"), before / 4);
  store s((d / "s").string(), o);
  EXPECT_TRUE(fsck_clean(s));
  add(s, "m", data);  // stored anew, not named at its punched place
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "m")), data);
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, replace_drops_old_version) {
  temp_dir d;
  store s((d / "s").string(), small_chunks());
  add(s, "m", checkpoint(4));
  add_result r;
  std::string const v2 = checkpoint(5);
  add(s, "m", v2, &r);
  EXPECT_TRUE(r.replaced);
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "m")), v2);
  store_stats st = s.stats();
  EXPECT_EQ(st.files, 1u);
  EXPECT_EQ(st.unique, st.referenced);
  EXPECT_LT(st.live_bytes, st.pack_bytes);
  EXPECT_TRUE(fsck_clean(s));
  gc_report g = s.gc(0.9);
  EXPECT_GT(g.bytes_reclaimed, 0u);
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "m")), v2);
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, corrupt_payload_is_an_error_and_repair_removes_it) {
  temp_dir d;
  std::string const good = checkpoint(6);
  std::string const bad = checkpoint(7);
  {
    store s((d / "s").string(), small_chunks());
    add(s, "good", good);
    add(s, "bad", bad);
  }
  // Flip a byte near the end of the pack: inside the last file's payloads.
  auto packs = pack_files(d / "s");
  ASSERT_EQ(packs.size(), 1u);
  {
    std::fstream f(packs[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-100, std::ios::end);
    char c;
    f.get(c);
    f.seekp(-100, std::ios::end);
    f.put(static_cast<char>(c ^ 0x40));
  }
  store s((d / "s").string(), small_chunks());
  uint64_t const ino = *s.lookup(root_inode, "bad");
  std::string buf(bad.size(), '\0');
  try {
    s.read(ino, 0, buf.size(), reinterpret_cast<uint8_t*>(buf.data()));
    FAIL() << "read of a corrupt payload succeeded";
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::corrupt);
    EXPECT_EQ(e.errno_value(), EIO);
    // The decoder's validation or the decoded bytes' XXH3-64 (reads do
    // not hash the payload itself; fsck does).
    std::string const what = e.what();
    EXPECT_TRUE(what.find("checksum") != std::string::npos ||
                what.find("does not decode") != std::string::npos)
        << what;
  }
  fsck_report f = s.fsck({});
  EXPECT_FALSE(f.clean());
  fsck_options rep;
  rep.repair = true;
  f = s.fsck(rep);
  EXPECT_FALSE(f.repairs.empty());
  EXPECT_FALSE(s.lookup(root_inode, "bad"));
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "good")), good);
  EXPECT_TRUE(fsck_clean(s));
}

// Reads check a record's header and the decoded chunk's XXH3-64, not the
// payload's XXH3-128: a byte flipped anywhere in a pack still reads as EIO,
// or (a byte the decoder never looks at) as the right bytes, never as
// wrong ones; fsck still names every damaged payload.
TEST(store_test, flipped_pack_byte_never_reads_as_wrong_bytes) {
  temp_dir d;
  std::string const data = checkpoint(12, 400000);
  {
    store s((d / "s").string(), small_chunks());
    add(s, "m", data);
  }
  auto packs = pack_files(d / "s");
  ASSERT_EQ(packs.size(), 1u);
  std::string pristine;
  {
    std::ifstream f(packs[0], std::ios::binary);
    pristine.assign(std::istreambuf_iterator<char>(f), {});
  }
  ASSERT_GT(pristine.size(), 4096u);
  size_t failed = 0, intact = 0, fsck_found = 0;
  constexpr size_t flips = 48;
  for (size_t i = 0; i < flips; ++i) {
    // Spread over the records (headers and payloads), past the pack header.
    size_t const at = 16 + (pristine.size() - 16) * i / flips + i % 7;
    std::string damaged = pristine;
    damaged[at] = static_cast<char>(damaged[at] ^ (1 << (i % 8)));
    {
      std::ofstream f(packs[0], std::ios::binary | std::ios::trunc);
      f.write(damaged.data(), static_cast<std::streamsize>(damaged.size()));
    }
    store s((d / "s").string(), small_chunks());
    uint64_t const ino = *s.lookup(root_inode, "m");
    std::string out(data.size(), '\0');
    try {
      size_t const n =
          s.read(ino, 0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
      ASSERT_EQ(n, data.size());
      ASSERT_EQ(out, data) << "wrong bytes after flipping pack byte " << at;
      ++intact;
    } catch (store_error const& e) {
      EXPECT_EQ(e.errno_value(), EIO) << e.what();
      ++failed;
    }
    fsck_options fo;
    fo.decode = false;  // the payload hashes alone
    if (!s.fsck(fo).clean()) ++fsck_found;
  }
  EXPECT_EQ(failed + intact, flips);
  // Nearly every payload byte matters to its decoder.
  EXPECT_GT(failed, flips * 3 / 4);
  EXPECT_EQ(fsck_found, flips);
  {
    std::ofstream f(packs[0], std::ios::binary | std::ios::trunc);
    f.write(pristine.data(), static_cast<std::streamsize>(pristine.size()));
  }
  store s((d / "s").string(), small_chunks());
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "m")), data);
}

TEST(store_test, uncommitted_tail_is_truncated_on_open) {
  temp_dir d;
  std::string const data = checkpoint(8);
  {
    store s((d / "s").string(), small_chunks());
    add(s, "m", data);
  }
  auto packs = pack_files(d / "s");
  auto const size = stdfs::file_size(packs[0]);
  {
    std::ofstream f(packs[0], std::ios::app | std::ios::binary);
    f << std::string(5000, 'z');
  }
  // A pack no commit refers to, and a staged file with no committed copy.
  std::ofstream(d / "s" / "packs" / "000000ff.pack") << "junk";
  std::ofstream(d / "s" / "staging" / "999") << "staged";
  store s((d / "s").string(), small_chunks());
  EXPECT_EQ(s.report().truncated.size(), 1u);
  EXPECT_EQ(s.report().removed_packs.size(), 1u);
  EXPECT_EQ(s.report().staged_uncommitted, std::vector<std::string>{"999"});
  EXPECT_EQ(stdfs::file_size(packs[0]), size);
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "m")), data);
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, failure_before_commit_leaves_store_unchanged) {
  temp_dir d;
  std::string const data = checkpoint(9);
  store_options o = small_chunks();
  std::string fail_at;
  o.fault_hook = [&](std::string_view p) {
    if (p == fail_at) throw store_error(store_errc::no_space, "injected");
  };
  store s((d / "s").string(), o);
  add(s, "first", data);
  auto const size = stdfs::file_size(pack_files(d / "s")[0]);
  for (char const* point : {"pack_write", "pack_synced"}) {
    fail_at = point;
    try {
      add(s, "second", checkpoint(10));
      FAIL();
    } catch (store_error const& e) {
      EXPECT_EQ(e.errno_value(), ENOSPC);
    }
    EXPECT_FALSE(s.lookup(root_inode, "second"));
    EXPECT_EQ(stdfs::file_size(pack_files(d / "s")[0]), size);
  }
  fail_at.clear();
  EXPECT_EQ(read_all(s, *s.lookup(root_inode, "first")), data);
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, full_map_is_enospc_and_consistent) {
  temp_dir d;
  store_options o;
  o.chunk_size = 4096;
  o.initial_map_size = 256 << 10;
  o.max_map_size = 512 << 10;
  std::vector<std::pair<std::string, std::string>> added;
  {
    store s((d / "s").string(), o);
    bool full = false;
    for (int i = 0; i < 200 && !full; ++i) {
      std::string data = cli_test::random_bytes(64 << 10, i);
      // Appended, not `"f" + ...`: GCC 12 warns there (-Wrestrict, a false
      // positive).
      std::string name = "f";
      name += std::to_string(i);
      try {
        add(s, name, data);
        added.emplace_back(name, data);
      } catch (store_error const& e) {
        EXPECT_EQ(e.code(), store_errc::no_space) << e.what();
        full = true;
      }
    }
    ASSERT_TRUE(full);
    ASSERT_GT(added.size(), 2u);
    EXPECT_EQ(s.stats().map_size, o.max_map_size);  // it grew first
    // Deleting still works when the map is full (reclaims space).
    s.unlink(root_inode, added.back().first);
    added.pop_back();
  }
  store s((d / "s").string(), o);
  // A commit that met the full map left its appended bytes (a commit may
  // reach the disk though it fails); appends then went to new packs, and
  // this open cut the bytes off: at most one add's worth.
  EXPECT_LE(s.report().truncated.size(), 1u);
  for (auto const& [name, data] : added) {
    ASSERT_EQ(read_all(s, *s.lookup(root_inode, name)), data);
  }
  EXPECT_TRUE(fsck_clean(s));
}

TEST(store_test, gc_while_reading) {
  temp_dir d;
  store_options o = small_chunks();
  o.pack_limit = 1 << 20;  // several packs
  store s((d / "s").string(), o);
  std::vector<std::string> keep;
  for (int i = 0; i < 6; ++i) {
    std::string data = checkpoint(20 + i, 100000);
    add(s, "f" + std::to_string(i), data);
    keep.push_back(data);
  }
  for (int i = 0; i < 6; i += 2) s.unlink(root_inode, "f" + std::to_string(i));
  uint64_t const ino = *s.lookup(root_inode, "f1");
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::thread reader([&] {
    while (!stop) {
      ASSERT_EQ(read_all(s, ino), keep[1]);
      ++reads;
    }
  });
  // gc may finish before the reader's first read on a loaded machine.
  auto const until =
      std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (reads.load() == 0 && std::chrono::steady_clock::now() < until) {
    std::this_thread::yield();
  }
  gc_report g = s.gc(0.99);
  stop = true;
  reader.join();
  EXPECT_GT(g.packs_rewritten + g.packs_removed, 0u);
  EXPECT_GT(g.bytes_reclaimed, 0u);
  EXPECT_GT(reads.load(), 0);
  for (int i = 1; i < 6; i += 2) {
    EXPECT_EQ(read_all(s, *s.lookup(root_inode, "f" + std::to_string(i))),
              keep[i]);
  }
  EXPECT_TRUE(fsck_clean(s));
}

// Records appended while the store is open read right, and a pack cut
// short under an open store is an error (EIO) on the cut file only.
TEST(store_test, appended_records_read_and_a_cut_pack_fails) {
  temp_dir d;
  std::string const first = checkpoint(40);
  std::string const second = checkpoint(41);
  store s((d / "s").string(), small_chunks());
  uint64_t const a = add(s, "a", first);
  EXPECT_EQ(read_all(s, a), first);
  uint64_t const b = add(s, "b", second);
  auto packs = pack_files(d / "s");
  ASSERT_EQ(packs.size(), 1u);
  EXPECT_EQ(read_all(s, b), second);
  EXPECT_EQ(read_all(s, a), first);

  // Cut into the second file's records, under the open store.
  stdfs::resize_file(packs[0], stdfs::file_size(packs[0]) - 20000);
  std::string out(second.size(), '\0');
  try {
    s.read(b, 0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
    FAIL() << "read past the end of a cut pack succeeded";
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::corrupt) << e.what();
    EXPECT_EQ(e.errno_value(), EIO);
  }
  EXPECT_EQ(read_all(s, a), first);  // its records are all still there
}

TEST(store_test, parallel_readers) {
  temp_dir d;
  std::string const data = checkpoint(30);
  store s((d / "s").string(), small_chunks());
  uint64_t ino = add(s, "m", data);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      for (int i = 0; i < 20; ++i) {
        uint64_t off = rng() % data.size();
        std::string buf(128 << 10, '\0');
        size_t n = s.read(ino, off, buf.size(),
                          reinterpret_cast<uint8_t*>(buf.data()));
        ASSERT_EQ(buf.substr(0, n), data.substr(off, n));
      }
    });
  }
  for (auto& t : ts) t.join();
}

}  // namespace
}  // namespace brevis::fs
