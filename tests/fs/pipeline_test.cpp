// The compression pipeline (fs/pipeline/compress_graph.h) on a real store:
// staged files come out compressed byte for byte, under any memory limit;
// cancellation, an unlink and a missing copy leave the store as it was;
// jobs are recorded for `brevis stats`; the event log gets one line.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "codec/choose/chooser.h"
#include "codec/search/search_chooser.h"
#include "fs/fuse/filesystem.h"
#include "fs/pipeline/compress_graph.h"
#include "fs/pipeline/event_log.h"
#include "fs/store/store.h"
#include "tests/cli/helpers.h"
#include "tests/fs/index_edit.h"

namespace brevis::fs {
namespace {

using cli_test::temp_dir;

struct fixture {
  temp_dir dir;
  std::unique_ptr<codec::program_chooser> chooser = codec::make_store_chooser();
  std::unique_ptr<store> s;
  std::string data;

  explicit fixture(store_options so = {}) {
    so.chunk_size = 64 << 10;
    s = std::make_unique<store>(path(), so);
    // Two tensors plus a repeat of the first (a ref chunk's worth).
    std::string const w = cli_test::bf16_weights(200000, 7);
    data = cli_test::make_safetensors(
        {{"w", "BF16", {200000}, w},
         {"b", "BF16", {40000}, cli_test::bf16_weights(40000, 8)},
         {"w2", "BF16", {200000}, w}});
  }
  std::string path() const { return (dir / "s").string(); }

  /// A staged file named `name` holding `bytes`.
  uint64_t stage(std::string const& name, std::string const& bytes) {
    store::node_spec spec;
    spec.mode = S_IFREG | 0644;
    uint64_t const ino = s->make_node(root_inode, name, spec).ino;
    cli_test::write_file(s->staging_path(ino), bytes);
    store::attr_update u;
    u.size = bytes.size();
    u.ctime_ns = 1;
    s->set_attr(ino, u);
    return ino;
  }
  /// Stages `name` holding `data`, compresses it and closes the store, then
  /// damages its table `db` as a disk fault would (edit_records). The
  /// caller opens the store again.
  uint64_t compressed_then_damaged(
      std::string const& name, char const* db,
      std::function<void(std::vector<index_edit::record>&)> const& change) {
    uint64_t const ino = stage(name, data);
    EXPECT_TRUE(compress_staged_file(*s, *chooser, request(ino, name)).ok);
    s.reset();
    index_edit::edit_records(path(), db, change);
    return ino;
  }
  compress_request request(uint64_t ino, std::string const& name) const {
    compress_request r;
    r.ino = ino;
    r.name = name;
    r.staged_path = s->staging_path(ino);
    return r;
  }
  std::string read_all(uint64_t ino) const {
    inode_attr const a = s->stat(ino);
    std::string out(a.size, '\0');
    EXPECT_EQ(
        s->read(ino, 0, out.size(), reinterpret_cast<uint8_t*>(out.data())),
        out.size());
    return out;
  }
};

TEST(compress_graph, staged_file_comes_out_exact) {
  fixture f;
  uint64_t const ino = f.stage("model.safetensors", f.data);
  EXPECT_EQ(f.s->stats().staged_files, 1u);
  compress_outcome const out = compress_staged_file(
      *f.s, *f.chooser, f.request(ino, "model.safetensors"));
  ASSERT_TRUE(out.ok) << out.error;
  inode_attr const a = f.s->stat(ino);
  EXPECT_EQ(a.state, file_state::compressed);
  EXPECT_EQ(a.size, f.data.size());
  EXPECT_GT(a.chunk_count, 10u);
  EXPECT_LT(a.stored, f.data.size());
  EXPECT_GT(out.result.dedup_chunks, 0u);  // the repeated tensor
  // Its payloads count once in the file's stored size (what du shows), and
  // the repeat shows as the store's dedup savings.
  store_stats const st = f.s->stats();
  EXPECT_EQ(a.stored, st.unique);
  EXPECT_EQ(out.result.stored, st.unique);
  EXPECT_GT(st.referenced, st.unique);
  EXPECT_TRUE(f.read_all(ino) == f.data);
  EXPECT_EQ(f.s->stats().staged_files, 0u);
  fsck_report const rep = f.s->fsck({});
  EXPECT_TRUE(rep.clean()) << (rep.problems.empty() ? "" : rep.problems[0]);

  std::vector<job_record> const jobs = f.s->recent_jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].name, "model.safetensors");
  EXPECT_EQ(jobs[0].ino, ino);
  EXPECT_EQ(jobs[0].size, f.data.size());
  EXPECT_EQ(jobs[0].stored, a.stored);
}

TEST(compress_graph, tiny_memory_limit_and_shared_payloads) {
  fixture f;
  uint64_t const a = f.stage("a", f.data);
  uint64_t const b = f.stage("b", f.data);
  uint64_t const empty = f.stage("empty", "");
  compress_request ra = f.request(a, "a");
  ra.memory_limit = 1;  // two chunks in flight
  ASSERT_TRUE(compress_staged_file(*f.s, *f.chooser, ra).ok);
  compress_outcome const ob =
      compress_staged_file(*f.s, *f.chooser, f.request(b, "b"));
  ASSERT_TRUE(ob.ok) << ob.error;
  EXPECT_EQ(ob.result.written, 0u);  // every payload was stored by "a"
  EXPECT_EQ(ob.result.dedup_chunks, ob.result.chunks);
  compress_outcome const oe =
      compress_staged_file(*f.s, *f.chooser, f.request(empty, "empty"));
  ASSERT_TRUE(oe.ok) << oe.error;
  EXPECT_EQ(f.s->stat(empty).state, file_state::compressed);
  EXPECT_TRUE(f.read_all(a) == f.data);
  EXPECT_TRUE(f.read_all(b) == f.data);
  EXPECT_EQ(f.s->stats().packs, 1u);  // no empty packs from b or "empty"
  f.s->unlink(root_inode, "a");
  EXPECT_TRUE(f.read_all(b) == f.data);
  EXPECT_TRUE(f.s->fsck({}).clean());
  EXPECT_EQ(f.s->recent_jobs().size(), 3u);
}

// A payload damaged on disk, then named by a file staged with the same
// bytes: the job stores it anew and repoints it, so both files read whole
// (it named the damaged copy, and both were unreadable, the staged copy
// deleted); the store's Live counts stay true (fsck).
TEST(compress_graph, a_damaged_payload_is_stored_anew_when_named_again) {
  fixture f;
  uint64_t const a = f.stage("a", f.data);
  ASSERT_TRUE(compress_staged_file(*f.s, *f.chooser, f.request(a, "a")).ok);
  for (auto const& e :
       std::filesystem::directory_iterator(f.dir / "s" / "packs")) {
    std::string p = cli_test::read_file(e.path());
    p[p.size() / 3] ^= 0x10;
    cli_test::write_file(e.path(), p);
  }
  std::string back(f.data.size(), '\0');
  EXPECT_THROW(
      f.s->read(a, 0, back.size(), reinterpret_cast<uint8_t*>(back.data())),
      store_error);
  uint64_t const b = f.stage("b", f.data);
  compress_outcome const ob =
      compress_staged_file(*f.s, *f.chooser, f.request(b, "b"));
  ASSERT_TRUE(ob.ok) << ob.error;
  EXPECT_EQ(ob.result.healed, 1u);
  EXPECT_TRUE(f.read_all(b) == f.data);
  EXPECT_TRUE(f.read_all(a) == f.data);
  fsck_report const rep = f.s->fsck({});
  EXPECT_TRUE(rep.clean()) << (rep.problems.empty() ? "" : rep.problems[0]);
}

// A checkpoint written next to its older version, which is removed (or
// renamed over) while the new one compresses: the payloads they share lose
// their last file mid-job. The job names them again where they still are,
// rather than failing for a minute and then storing them twice.
TEST(compress_graph, shared_payloads_whose_last_file_goes_mid_job_are_kept) {
  store* in_job = nullptr;
  bool removed = false;
  store_options so;
  // The records die at the unlink, and would be punched out of their pack
  // at once but for the job, which holds the packs until it named them again.
  so.punch_delay_ms = 0;
  so.fault_hook = [&](std::string_view point) {
    // After every chunk was looked up, before the commit.
    if (point == "pack_synced" && in_job != nullptr && !removed) {
      in_job->unlink(root_inode, "a");
      removed = true;
      // The puncher tries at once, and finds the packs held by this job.
      for (int i = 0; i < 500 && in_job->punched().busy == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
  };
  fixture f(so);
  uint64_t const a = f.stage("a", f.data);
  ASSERT_TRUE(compress_staged_file(*f.s, *f.chooser, f.request(a, "a")).ok);
  store_stats const before = f.s->stats();
  in_job = f.s.get();
  uint64_t const b = f.stage("b", f.data);
  compress_outcome const ob =
      compress_staged_file(*f.s, *f.chooser, f.request(b, "b"));
  ASSERT_TRUE(ob.ok) << ob.error;
  ASSERT_TRUE(removed);
  EXPECT_GT(f.s->punched().busy, 0u);
  EXPECT_FALSE(f.s->lookup(root_inode, "a"));
  EXPECT_TRUE(f.read_all(b) == f.data);
  store_stats const after = f.s->stats();
  EXPECT_EQ(after.payloads, before.payloads);  // none stored twice
  EXPECT_EQ(after.pack_bytes, before.pack_bytes);
  EXPECT_EQ(after.live_bytes, before.live_bytes);
  fsck_report const rep = f.s->fsck({});
  EXPECT_TRUE(rep.clean()) << (rep.problems.empty() ? "" : rep.problems[0]);
  // Closing the store punches what is still queued: nothing b names.
  f.s.reset();
  f.s = std::make_unique<store>(f.path(), so);
  EXPECT_TRUE(f.read_all(b) == f.data);
  fsck_report const again = f.s->fsck({});
  EXPECT_TRUE(again.clean())
      << (again.problems.empty() ? "" : again.problems[0]);
}

TEST(compress_graph, cancelled_leaves_the_file_staged) {
  fixture f;
  uint64_t const ino = f.stage("f", f.data);
  std::atomic<int> asked{0};
  compress_request r = f.request(ino, "f");
  r.cancelled = [&] { return ++asked > 20; };  // part way through the chunks
  compress_outcome const out = compress_staged_file(*f.s, *f.chooser, r);
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.code, store_errc::cancelled);
  EXPECT_EQ(f.s->stat(ino).state, file_state::staged);
  EXPECT_TRUE(cli_test::read_file(f.s->staging_path(ino)) == f.data);
  store_stats const st = f.s->stats();
  EXPECT_EQ(st.packs, 0u);
  EXPECT_EQ(st.payloads, 0u);
  // Nothing was left behind in packs/ either: the fresh pack went.
  EXPECT_TRUE(std::filesystem::is_empty(f.dir / "s" / "packs"));
  // And a later run succeeds.
  ASSERT_TRUE(compress_staged_file(*f.s, *f.chooser, f.request(ino, "f")).ok);
  EXPECT_TRUE(f.read_all(ino) == f.data);
}

// A staged copy cut short under the job, behind the mount's back (the
// mount itself waits for a job to stop before a write reaches its file):
// the chunks' reads come up short, the job fails and the file stays staged,
// as it now is, with nothing committed. (Reads through the copy's mapping,
// the parse's and those of regions over memory_limit / 16: next test.)
TEST(compress_graph, copy_shrunk_under_the_job_fails_it_and_stays_staged) {
  fixture f;
  uint64_t const ino = f.stage("f", f.data);
  std::string const staged = f.s->staging_path(ino);
  compress_request r = f.request(ino, "f");
  std::atomic<bool> cut{false};
  r.cancelled = [&] {
    if (!cut.exchange(true)) {
      EXPECT_EQ(
          ::truncate(staged.c_str(), static_cast<off_t>(f.data.size() / 2)), 0);
    }
    return false;
  };
  compress_outcome const out = compress_staged_file(*f.s, *f.chooser, r);
  ASSERT_TRUE(cut.load());
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.code, store_errc::io);
  EXPECT_NE(out.error.find("staged copy shrank"), std::string::npos)
      << out.error;
  EXPECT_EQ(f.s->stat(ino).state, file_state::staged);
  EXPECT_EQ(f.s->stats().payloads, 0u);
  EXPECT_TRUE(f.s->fsck({}).clean());
}

// The same where the regions are read through the copy's mapping (every
// region is over memory_limit / 16): the touches past the new end raise
// SIGBUS, which must not end the process. The job reads zeros there, then
// fails and leaves the file staged.
TEST(compress_graph, shrunk_copy_read_through_mapping_fails_only_the_job) {
  fixture f;
  uint64_t const ino = f.stage("f", f.data);
  std::string const staged = f.s->staging_path(ino);
  compress_request r = f.request(ino, "f");
  r.memory_limit = 16;
  std::atomic<bool> cut{false};
  r.cancelled = [&] {
    if (!cut.exchange(true)) {
      EXPECT_EQ(::truncate(staged.c_str(), 4096), 0);
    }
    return false;
  };
  compress_outcome const out = compress_staged_file(*f.s, *f.chooser, r);
  ASSERT_TRUE(cut.load());
  EXPECT_FALSE(out.ok);
  EXPECT_EQ(out.code, store_errc::io);
  EXPECT_NE(out.error.find("could not be read through its mapping"),
            std::string::npos)
      << out.error;
  EXPECT_EQ(f.s->stat(ino).state, file_state::staged);
  EXPECT_EQ(f.s->stats().payloads, 0u);
  EXPECT_TRUE(f.s->fsck({}).clean());
  // The file, as it now is, still compresses.
  r.cancelled = nullptr;
  r.memory_limit = default_pipeline_memory;
  store::attr_update u;
  u.size = 4096;
  f.s->set_attr(ino, u);
  ASSERT_TRUE(compress_staged_file(*f.s, *f.chooser, r).ok);
  EXPECT_EQ(f.read_all(ino), f.data.substr(0, 4096));
}

TEST(compress_graph, unlinked_or_missing_copy_is_an_outcome_not_a_throw) {
  fixture f;
  uint64_t const gone = f.stage("gone", f.data);
  f.s->unlink(root_inode, "gone");
  compress_outcome const o1 =
      compress_staged_file(*f.s, *f.chooser, f.request(gone, "gone"));
  EXPECT_FALSE(o1.ok);
  EXPECT_EQ(o1.code, store_errc::not_found);

  uint64_t const lost = f.stage("lost", f.data);
  std::filesystem::remove(f.s->staging_path(lost));
  compress_outcome const o2 =
      compress_staged_file(*f.s, *f.chooser, f.request(lost, "lost"));
  EXPECT_FALSE(o2.ok);
  EXPECT_NE(o2.error.find("staged copy"), std::string::npos) << o2.error;
  EXPECT_EQ(f.s->stat(lost).state, file_state::staged);
  // Nothing is changed, and the loss is fsck's to report: the file's bytes
  // were all in that copy.
  fsck_report const rep = f.s->fsck({});
  ASSERT_EQ(rep.problems.size(), 1u);
  EXPECT_NE(rep.problems[0].find("staged copy"), std::string::npos)
      << rep.problems[0];
}

// A record damaged in the pack right after it was written (a disk that
// returns other bytes than it took) fails the verify stage; the job runs
// again and commits only records that read back intact.
TEST(compress_graph, record_damaged_after_the_write_is_caught_by_verify) {
  std::atomic<int> flips{0};
  store_options so;
  std::string packs_dir;
  so.fault_hook = [&](std::string_view p) {
    if (p != "pack_write" || flips > 0) return;
    // The record just appended ends the newest pack: flip its last byte.
    std::vector<std::filesystem::path> v;
    for (auto const& e : std::filesystem::directory_iterator(packs_dir)) {
      v.push_back(e.path());
    }
    std::sort(v.begin(), v.end());
    std::fstream f(v.back(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x10));
    ++flips;
  };
  fixture f(so);
  packs_dir = (f.dir / "s" / "packs").string();
  uint64_t const ino = f.stage("f", f.data);
  compress_outcome const out =
      compress_staged_file(*f.s, *f.chooser, f.request(ino, "f"));
  EXPECT_EQ(flips.load(), 1);
  ASSERT_TRUE(out.ok) << out.error;
  EXPECT_TRUE(f.read_all(ino) == f.data);
  fsck_report const rep = f.s->fsck({});
  EXPECT_TRUE(rep.clean()) << (rep.problems.empty() ? "" : rep.problems[0]);
}

TEST(compress_graph, failed_commit_keeps_appended_bytes_for_recovery) {
  std::atomic<bool> fail{true};
  store_options so;
  so.fault_hook = [&](std::string_view p) {
    if (p == "commit" && fail) throw store_error(store_errc::io, "injected");
  };
  fixture f(so);
  uint64_t const ino = f.stage("f", f.data);
  compress_outcome const out =
      compress_staged_file(*f.s, *f.chooser, f.request(ino, "f"));
  EXPECT_FALSE(out.ok);
  EXPECT_NE(out.error.find("injected"), std::string::npos);
  EXPECT_EQ(f.s->stat(ino).state, file_state::staged);
  // The commit may have reached the disk: the appended pack stays for the
  // next open to reconcile with the index (here: nothing committed).
  EXPECT_FALSE(std::filesystem::is_empty(f.dir / "s" / "packs"));
  fail = false;
  f.s.reset();
  f.s = std::make_unique<store>(f.path(), store_options{});
  EXPECT_EQ(f.s->report().removed_packs.size(), 1u);
  ASSERT_TRUE(compress_staged_file(*f.s, *f.chooser, f.request(ino, "f")).ok);
  EXPECT_TRUE(f.read_all(ino) == f.data);
  EXPECT_TRUE(f.s->fsck({}).clean());
}

// A pack whose index record ends before payloads it holds (damage, as a
// disk fault would leave it): the next job appends to a new pack, not over
// those payloads at the recorded end.
TEST(compress_graph, a_damaged_newest_pack_is_not_appended_to) {
  fixture f;
  uint64_t const first = f.compressed_then_damaged(
      "a", "packs", [](std::vector<index_edit::record>& records) {
        ASSERT_EQ(records.size(), 1u);
        codec::store_le<uint64_t>(records[0].second.data(), 16);  // End
      });
  store_options so;
  so.chunk_size = 64 << 10;
  f.s = std::make_unique<store>(f.path(), so);
  EXPECT_EQ(f.s->report().damaged_packs.size(), 1u);
  std::string const other = cli_test::make_safetensors(
      {{"x", "BF16", {100000}, cli_test::bf16_weights(100000, 9)}});
  uint64_t const second = f.stage("b", other);
  ASSERT_TRUE(
      compress_staged_file(*f.s, *f.chooser, f.request(second, "b")).ok);
  EXPECT_TRUE(f.read_all(first) == f.data);
  EXPECT_TRUE(f.read_all(second) == other);
  EXPECT_EQ(f.s->stats().packs, 2u);
}

// A payload record claiming a length past the limit (damage): a read says
// the store is damaged, without first allocating a buffer that long.
TEST(compress_graph, a_payload_length_past_the_limit_is_damage) {
  fixture f;
  uint64_t const ino = f.compressed_then_damaged(
      "f", "payloads", [](std::vector<index_edit::record>& records) {
        ASSERT_FALSE(records.empty());
        for (auto& [key, value] : records) {
          codec::store_le<uint64_t>(value.data() + 16, uint64_t{1} << 62);
        }
      });
  f.s = std::make_unique<store>(f.path(), store_options{});
  std::string out(f.data.size(), '\0');
  try {
    f.s->read(ino, 0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
    ADD_FAILURE() << "read a damaged payload record";
  } catch (store_error const& e) {
    EXPECT_EQ(e.code(), store_errc::corrupt) << e.what();
    EXPECT_NE(std::string(e.what()).find("larger than the limit"),
              std::string::npos)
        << e.what();
  }
}

TEST(compress_graph, stats_open_read_only_while_a_job_appends) {
  fixture f;
  uint64_t const ino = f.stage("f", f.data);
  // Another "mount" is mid-job: it holds both store locks.
  int const wfd = ::open((f.dir / "s/index/writer.lock").c_str(), O_RDWR);
  int const afd = ::open((f.dir / "s/index/append.lock").c_str(), O_RDWR);
  ASSERT_GE(wfd, 0);
  ASSERT_GE(afd, 0);
  ASSERT_EQ(::flock(wfd, LOCK_EX), 0);
  ASSERT_EQ(::flock(afd, LOCK_EX), 0);
  // `brevis stats` opens the index read-only: it neither waits for the
  // locks nor recovers (which would cut the job's pack tail).
  cli_test::run_result const r = cli_test::brevis({"stats", f.path()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("staged:         1 files"), std::string::npos) << r.out;
  ::close(wfd);
  ::close(afd);

  pipeline_status st;
  st.queued = 3;
  st.running = ino;
  st.running_name = "f";
  f.s->set_pipeline_status(st);
  std::optional<pipeline_status> const back = f.s->get_pipeline_status();
  ASSERT_TRUE(back);
  EXPECT_EQ(back->queued, 3u);
  EXPECT_EQ(back->running, ino);
  EXPECT_EQ(back->running_name, "f");
}

TEST(compress_graph, job_ring_keeps_the_last_ones) {
  fixture f;
  std::string const small = cli_test::random_bytes(1000, 1);
  for (uint64_t i = 0; i < job_ring_size + 3; ++i) {
    std::string const name = std::string("f").append(std::to_string(i));
    uint64_t const ino = f.stage(name, small);
    ASSERT_TRUE(
        compress_staged_file(*f.s, *f.chooser, f.request(ino, name)).ok);
  }
  std::vector<job_record> const jobs = f.s->recent_jobs();
  ASSERT_EQ(jobs.size(), job_ring_size);
  EXPECT_EQ(jobs.front().name, "f3");
  EXPECT_EQ(jobs.back().name,
            std::string("f").append(std::to_string(job_ring_size + 2)));
}

TEST(event_log, file_target_gets_whole_lines) {
  temp_dir dir;
  std::string const path = (dir / "log").string();
  open_event_log(path);
  log_event(log_level::info, "compressed 'a': 10 -> 5 bytes");
  log_event(log_level::error, "inode 7: no space");
  open_event_log("stderr");
  std::string const text = cli_test::read_file(path);
  EXPECT_NE(text.find("brevis mount: compressed 'a': 10 -> 5 bytes\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("brevis mount: error: inode 7: no space\n"),
            std::string::npos);
  EXPECT_THROW(open_event_log((dir / "no/such/dir/log").string()),
               std::system_error);
}

}  // namespace
}  // namespace brevis::fs

namespace brevis::fs {
namespace {

// The mount's job end to end without FUSE: a file written through mount_fs
// is compressed in the background, logged in one line, recorded for stats.
TEST(mount_pipeline, written_file_is_compressed_logged_and_recorded) {
  fixture f;
  std::string const log = (f.dir / "mount.log").string();
  open_event_log(log);
  mount_fs::options o;
  o.quiet_ms = 0;
  o.pipeline_memory = 4 << 20;
  {
    mount_fs m(*f.s, *f.chooser, o);
    m.start();
    struct stat const st =
        m.create(root_inode, "w.safetensors", 0644, O_WRONLY, {0, 0, {}});
    uint64_t const ino = st.st_ino;
    ASSERT_EQ(m.write(ino, 0, reinterpret_cast<uint8_t const*>(f.data.data()),
                      f.data.size()),
              f.data.size());
    m.release(ino, true);
    for (int i = 0;
         i < 600 && m.getxattr(ino, "user.brevis.state") != "compressed"; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_EQ(m.getxattr(ino, "user.brevis.state"), "compressed");
    std::string back(f.data.size(), '\0');
    ASSERT_EQ(
        m.read(ino, 0, back.size(), reinterpret_cast<uint8_t*>(back.data())),
        back.size());
    EXPECT_TRUE(back == f.data);
    EXPECT_FALSE(std::filesystem::exists(f.s->staging_path(ino)));
    m.shutdown();
  }
  open_event_log("stderr");
  std::string const text = cli_test::read_file(log);
  EXPECT_NE(text.find("compressed 'w.safetensors' (inode "), std::string::npos)
      << text;
  EXPECT_NE(text.find(std::to_string(f.data.size()) + " -> "),
            std::string::npos);
  EXPECT_NE(text.find(" MB/s (programs "), std::string::npos) << text;
  EXPECT_NE(text.find(" s, chunks "), std::string::npos) << text;
  ASSERT_EQ(f.s->recent_jobs().size(), 1u);
  std::optional<pipeline_status> const q = f.s->get_pipeline_status();
  ASSERT_TRUE(q);
  EXPECT_EQ(q->running, 0u);  // idle after the job
  EXPECT_EQ(q->queued, 0u);
  EXPECT_TRUE(f.s->fsck({}).clean());
}

}  // namespace
}  // namespace brevis::fs
