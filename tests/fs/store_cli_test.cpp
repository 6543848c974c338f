// The store through the `brevis` binary: store add/get/ls, stats, fsck, gc,
// and crash safety (the binary killed with SIGKILL at chosen points).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <lmdb.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "codec/search/search_chooser.h"
#include "fs/store/records.h"
#include "fs/store/store.h"
#include "tests/cli/helpers.h"
#include "tests/fs/index_edit.h"

namespace brevis::fs {
namespace {

using namespace cli_test;
using namespace detail;
using namespace index_edit;

std::string ckpt(uint64_t seed) {
  return make_safetensors(
      {{"w", "BF16", {60000}, bf16_weights(60000, seed)},
       {"b", "BF16", {20000}, bf16_weights(20000, seed + 100)}});
}

// Writes `data` to d/a and stores it with `brevis store add` (as "a").
bool add_as_a(temp_dir const& d, std::string const& st,
              std::string const& data) {
  write_file(d / "a", data);
  return brevis({"store", "add", st, (d / "a").string()}).exit_code == 0;
}

std::string stored(store const& s, std::string const& name) {
  auto ino = s.lookup(root_inode, name);
  if (!ino) return "<missing>";
  std::string out(s.stat(*ino).size, '\0');
  s.read(*ino, 0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

TEST(store_cli_test, add_get_ls_stats_fsck_gc) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const data = ckpt(1);
  write_file(d / "m.safetensors", data);
  auto r = brevis({"store", "add", "--chunk-size", "64K", st,
                   (d / "m.safetensors").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = brevis(
      {"store", "add", st, (d / "m.safetensors").string(), "--as", "copy"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = brevis({"store", "get", st, "copy", "-o", (d / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(d / "out"), data);
  r = brevis({"store", "ls", st});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("m.safetensors"), std::string::npos);
  EXPECT_NE(r.out.find("copy"), std::string::npos);
  r = brevis({"stats", st});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("dedup savings"), std::string::npos);
  r = brevis({"store", "get", st, "nope", "-o", (d / "x").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err_lines(), 1u) << r.err;
  r = brevis({"store", "rm", st, "copy"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = brevis({"gc", st});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("clean"), std::string::npos);
  r = brevis({"stats", (d / "no-store").string()});
  EXPECT_EQ(r.exit_code, 1);
}

// Kills `brevis store add` of four files at the Nth time it reaches a point;
// what was committed before reads back exactly, nothing else is visible,
// and the store opens and checks clean.
void crash_at(std::string const& point, int n) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::vector<std::string> names, datas;
  std::vector<std::string> args = {
      "/usr/bin/env",
      "BREVIS_STORE_KILL_AT=" + point + ":" + std::to_string(n),
      brevis_binary(),
      "store",
      "add",
      "--chunk-size",
      "32K",
      st};
  for (int i = 0; i < 4; ++i) {
    names.push_back(std::string("f") + std::to_string(i));
    datas.push_back(ckpt(10 + i));
    write_file(d / names.back(), datas.back());
    args.push_back((d / names.back()).string());
  }
  auto r = run_program(args);
  EXPECT_EQ(r.exit_code, 128 + SIGKILL) << point << ":" << n << r.err;
  store s(st);
  size_t committed = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    std::string got = stored(s, names[i]);
    if (got == "<missing>") continue;
    ++committed;
    EXPECT_EQ(got, datas[i]) << point << ":" << n << " " << names[i];
  }
  if (point == "committed") {
    EXPECT_EQ(committed, size_t(n));
  }
  if (point == "pack_synced") {
    EXPECT_EQ(committed, size_t(n - 1));
  }
  fsck_report f = s.fsck({});
  EXPECT_TRUE(f.clean()) << point << ":" << n << " "
                         << (f.problems.empty() ? "" : f.problems[0]);
}

TEST(store_cli_test, sigkill_at_write_points) {
  for (int n : {1, 3}) crash_at("pack_synced", n);
  for (int n : {1, 2}) crash_at("committed", n);
  for (int n : {1, 7, 20}) crash_at("pack_write", n);
}

TEST(store_cli_test, owner_group_and_setuid_as_cp_keeps_them) {
  temp_dir d;
  std::string const st = (d / "st").string();
  auto const stat_of = [](std::filesystem::path const& p) {
    struct stat s {};
    EXPECT_EQ(::stat(p.c_str(), &s), 0) << p;
    return s;
  };
  write_file(d / "tool", "#!/bin/sh\n");
  ASSERT_EQ(::chmod((d / "tool").c_str(), 04755), 0);
  // Mine: get gives the bits back, group ones included.
  ASSERT_EQ(brevis({"store", "add", st, (d / "tool").string()}).exit_code, 0);
  auto r = brevis({"store", "get", st, "tool", "-o", (d / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat const out = stat_of(d / "out");
  EXPECT_EQ(out.st_mode & 07777, 04755u);
  EXPECT_EQ(out.st_uid, ::geteuid());
  EXPECT_EQ(out.st_gid, ::getegid());
  if (::geteuid() != 0) return;
  // Another user's setuid file, added by root: root's copy is not setuid.
  ASSERT_EQ(::chown((d / "tool").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chmod((d / "tool").c_str(), 06755), 0);
  r = brevis({"store", "add", st, (d / "tool").string(), "--as", "theirs"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = brevis({"store", "get", st, "theirs", "-o", (d / "theirs").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(stat_of(d / "theirs").st_mode & 07777, 0755u);
  // A file the store says is nobody's comes out nobody's when root gets it.
  {
    store s(st);
    store::attr_update u;
    u.uid = 65534;
    u.gid = 65534;
    u.mode = 04750;
    s.set_attr(*s.lookup(root_inode, "tool"), u);
  }
  r = brevis({"store", "get", st, "tool", "-o", (d / "nobodys").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  struct stat const nb = stat_of(d / "nobodys");
  EXPECT_EQ(nb.st_uid, 65534u);
  EXPECT_EQ(nb.st_gid, 65534u);
  EXPECT_EQ(nb.st_mode & 07777, 04750u);
}

TEST(store_cli_test, sigkill_at_random_times) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::vector<std::string> datas;
  std::vector<std::string> args = {
      brevis_binary(), "store", "add", "--chunk-size", "16K", "-T1", st};
  for (int i = 0; i < 6; ++i) {
    datas.push_back(ckpt(40 + i));
    write_file(d / (std::string("f") + std::to_string(i)), datas.back());
    args.push_back((d / (std::string("f") + std::to_string(i))).string());
  }
  for (int round = 0; round < 6; ++round) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = 0;
    ASSERT_EQ(
        posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(30 + 60 * round));
    ::kill(pid, SIGKILL);
    int status = 0;
    ::waitpid(pid, &status, 0);
    store s(st);
    for (int i = 0; i < 6; ++i) {
      std::string got = stored(s, std::string("f") + std::to_string(i));
      if (got != "<missing>") {
        EXPECT_EQ(got, datas[i]) << "round " << round << " f" << i;
      }
    }
    EXPECT_TRUE(s.fsck({}).clean()) << "round " << round;
  }
}

TEST(store_cli_test, file_size_limit_is_no_space_and_consistent) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const small = ckpt(60);
  write_file(d / "small", small);
  write_file(d / "big", random_bytes(3 << 20, 61));
  ASSERT_EQ(brevis({"store", "add", st, (d / "small").string()}).exit_code, 0);
  // ulimit -f counts 1 KiB blocks: the big file cannot fit in the pack.
  auto r = run_program({"/bin/sh", "-c",
                        "ulimit -f 1024; exec \"$0\" store add \"$1\" \"$2\"",
                        brevis_binary(), st, (d / "big").string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("File too large"), std::string::npos) << r.err;
  store s(st);
  EXPECT_EQ(stored(s, "small"), small);
  EXPECT_EQ(stored(s, "big"), "<missing>");
  EXPECT_TRUE(s.fsck({}).clean());
}

TEST(store_cli_test, fsck_reports_and_repairs_corruption) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(70)));
  for (auto const& e :
       std::filesystem::directory_iterator(d / "st" / "packs")) {
    std::string p = read_file(e.path());
    p[p.size() - 10] ^= 1;
    write_file(e.path(), p);
  }
  auto r = brevis({"store", "get", st, "a", "-o", (d / "out").string()});
  EXPECT_EQ(r.exit_code, 1);
  // The decoder's validation or the chunk's XXH3-64 catches it.
  EXPECT_TRUE(r.err.find("checksum") != std::string::npos ||
              r.err.find("does not decode") != std::string::npos)
      << r.err;
  EXPECT_FALSE(std::filesystem::exists(d / "out"));
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("problem"), std::string::npos);
  r = brevis({"fsck", "--repair", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

// A damaged index: a directory entry whose key is shorter than the parent's
// 8-byte inode number (so it has no name) and names no inode. fsck reports
// it without reading past the key, and --repair removes it. The index is
// written directly, as a disk fault would leave it.
TEST(store_cli_test, fsck_reports_and_repairs_a_short_directory_key) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(71)));
  edit_index(d / "st", [](MDB_txn* t) {
    char key[3] = {'x', 'y', 'z'};
    uint64_t const missing_inode = 987654321;  // little-endian on x86
    MDB_val k{sizeof key, key};
    MDB_val v{sizeof missing_inode, const_cast<uint64_t*>(&missing_inode)};
    ASSERT_EQ(mdb_put(t, open_db(t, "dirents"), &k, &v, 0), 0);
  });
  auto r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("directory entry '' names missing inode 987654321"),
            std::string::npos)
      << r.out;
  r = brevis({"fsck", "--repair", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("removed directory entry ''"), std::string::npos)
      << r.out;
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out;
  store s(st);
  EXPECT_EQ(stored(s, "a"), ckpt(71));
}

// Rewrites every program record of the store at `dir` through `rewrite`.
// Those whose index (in key order) `rekey` takes go under the new bytes'
// key, the chunk records pointed at it: a store as a brevis of a later
// format version would leave it, when `rewrite` gives bytes this one cannot
// parse. The others stay under the old key, as damage would leave them.
void rewrite_programs(
    std::filesystem::path const& dir,
    std::function<codec::bytes(codec::bytes)> const& rewrite,
    std::function<bool(size_t)> const& rekey = [](size_t) { return true; }) {
  edit_index(dir, [&](MDB_txn* t) {
    MDB_dbi const programs = open_db(t, "programs");
    MDB_dbi const chunks = open_db(t, "chunks");
    std::map<uint64_t, uint64_t> moved;
    std::vector<record> fresh;
    for (auto const& [key, old] : records_of(t, programs)) {
      codec::bytes next = rewrite(old);
      uint64_t const h = rekey(fresh.size()) ? hash64(next) : hash64(old);
      moved[hash64(old)] = h;
      auto const new_key = program_key(h);
      fresh.emplace_back(codec::bytes(new_key.begin(), new_key.end()),
                         std::move(next));
    }
    ASSERT_EQ(mdb_drop(t, programs, 0), 0);
    put_all(t, programs, std::move(fresh));
    std::vector<record> records = records_of(t, chunks);
    for (auto& [key, value] : records) {
      chunk_rec r = decode_chunk(value);
      r.program = moved.at(r.program);
      value = encode(r);
    }
    put_all(t, chunks, std::move(records));
  });
}

// A file whose programs this brevis cannot parse but whose bytes are intact
// (a later format version's opcode, here 99): fsck reports it as needing a
// newer brevis, and --repair keeps it, so that the newer brevis still reads
// it (restored programs stand in for that brevis).
TEST(store_cli_test, fsck_repair_keeps_a_file_only_a_newer_brevis_reads) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(72)));
  std::map<uint64_t, codec::bytes> originals;
  rewrite_programs(d / "st", [&](codec::bytes p) {
    codec::bytes future = p;
    future[0] = 99;  // the root's opcode: none this brevis knows
    originals[hash64(future)] = std::move(p);
    return future;
  });
  // Not damage: fsck passes, naming the file it keeps.
  auto r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("kept: inode"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("needs a newer brevis"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("problem:"), std::string::npos) << r.out;
  r = brevis({"store", "get", st, "a", "-o", (d / "out").string()});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("needs a newer brevis"), std::string::npos) << r.err;
  r = brevis({"fsck", "--repair", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("removed"), std::string::npos) << r.out;
  rewrite_programs(d / "st",
                   [&](codec::bytes p) { return originals.at(hash64(p)); });
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  store s(st);
  EXPECT_EQ(stored(s, "a"), ckpt(72));
}

// The same unparseable bytes under the old key (so damaged, not newer): a
// problem, and --repair removes the file.
TEST(store_cli_test, fsck_repair_still_removes_a_damaged_program) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(73)));
  rewrite_programs(
      d / "st",
      [](codec::bytes p) {
        p[0] = 99;
        return p;
      },
      [](size_t) { return false; });
  auto r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("cannot be read"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is damaged"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("kept:"), std::string::npos) << r.out;
  r = brevis({"fsck", "--repair", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("removed unreadable"), std::string::npos) << r.out;
}

// A file with chunks only a newer brevis reads and one damaged chunk is
// damaged, whichever chunk fsck reaches first: a problem, and --repair
// removes it (keeping it for a newer brevis would keep damage).
TEST(store_cli_test, fsck_repair_removes_a_file_mixing_newer_and_damaged) {
  for (size_t damaged = 0; damaged < 3; ++damaged) {
    SCOPED_TRACE("damaged program " + std::to_string(damaged));
    temp_dir d;
    std::string const st = (d / "st").string();
    ASSERT_TRUE(add_as_a(d, st, ckpt(74)));
    size_t programs = 0;
    rewrite_programs(
        d / "st",
        [&](codec::bytes p) {
          ++programs;
          p[0] = 99;
          return p;
        },
        [&](size_t i) { return i != damaged; });
    // The header's, and one a tensor.
    ASSERT_EQ(programs, 3u);
    auto r = brevis({"fsck", st});
    EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
    EXPECT_NE(r.out.find("is damaged"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("kept:"), std::string::npos) << r.out;
    r = brevis({"fsck", "--repair", st});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("removed unreadable"), std::string::npos) << r.out;
    r = brevis({"fsck", st});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }
}

// A chunk record whose length is damaged (here 0xFFFFFFF0) is refused as
// a damaged store before a reader sizes a buffer by it: reads and fsck
// used to allocate and zero 4 GiB for it, per read, before failing.
TEST(store_cli_test, a_damaged_chunk_length_is_refused_before_any_buffer) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(73)));
  edit_records(d / "st", "chunks", [](std::vector<record>& records) {
    ASSERT_FALSE(records.empty());
    records.resize(1);
    codec::store_le<uint32_t>(records[0].second.data(), 0xFFFFFFF0u);  // Length
  });
  {
    store s(st);
    auto const ino = s.lookup(root_inode, "a");
    ASSERT_TRUE(ino.has_value());
    std::vector<uint8_t> buf(4096);
    try {
      (void)s.read(*ino, 0, buf.size(), buf.data());
      ADD_FAILURE() << "read a chunk of a damaged length";
    } catch (store_error const& e) {
      EXPECT_EQ(e.code(), store_errc::bad_store) << e.what();
      EXPECT_NE(std::string(e.what()).find("chunk record length"),
                std::string::npos)
          << e.what();
    }
  }
  run_result const r = brevis({"fsck", st});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE((r.out + r.err).find("chunk record length"), std::string::npos)
      << r.out << r.err;
}

// `brevis store get` of "a" from the store `st` gives `want`.
void expect_get_gives(temp_dir const& d, std::string const& st,
                      std::string const& want) {
  run_result const r =
      brevis({"store", "get", st, "a", "-o", (d / "out").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(read_file(d / "out"), want);
}

// Deletes the records of `db` whose key `doomed` picks, as a disk fault or a
// damaged page would lose them.
void delete_records(std::filesystem::path const& st, char const* db,
                    std::function<bool(codec::bytes const&)> const& doomed) {
  edit_index(st, [&](MDB_txn* t) {
    MDB_dbi const d = open_db(t, db);
    for (auto& [key, value] : records_of(t, d)) {
      if (!doomed(key)) continue;
      MDB_val k{key.size(), key.data()};
      ASSERT_EQ(mdb_del(t, d, &k, nullptr), 0);
    }
  });
}

// Opens the store in `st` while another process holds its append lock (as
// a live mount appending would): the open skips crash recovery.
std::unique_ptr<store> open_without_recovery(std::filesystem::path const& st) {
  int const lock =
      ::open((st / "index" / "append.lock").c_str(), O_RDWR | O_CLOEXEC);
  if (lock < 0 || ::flock(lock, LOCK_EX) != 0) return nullptr;
  auto s = std::make_unique<store>(st.string());
  ::close(lock);
  EXPECT_FALSE(s->report().recovered);
  return s;
}

// Sets the index's next_pack counter, as damage that lost its bumps would.
void set_next_pack(std::filesystem::path const& st, uint64_t next) {
  edit_index(st, [&](MDB_txn* t) {
    codec::bytes v(8, 0);
    codec::store_le<uint64_t>(v.data(), next);
    put_all(t, open_db(t, "meta"),
            {{codec::bytes{'n', 'e', 'x', 't', '_', 'p', 'a', 'c', 'k'}, v}});
  });
}

// The bytes of every pack file of the store in `st`, by name.
std::map<std::string, std::string> pack_files(std::filesystem::path const& st) {
  std::map<std::string, std::string> out;
  for (auto const& e : std::filesystem::directory_iterator(st / "packs")) {
    out[e.path().filename().string()] = read_file(e.path());
  }
  return out;
}

// An index lost or damaged so that it holds no store (its files deleted,
// or the page naming its databases unreadable) beside packs: opening the
// store must not start a new index over them, since recovery would then
// delete every pack as uncommitted. Every command refuses, nothing is
// changed, and the index put back reads the file again.
TEST(store_cli_test, a_lost_index_is_refused_and_its_packs_kept) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(81);
  ASSERT_TRUE(add_as_a(d, st, a));
  auto const packs = pack_files(d / "st");
  ASSERT_FALSE(packs.empty());
  std::filesystem::path const index = d / "st" / "index";
  std::filesystem::rename(index / "data.mdb", d / "data.mdb");
  std::filesystem::remove(index / "lock.mdb");
  for (std::vector<std::string> const& args :
       {std::vector<std::string>{"store", "ls", st},
        std::vector<std::string>{"fsck", st},
        std::vector<std::string>{"fsck", "--repair", st},
        std::vector<std::string>{"store", "add", st, (d / "a").string(), "--as",
                                 "b"}}) {
    run_result const r = brevis(args);
    EXPECT_NE(r.exit_code, 0) << args[0] << " " << args[1];
    EXPECT_NE(r.err.find("the index is missing or damaged"), std::string::npos)
        << r.err;
    EXPECT_EQ(pack_files(d / "st"), packs) << args[0] << " " << args[1];
  }
  std::filesystem::remove(index / "lock.mdb");
  std::filesystem::rename(d / "data.mdb", index / "data.mdb");
  expect_get_gives(d, st, a);
}

// A pack whose index record was lost while payloads still point into it:
// recovery keeps it (it deleted it as an uncommitted append's, with every
// payload in it), the file reads back, fsck reports it, and --repair
// rebuilds the record as it was.
TEST(store_cli_test, a_pack_that_lost_its_record_is_kept_and_rebuilt) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(82);
  ASSERT_TRUE(add_as_a(d, st, a));
  codec::bytes original;
  edit_index(d / "st", [&](MDB_txn* t) {
    std::vector<record> const records = records_of(t, open_db(t, "packs"));
    ASSERT_EQ(records.size(), 1u);
    original = records[0].second;
  });
  delete_records(d / "st", "packs", [](codec::bytes const&) { return true; });
  // Its id's bump of next_pack lost too: the rebuilt pack's id must not be
  // handed out again (a pack made under it replaces the file).
  auto const next_pack = [&] {
    uint64_t next = 0;
    edit_index(d / "st", [&](MDB_txn* t) {
      for (auto const& [k, v] : records_of(t, open_db(t, "meta"))) {
        if (k == codec::bytes{'n', 'e', 'x', 't', '_', 'p', 'a', 'c', 'k'}) {
          next = codec::load_le<uint64_t>(v.data());
        }
      }
    });
    return next;
  };
  ASSERT_EQ(next_pack(), 2u);
  set_next_pack(d / "st", 1);
  {
    store s(st);
    EXPECT_TRUE(s.report().removed_packs.empty());
    ASSERT_EQ(s.report().damaged_packs.size(), 1u);
    EXPECT_NE(s.report().damaged_packs[0].find("no index record"),
              std::string::npos);
    EXPECT_EQ(stored(s, "a"), a);
  }
  run_result r = brevis({"fsck", st});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("no index record"), std::string::npos) << r.out;
  r = brevis({"fsck", "--repair", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  edit_index(d / "st", [&](MDB_txn* t) {
    std::vector<record> const records = records_of(t, open_db(t, "packs"));
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(records[0].second, original);
  });
  EXPECT_EQ(next_pack(), 2u);
  store s(st);
  EXPECT_EQ(stored(s, "a"), a);
}

// A pack file without a record that no payload points into is an append
// not committed yet (a live mount's, whose append lock keeps recovery
// away) or a leftover: fsck leaves it to its writer or the next open (it
// called it damage, and --repair gave it a record under an id still to be
// handed out, whose pack then replaced it).
TEST(store_cli_test, fsck_leaves_an_append_not_committed_yet) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(92)));
  std::filesystem::copy_file(d / "st" / "packs" / "00000001.pack",
                             d / "st" / "packs" / "00000002.pack");
  int const lock =
      ::open((d / "st" / "index" / "append.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(lock, 0);
  ASSERT_EQ(::flock(lock, LOCK_EX), 0);
  run_result const r = brevis({"fsck", st});
  ::close(lock);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(std::filesystem::exists(d / "st" / "packs" / "00000002.pack"));
}

// An index that lost a pack's record and next_pack's bump past it hands
// the pack's id out again: the new pack must not replace the file, whose
// payloads are all there is of the files stored in it (recovery, which
// would keep it, skipped: another process held the append lock).
TEST(store_cli_test, a_new_pack_never_replaces_one_holding_payloads) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(93);
  ASSERT_TRUE(add_as_a(d, st, a));
  delete_records(d / "st", "packs", [](codec::bytes const&) { return true; });
  set_next_pack(d / "st", 1);
  std::unique_ptr<store> const opened = open_without_recovery(d / "st");
  ASSERT_TRUE(opened);
  store& s = *opened;
  auto const chooser = codec::make_store_chooser();
  try {
    s.add_file(root_inode, "b", codec::as_bytes(ckpt(94)), *chooser, 0644, 0);
    ADD_FAILURE() << "a new pack replaced one holding payloads";
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::bad_store) << e.what();
  }
  EXPECT_EQ(stored(s, "a"), a);
}

// A stored payload damaged on disk, then named by a new file with the same
// bytes: the new file stores it anew rather than naming the damaged copy
// (it was unreadable, its good bytes lost), and the old file reads whole
// again through the new copy. Both ways in: `brevis store add` here, the
// mount's staged commit in pipeline_test.
TEST(store_cli_test, a_damaged_payload_is_stored_anew_when_named_again) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(83);
  ASSERT_TRUE(add_as_a(d, st, a));
  for (auto const& e :
       std::filesystem::directory_iterator(d / "st" / "packs")) {
    std::string p = read_file(e.path());
    p[p.size() / 2] ^= 0x10;
    write_file(e.path(), p);
  }
  {
    store s(st);
    EXPECT_THROW((void)stored(s, "a"), store_error);
  }
  run_result r = brevis({"store", "add", st, (d / "a").string(), "--as", "b"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("stored 1 payloads anew"), std::string::npos) << r.err;
  {
    store s(st);
    EXPECT_EQ(stored(s, "a"), a);
    EXPECT_EQ(stored(s, "b"), a);
  }
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// The same when the damage is the payload record's length: the new copy's
// length goes into the record too (it kept the damaged one, so the files
// stayed unreadable and every add appended one more copy).
TEST(store_cli_test, a_damaged_payload_length_is_mended_when_named_again) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(91);
  ASSERT_TRUE(add_as_a(d, st, a));
  edit_records(d / "st", "payloads", [](std::vector<record>& records) {
    records.resize(1);
    codec::bytes& v = records[0].second;  // Pack, Offset, Length, Refs
    codec::store_le<uint64_t>(v.data() + 16,
                              codec::load_le<uint64_t>(v.data() + 16) + 1);
  });
  for (char const* name : {"b", "c"}) {
    run_result const r =
        brevis({"store", "add", st, (d / "a").string(), "--as", name});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    // Stored anew once, then named as it is.
    EXPECT_EQ(r.err.find("stored 1 payloads anew") != std::string::npos,
              std::string(name) == "b")
        << name << ": " << r.err;
  }
  {
    store s(st);
    EXPECT_EQ(stored(s, "a"), a);
    EXPECT_EQ(stored(s, "c"), a);
  }
  // The old copy's Live was counted at the damaged length: recounted.
  EXPECT_EQ(brevis({"fsck", "--repair", st}).exit_code, 0);
  run_result const r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// Chunk records that stop short of a compressed file's size, at its end or
// its start: the missing bytes are damage, not zeros (the mount's reads
// take the map, and a short reply is zero-filled by the kernel).
TEST(store_cli_test, chunk_records_short_of_the_file_are_damage) {
  for (bool const last : {true, false}) {
    temp_dir d;
    std::string const st = (d / "st").string();
    ASSERT_TRUE(add_as_a(d, st, ckpt(84)));
    uint64_t ino = 0;
    {
      store s(st);
      ino = *s.lookup(root_inode, "a");
      ASSERT_GT(s.chunk_map(ino).size(), 1u);
    }
    codec::bytes doomed;
    edit_index(d / "st", [&](MDB_txn* t) {
      std::vector<record> const records = records_of(t, open_db(t, "chunks"));
      doomed = last ? records.back().first : records.front().first;
    });
    delete_records(d / "st", "chunks",
                   [&](codec::bytes const& k) { return k == doomed; });
    store s(st);
    try {
      (void)s.chunk_map(ino);
      ADD_FAILURE() << "a map short of the file, last " << last;
    } catch (store_error const& e) {
      EXPECT_EQ(e.code(), store_errc::corrupt) << e.what();
      EXPECT_NE(std::string(e.what()).find("do not cover"), std::string::npos)
          << e.what();
    }
  }
}

// A chunk record that does not decode (a damaged length) neither stops
// fsck nor keeps its file from being removed: rm drops it, and --repair
// then mends the reference counts it could not.
TEST(store_cli_test, a_chunk_record_that_does_not_decode_can_be_removed) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(85)));
  edit_records(d / "st", "chunks", [](std::vector<record>& records) {
    records.resize(1);
    codec::store_le<uint32_t>(records[0].second.data(), 0);  // Length
  });
  std::filesystem::copy(d / "st", d / "st2",
                        std::filesystem::copy_options::recursive);
  run_result r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("cannot be read"), std::string::npos) << r.out;
  r = brevis({"fsck", "--repair", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("removed unreadable inode"), std::string::npos) << r.out;
  EXPECT_EQ(brevis({"fsck", st}).exit_code, 0);
  std::string const st2 = (d / "st2").string();
  r = brevis({"store", "rm", st2, "a"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(brevis({"fsck", "--repair", st2}).exit_code, 0);
  r = brevis({"fsck", st2});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// A staged file whose staged copy is gone (its bytes were all there) is
// damage fsck reports, and --repair removes; it said the store was clean
// while the mount retried compressing it every minute.
TEST(store_cli_test, a_staged_file_without_its_copy_is_damage) {
  temp_dir d;
  std::string const st = (d / "st").string();
  {
    store s(st);
    store::node_spec spec;
    spec.mode = S_IFREG | 0644;
    for (char const* name : {"kept", "lost"}) {
      uint64_t const ino = s.make_node(root_inode, name, spec).ino;
      write_file(s.staging_path(ino), ckpt(87));
    }
    std::filesystem::remove(s.staging_path(*s.lookup(root_inode, "lost")));
  }
  run_result r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("staged copy"), std::string::npos) << r.out;
  r = brevis({"fsck", "--repair", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  store s(st);
  EXPECT_TRUE(s.lookup(root_inode, "kept").has_value());
  EXPECT_FALSE(s.lookup(root_inode, "lost").has_value());
}

// `store get` of a staged file (written through a mount, not compressed
// yet) gives its staged copy (it said the chunk records were damaged).
TEST(store_cli_test, get_of_a_staged_file_gives_its_staged_copy) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(88);
  {
    store s(st);
    store::node_spec spec;
    spec.mode = S_IFREG | 0644;
    write_file(s.staging_path(s.make_node(root_inode, "a", spec).ino), a);
  }
  expect_get_gives(d, st, a);
}

// gc leaves a pack with a damaged live record as it is (fsck --repair
// decides), and says so with a failing exit status, rather than reporting
// nothing moved and exiting 0; no empty pack is left behind for it.
TEST(store_cli_test, gc_says_which_damaged_pack_it_left) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(89)));
  write_file(d / "b", ckpt(90));
  ASSERT_EQ(brevis({"store", "add", st, (d / "b").string()}).exit_code, 0);
  auto packs = pack_files(d / "st");
  ASSERT_EQ(packs.size(), 1u);
  std::string p = packs.begin()->second;
  p[p.size() / 4] ^= 0x10;  // in a's payloads, which stay live
  write_file(d / "st" / "packs" / packs.begin()->first, p);
  ASSERT_EQ(brevis({"store", "rm", st, "b"}).exit_code, 0);
  run_result const r = brevis({"gc", st, "--threshold", "0.99"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("a live record in it is damaged"), std::string::npos)
      << r.err;
  EXPECT_EQ(pack_files(d / "st").size(), 1u);
}

// A pack file missing under a file's records is damage (EIO through the
// mount), not a file that went (not_found, which the mount answers
// ESTALE, "Stale file handle").
TEST(store_cli_test, a_missing_pack_is_damage_not_a_missing_file) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(86)));
  for (auto const& e :
       std::filesystem::directory_iterator(d / "st" / "packs")) {
    std::filesystem::remove(e.path());
  }
  store s(st);
  try {
    (void)stored(s, "a");
    ADD_FAILURE() << "read a file whose pack is gone";
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::corrupt) << e.what();
    EXPECT_EQ(e.errno_value(), EIO);
  }
}

// Index keys and directory values of the wrong size are a damaged store,
// named as such, and never read past their end: an inode key of 3 bytes
// (fsck and gc read 8), and a directory entry whose value is 5 bytes (an
// unlink and a replacing add read 8).
// Changes the store's one pack record by `damage`, as a disk fault would;
// returns the record as it was.
codec::bytes pack_record_damage(
    std::filesystem::path const& st,
    std::function<void(codec::bytes&)> const& damage) {
  codec::bytes original;
  edit_records(st, "packs", [&](std::vector<record>& records) {
    ASSERT_EQ(records.size(), 1u);
    original = records[0].second;
    damage(records[0].second);
  });
  return original;
}

// A pack whose index record is damaged, as a disk fault would leave it:
// `damage` changes the record of the store's one pack. Opening the store
// leaves the pack as it is (an open truncates a pack to its recorded end,
// and deletes one without a record), the file reads back, a new file goes
// to a new pack rather than over the damaged one's payloads, `brevis
// stats` still answers, and fsck --repair rebuilds the record as it was.
void pack_record_damage_keeps_the_pack(
    std::function<void(codec::bytes&)> const& damage,
    std::string const& fsck_says) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(74);
  std::string const b = ckpt(75);
  ASSERT_TRUE(add_as_a(d, st, a));
  codec::bytes const original = pack_record_damage(d / "st", damage);
  run_result const stats = brevis({"stats", st});
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  auto const chooser = codec::make_store_chooser();
  {
    store s(st);
    EXPECT_EQ(s.report().damaged_packs.size(), 1u);
    EXPECT_TRUE(s.report().truncated.empty());
    EXPECT_TRUE(s.report().removed_packs.empty());
    EXPECT_EQ(stored(s, "a"), a);
    s.add_file(root_inode, "b", codec::as_bytes(b), *chooser, 0644, 0);
    EXPECT_EQ(stored(s, "a"), a);
    EXPECT_EQ(stored(s, "b"), b);
  }
  run_result const found = brevis({"fsck", st});
  EXPECT_NE(found.exit_code, 0) << found.out;
  EXPECT_NE(found.out.find(fsck_says), std::string::npos) << found.out;
  run_result const repaired = brevis({"fsck", "--repair", st});
  EXPECT_EQ(repaired.exit_code, 0) << repaired.out << repaired.err;
  run_result const clean = brevis({"fsck", st});
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
  edit_index(d / "st", [&](MDB_txn* t) {
    std::vector<record> const records = records_of(t, open_db(t, "packs"));
    ASSERT_EQ(records.size(), 2u);
    EXPECT_EQ(records[0].second, original);
  });
  store s(st);
  EXPECT_TRUE(s.report().damaged_packs.empty());
  EXPECT_EQ(stored(s, "a"), a);
  EXPECT_EQ(stored(s, "b"), b);
}

TEST(store_cli_test, a_pack_end_before_its_payloads_keeps_them) {
  pack_record_damage_keeps_the_pack(
      [](codec::bytes& v) { codec::store_le<uint64_t>(v.data(), 16); },  // End
      "before payloads it holds");
}

TEST(store_cli_test, a_pack_record_of_another_size_keeps_the_pack) {
  pack_record_damage_keeps_the_pack([](codec::bytes& v) { v.resize(15); },
                                    "index record has 15 bytes");
}

// A damaged pack record whose pack file is gone too: the open says the
// pack is missing (as for a whole record), and fsck reports both.
TEST(store_cli_test, a_missing_pack_with_a_damaged_record_is_reported) {
  temp_dir d;
  std::string const st = (d / "st").string();
  ASSERT_TRUE(add_as_a(d, st, ckpt(80)));
  pack_record_damage(d / "st", [](codec::bytes& v) { v.resize(15); });
  for (auto const& e :
       std::filesystem::directory_iterator(d / "st" / "packs")) {
    std::filesystem::remove(e.path());
  }
  {
    store s(st);
    ASSERT_EQ(s.report().short_packs.size(), 1u);
    EXPECT_NE(s.report().short_packs[0].find("missing"), std::string::npos);
  }
  run_result const r = brevis({"fsck", st});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("index record has 15 bytes"), std::string::npos)
      << r.out;
}

// Sets the End and Live of the store's one pack record, as damage would.
void set_pack_record(std::filesystem::path const& st, uint64_t end,
                     uint64_t live) {
  pack_record_damage(st, [&](codec::bytes& v) {
    codec::store_le<uint64_t>(v.data(), end);
    codec::store_le<uint64_t>(v.data() + 8, live);
  });
}

// A store opened while another process holds the append lock skips
// recovery, so it never learns the pack is damaged: its append still goes
// to a new pack, decided from the pack's length on disk.
TEST(store_cli_test, an_append_never_goes_past_a_damaged_end) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(76);
  std::string const b = ckpt(77);
  ASSERT_TRUE(add_as_a(d, st, a));
  set_pack_record(d / "st", 16, 0);
  auto const chooser = codec::make_store_chooser();
  std::unique_ptr<store> const opened = open_without_recovery(d / "st");
  ASSERT_TRUE(opened);
  store& s = *opened;
  s.add_file(root_inode, "b", codec::as_bytes(b), *chooser, 0644, 0);
  EXPECT_EQ(stored(s, "a"), a);
  EXPECT_EQ(stored(s, "b"), b);
}

// gc takes a pack whose record says it holds nothing for empty only when
// no payload points into it: a damaged Live moves the payloads instead of
// deleting them.
TEST(store_cli_test, gc_keeps_the_payloads_of_a_pack_said_to_be_empty) {
  temp_dir d;
  std::string const st = (d / "st").string();
  std::string const a = ckpt(78);
  ASSERT_TRUE(add_as_a(d, st, a));
  set_pack_record(d / "st", 16, 0);
  run_result const gc = brevis({"gc", st});
  EXPECT_EQ(gc.exit_code, 0) << gc.out << gc.err;
  run_result const get =
      brevis({"store", "get", st, "a", "-o", (d / "out").string()});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_TRUE(read_file(d / "out") == a);
  run_result const clean = brevis({"fsck", st});
  EXPECT_EQ(clean.exit_code, 0) << clean.out << clean.err;
}

// fsck --repair of a 15-byte pack record with a damaged payload record
// pointing far past the pack's end: the rebuilt End reaches only the
// payloads kept, so the store is clean afterwards, files can be removed
// and added, and it stays clean.
TEST(store_cli_test, a_rebuilt_pack_end_stays_within_the_pack) {
  temp_dir d;
  std::string const st = (d / "st").string();
  for (char const* n : {"a", "b"}) {
    write_file(d / n, ckpt(n[0]));
    ASSERT_EQ(brevis({"store", "add", st, (d / n).string()}).exit_code, 0);
  }
  edit_records(d / "st", "payloads", [](std::vector<record>& p) {
    ASSERT_FALSE(p.empty());
    p.resize(1);
    codec::store_le<uint64_t>(p[0].second.data() + 8, 10000000);  // Offset
  });
  edit_records(d / "st", "packs", [](std::vector<record>& k) {
    ASSERT_EQ(k.size(), 1u);
    k[0].second.resize(15);
  });
  run_result const rm = brevis({"store", "rm", st, "b"});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  run_result r = brevis({"fsck", "--repair", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  write_file(d / "c", ckpt(79));
  ASSERT_EQ(brevis({"store", "add", st, (d / "c").string()}).exit_code, 0);
  r = brevis({"fsck", st});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = brevis({"store", "get", st, "c", "-o", (d / "out").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(read_file(d / "out") == ckpt(79));
}

// `store ls` names the type of what is not a regular file, and `store get`
// of a FIFO or a socket says what it is rather than reporting damage.
TEST(store_cli_test, ls_and_get_of_fifos_and_sockets) {
  temp_dir d;
  std::string const st = (d / "st").string();
  {
    store s(st);
    for (auto [name, type] : {std::pair{"pipe", S_IFIFO}, {"sock", S_IFSOCK}}) {
      store::node_spec spec;
      spec.mode = type | 0644;
      s.make_node(root_inode, name, spec);
    }
  }
  run_result const ls = brevis({"store", "ls", st});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("fifo"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("socket"), std::string::npos) << ls.out;
  for (char const* name : {"pipe", "sock"}) {
    run_result const get =
        brevis({"store", "get", st, name, "-o", (d / "out").string()});
    EXPECT_NE(get.exit_code, 0);
    EXPECT_NE(get.err.find("not a regular file"), std::string::npos) << get.err;
    EXPECT_FALSE(std::filesystem::exists(d / "out"));
  }
}

TEST(store_cli_test, index_keys_and_values_of_the_wrong_size_are_refused) {
  temp_dir d;
  std::string const st = (d / "st").string();
  write_file(d / "a", ckpt(74));
  write_file(d / "b", ckpt(75));
  ASSERT_EQ(brevis({"store", "add", st, (d / "a").string()}).exit_code, 0);
  ASSERT_EQ(brevis({"store", "add", st, (d / "b").string()}).exit_code, 0);
  edit_index(d / "st", [](MDB_txn* t) {
    MDB_dbi const dirents = open_db(t, "dirents");
    std::string key(8, '\0');
    key[7] = static_cast<char>(root_inode);  // the parent, big-endian
    key += "b";
    char five[5] = {2, 0, 0, 0, 0};
    MDB_val k{key.size(), key.data()};
    MDB_val v{sizeof five, five};
    ASSERT_EQ(mdb_put(t, dirents, &k, &v, 0), 0);
  });
  {
    store s(st);
    for (auto const& step : std::vector<std::function<void()>>{
             [&] { s.unlink(root_inode, "b"); },
             [&] {
               auto const chooser = codec::make_store_chooser();
               s.add_file(root_inode, "b", codec::as_bytes(ckpt(76)), *chooser,
                          0644, 0);
             }}) {
      try {
        step();
        ADD_FAILURE() << "a 5-byte directory entry was read";
      } catch (store_error const& e) {
        EXPECT_EQ(e.code(), store_errc::bad_store) << e.what();
      }
    }
  }
  edit_index(d / "st", [](MDB_txn* t) {
    MDB_dbi const inodes = open_db(t, "inodes");
    std::vector<record> const all = records_of(t, inodes);
    ASSERT_FALSE(all.empty());
    put_all(t, inodes, {{codec::bytes{1, 2, 3}, all[0].second}});
  });
  run_result const r = brevis({"fsck", st});
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE((r.out + r.err).find("key of 3 bytes"), std::string::npos)
      << r.out << r.err;
}

// A write transaction that finds the map full runs again on a grown map.
// These two used to change state captured from outside the transaction, so
// the second run saw the first's changes: gc counted the bytes it moved
// twice, and fsck --repair skipped the link counts it had fixed in the run
// that was undone.
store_options small_map() {
  store_options o;
  o.chunk_size = 4096;
  o.initial_map_size = 256 << 10;
  o.max_map_size = 1ull << 30;
  return o;
}

TEST(store_cli_test, gc_counts_the_bytes_it_moves_once_when_the_map_grows) {
  temp_dir d;
  store s((d / "st").string(), small_map());
  auto const chooser = codec::make_store_chooser();
  std::mt19937_64 rng(410);
  for (int i = 0; i < 410; ++i) {
    std::string data(16 << 10, '\0');
    for (auto& c : data) c = static_cast<char>(rng());
    s.add_file(root_inode, std::string("f").append(std::to_string(i)),
               codec::as_bytes(data), *chooser, 0644, 0);
  }
  for (int i = 0; i < 410; i += 3)
    s.unlink(root_inode, std::string("f").append(std::to_string(i)));
  fsck_options fo;
  fo.decode = false;
  ASSERT_TRUE(s.fsck(fo).clean());
  uint64_t const map_before = s.stats().map_size;
  gc_report const g = s.gc(0.9);
  EXPECT_GT(g.records_moved, 0u);
  // The case in question: gc's move transaction met a full map.
  ASSERT_GT(s.stats().map_size, map_before);
  fsck_report const r = s.fsck(fo);
  EXPECT_TRUE(r.clean()) << (r.problems.empty() ? "" : r.problems[0]);
}

TEST(store_cli_test, fsck_repair_keeps_every_fix_when_the_map_grows) {
  temp_dir d;
  std::string const st = (d / "st").string();
  auto const chooser = codec::make_store_chooser();
  {
    store s(st, small_map());
    for (int i = 0; i < 2000; ++i) {
      std::string const data = "file number " + std::to_string(i);
      s.add_file(root_inode, std::string("f").append(std::to_string(i)),
                 codec::as_bytes(data), *chooser, 0644, 0);
    }
  }
  // Every file's link count damaged to 2.
  size_t damaged = 0;
  edit_records(d / "st", "inodes", [&](std::vector<record>& records) {
    std::erase_if(records, [](record const& r) {
      return !S_ISREG(codec::load_le<uint32_t>(r.second.data()));
    });
    for (auto& [key, value] : records) {
      codec::store_le<uint32_t>(value.data() + 4, 2);  // Nlink
    }
    damaged = records.size();
  });
  ASSERT_EQ(damaged, 2000u);
  store s(st, small_map());
  fsck_options fo;
  fo.decode = false;
  fo.repair = true;
  uint64_t const map_before = s.stats().map_size;
  fsck_report const repaired = s.fsck(fo);
  EXPECT_EQ(repaired.problems.size(), 2000u);
  ASSERT_GT(s.stats().map_size, map_before);  // the repair met a full map
  fo.repair = false;
  fsck_report const after = s.fsck(fo);
  EXPECT_TRUE(after.clean())
      << after.problems.size()
      << " left, first: " << (after.problems.empty() ? "" : after.problems[0]);
}

}  // namespace
}  // namespace brevis::fs
