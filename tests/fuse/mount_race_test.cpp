// mount_fs in process with compression on: what happens to a file while it
// is queued or being compressed. A gate in the program chooser holds a
// compression in the middle of its work (after it read the staged copy,
// outside the store's writer lock) while the test changes the file; the
// file must end with the user's last bytes, times and names, and the store
// must stay consistent. A watchdog turns a deadlock into a failure.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "codec/choose/chooser.h"
#include "codec/search/search_chooser.h"
#include "fs/fuse/filesystem.h"
#include "tests/cli/helpers.h"

namespace brevis::fs {
namespace {

using namespace std::chrono_literals;

/// A point where a thread can be held: after arm(name), the first thread
/// that passes the point of that name waits there for release().
class hold_point {
 public:
  void pass(std::string_view name = {}) {
    std::unique_lock lk(mu_);
    if (!armed_ || name != name_) return;
    armed_ = false;
    arrived_ = true;
    cv_.notify_all();
    cv_.wait(lk, [&] { return released_; });
  }
  void arm(std::string name = {}) {
    std::lock_guard lk(mu_);
    name_ = std::move(name);
    armed_ = true;
    arrived_ = released_ = false;
  }
  /// Waits until a thread is held.
  bool wait_arrived() {
    std::unique_lock lk(mu_);
    return cv_.wait_for(lk, 30s, [&] { return arrived_; });
  }
  void release() {
    std::lock_guard lk(mu_);
    released_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string name_;
  bool armed_ = false, arrived_ = false, released_ = false;
};

/// Wraps a chooser: every choose() passes `gate` first, so that an armed
/// gate holds a compression in the middle of its work.
class gate_chooser final : public codec::program_chooser {
 public:
  gate_chooser(codec::program_chooser const& inner, hold_point& gate)
      : inner_(inner), gate_(gate) {}

  codec::node choose(codec::region const& r,
                     codec::byte_view data) const override {
    gate_.pass();
    return inner_.choose(r, data);
  }

 private:
  codec::program_chooser const& inner_;
  hold_point& gate_;
};

/// Aborts the test binary when a test does not finish in time (a deadlock
/// would otherwise hang ctest until its own timeout).
class watchdog {
 public:
  explicit watchdog(std::chrono::seconds limit)
      : t_([this, limit] {
          std::unique_lock lk(mu_);
          if (!cv_.wait_for(lk, limit, [&] { return done_; })) {
            std::fprintf(stderr, "watchdog: no progress in %llds: deadlock\n",
                         static_cast<long long>(limit.count()));
            std::abort();
          }
        }) {}
  ~watchdog() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    t_.join();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread t_;
};

struct fixture {
  cli_test::temp_dir dir;
  std::unique_ptr<codec::program_chooser> real = codec::make_store_chooser();
  hold_point gate;    // in the chooser: holds a compression
  hold_point points;  // at the store's named fault points
  gate_chooser chooser{*real, gate};
  std::unique_ptr<store> s;
  std::unique_ptr<mount_fs> m;

  explicit fixture(unsigned quiet_ms = 0) {
    store_options so;
    so.chunk_size = 64 << 10;
    so.fault_hook = [this](std::string_view p) { points.pass(p); };
    s = std::make_unique<store>((dir / "s").string(), so);
    mount_fs::options o;
    o.quiet_ms = quiet_ms;
    m = std::make_unique<mount_fs>(*s, chooser, o);
    m->start();
  }
  ~fixture() {
    m.reset();
    fsck_report const r = s->fsck({});
    for (auto const& p : r.problems) ADD_FAILURE() << "fsck: " << p;
  }

  uint64_t put(std::string const& name, std::string const& data) {
    uint64_t const ino = m->create(root_inode, name, 0644, O_WRONLY, {}).st_ino;
    write(ino, 0, data);
    m->release(ino, true);
    return ino;
  }
  void write(uint64_t ino, uint64_t off, std::string const& data) {
    ASSERT_EQ(m->write(ino, off, reinterpret_cast<uint8_t const*>(data.data()),
                       data.size()),
              data.size());
  }
  std::string read(uint64_t ino) {
    bool const w = m->open(ino, O_RDONLY);
    std::string out(m->getattr(ino).st_size + 16, '\0');
    size_t const n =
        m->read(ino, 0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
    out.resize(n);
    m->release(ino, w);
    return out;
  }
  std::string state(uint64_t ino) {
    return m->getxattr(ino, "user.brevis.state");
  }
  /// Waits until nothing is queued or running.
  bool settle() {
    auto const end = std::chrono::steady_clock::now() + 60s;
    while (m->pending() > 0) {
      if (std::chrono::steady_clock::now() > end) return false;
      std::this_thread::sleep_for(5ms);
    }
    return true;
  }
  size_t staged_copies() {
    size_t n = 0;
    for (auto const& e : cli_test::fs::directory_iterator(dir / "s/staging")) {
      (void)e;
      ++n;
    }
    return n;
  }
};

std::string weights(uint64_t seed, size_t count = 150000) {
  return cli_test::make_safetensors(
      {{"w", "BF16", {count}, cli_test::bf16_weights(count, seed)}});
}

/// Runs f on another thread; gives it up to `limit` to finish (it may be
/// meant to block until the gate opens).
template <typename F>
std::future<void> start(F f) {
  return std::async(std::launch::async, std::move(f));
}

TEST(mount_race, mtime_set_during_compression_wins) {
  watchdog dog(60s);
  fixture f;
  f.gate.arm();
  std::string const data = weights(1);
  uint64_t const ino = f.put("a.safetensors", data);
  ASSERT_TRUE(f.gate.wait_arrived());  // read the copy, choosing programs
  int64_t const when = 1234567890123456789;
  setattr_request r;
  r.mtime_ns = when;
  auto touch = start([&] { f.m->setattr(ino, r); });
  // The touch waits for the compression it cancels; give it the chance to
  // get there before the compression goes on.
  touch.wait_for(300ms);
  f.gate.release();
  touch.get();
  ASSERT_TRUE(f.settle());
  EXPECT_EQ(f.state(ino), "compressed");  // queued again after the cancel
  struct stat const st = f.m->getattr(ino);
  EXPECT_EQ(st.st_mtim.tv_sec, when / 1000000000);
  EXPECT_EQ(st.st_mtim.tv_nsec, when % 1000000000);
  EXPECT_EQ(f.s->stat(ino).mtime_ns, when);
  EXPECT_TRUE(f.read(ino) == data);
}

TEST(mount_race, reads_go_on_while_a_truncate_waits_for_a_compression) {
  watchdog dog(60s);
  fixture f;
  f.gate.arm();
  std::string const data = weights(9);
  uint64_t const ino = f.put("a.safetensors", data);
  ASSERT_TRUE(f.gate.wait_arrived());
  bool const w = f.m->open(ino, O_RDONLY);
  setattr_request r;
  r.size = 10;
  auto truncate = start([&] { f.m->setattr(ino, r); });
  // The truncate waits for the compression it cancels; a read meanwhile is
  // answered (it keeps reads off only once it can cut).
  EXPECT_EQ(truncate.wait_for(300ms), std::future_status::timeout);
  auto read = start([&] {
    std::string got(100, '\0');
    ASSERT_EQ(
        f.m->read(ino, 0, got.size(), reinterpret_cast<uint8_t*>(got.data())),
        got.size());
    EXPECT_TRUE(got == data.substr(0, got.size()));
  });
  EXPECT_EQ(read.wait_for(10s), std::future_status::ready)
      << "a read waited for a truncate waiting for a compression";
  f.gate.release();
  truncate.get();
  read.get();
  f.m->release(ino, w);
  ASSERT_TRUE(f.settle());
  EXPECT_TRUE(f.read(ino) == data.substr(0, 10));
}

TEST(mount_race, mode_and_owner_set_during_compression_stay) {
  watchdog dog(60s);
  fixture f;
  f.gate.arm();
  uint64_t const ino = f.put("a.safetensors", weights(2));
  ASSERT_TRUE(f.gate.wait_arrived());
  setattr_request r;
  r.mode = 0600;
  r.uid = 77;
  r.gid = 88;
  f.m->setattr(ino, r);  // does not wait: the commit keeps these fields
  f.gate.release();
  ASSERT_TRUE(f.settle());
  EXPECT_EQ(f.state(ino), "compressed");
  struct stat const st = f.m->getattr(ino);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(st.st_uid, 77u);
  EXPECT_EQ(st.st_gid, 88u);
}

TEST(mount_race, rewrite_during_compression_keeps_new_bytes) {
  watchdog dog(60s);
  fixture f;
  f.gate.arm();
  std::string const data = weights(3);
  uint64_t const ino = f.put("a.safetensors", data);
  ASSERT_TRUE(f.gate.wait_arrived());
  std::string const fresh = weights(4, 120000);
  auto rewrite = start([&] {
    ASSERT_TRUE(f.m->open(ino, O_WRONLY | O_TRUNC));
    f.write(ino, 0, fresh);
    f.m->release(ino, true);
  });
  rewrite.wait_for(300ms);
  f.gate.release();
  rewrite.get();
  EXPECT_TRUE(f.read(ino) == fresh);
  ASSERT_TRUE(f.settle());
  EXPECT_EQ(f.state(ino), "compressed");
  EXPECT_TRUE(f.read(ino) == fresh);
  EXPECT_EQ(f.s->stat(ino).size, fresh.size());
  EXPECT_EQ(f.staged_copies(), 0u);
}

TEST(mount_race, unlink_during_compression_is_honoured) {
  watchdog dog(60s);
  fixture f;
  f.gate.arm();
  uint64_t const ino = f.put("a.safetensors", weights(5));
  ASSERT_TRUE(f.gate.wait_arrived());
  f.m->unlink(root_inode, "a.safetensors");
  f.gate.release();
  ASSERT_TRUE(f.settle());
  EXPECT_FALSE(f.s->lookup(root_inode, "a.safetensors"));
  EXPECT_THROW(f.s->stat(ino), store_error);
  EXPECT_EQ(f.staged_copies(), 0u);  // no copy left, none recreated
  EXPECT_THROW(f.m->open(ino, O_RDONLY), store_error);
  EXPECT_EQ(f.staged_copies(), 0u);
}

TEST(mount_race, rename_during_compression_is_honoured) {
  watchdog dog(60s);
  fixture f;
  f.gate.arm();
  std::string const data = weights(6);
  std::string const other = weights(7, 1000);
  uint64_t const ino = f.put("a.safetensors", data);
  ASSERT_TRUE(f.gate.wait_arrived());
  // Over an existing file, then into a new directory.
  uint64_t const old = f.put("b.safetensors", other);
  f.m->rename(root_inode, "a.safetensors", root_inode, "b.safetensors", 0);
  uint64_t const d = f.m->mkdir(root_inode, "d", 0755, {}).st_ino;
  f.m->rename(root_inode, "b.safetensors", d, "c.safetensors", 0);
  f.gate.release();
  ASSERT_TRUE(f.settle());
  EXPECT_EQ(f.s->lookup(d, "c.safetensors"), ino);
  EXPECT_FALSE(f.s->lookup(root_inode, "a.safetensors"));
  EXPECT_FALSE(f.s->lookup(root_inode, "b.safetensors"));
  EXPECT_THROW(f.s->stat(old), store_error);
  EXPECT_EQ(f.state(ino), "compressed");
  EXPECT_TRUE(f.read(ino) == data);
  EXPECT_EQ(f.staged_copies(), 0u);
}

TEST(mount_race, unlink_of_open_file_during_compression) {
  watchdog dog(60s);
  fixture f;
  f.gate.arm();
  std::string const data = weights(8);
  uint64_t const ino = f.put("a.safetensors", data);
  ASSERT_TRUE(f.gate.wait_arrived());
  ASSERT_FALSE(f.m->open(ino, O_RDONLY));
  f.m->unlink(root_inode, "a.safetensors");  // kept: it is open
  f.gate.release();
  ASSERT_TRUE(f.settle());
  std::string got(data.size(), '\0');
  EXPECT_EQ(f.m->read(ino, 0, got.size(), reinterpret_cast<uint8_t*>(&got[0])),
            data.size());
  EXPECT_TRUE(got == data);
  f.m->release(ino, false);  // the last close drops it
  EXPECT_THROW(f.s->stat(ino), store_error);
  EXPECT_EQ(f.staged_copies(), 0u);
}

TEST(mount_race, reopen_for_writing_while_queued_leaves_the_queue) {
  fixture f(600000);  // quiet for ten minutes: it stays queued
  std::string const data = weights(9);
  uint64_t const ino = f.put("a.safetensors", data);
  EXPECT_EQ(f.state(ino), "queued");
  ASSERT_TRUE(f.m->open(ino, O_RDWR));
  EXPECT_EQ(f.m->pending(), 0u);
  EXPECT_EQ(f.state(ino), "staged");
  f.write(ino, 10, "xyz");
  f.m->release(ino, true);
  EXPECT_EQ(f.state(ino), "queued");
  std::string want = data;
  want.replace(10, 3, "xyz");
  EXPECT_TRUE(f.read(ino) == want);
}

TEST(mount_race, write_into_compressed_file_restages_it) {
  fixture f(0);
  std::string const data = weights(10);
  uint64_t const ino = f.put("a.safetensors", data);
  ASSERT_TRUE(f.settle());
  ASSERT_EQ(f.state(ino), "compressed");
  ASSERT_EQ(f.staged_copies(), 0u);
  ASSERT_TRUE(f.m->open(ino, O_WRONLY));
  EXPECT_EQ(f.state(ino), "staged");
  EXPECT_EQ(f.staged_copies(), 1u);
  f.write(ino, data.size(), "tail");
  f.m->release(ino, true);
  ASSERT_TRUE(f.settle());
  EXPECT_EQ(f.state(ino), "compressed");
  EXPECT_TRUE(f.read(ino) == data + "tail");
}

TEST(mount_race, a_lost_staged_copy_is_an_error_not_an_empty_file) {
  fixture f(600000);
  uint64_t const ino = f.put("a.safetensors", weights(11));
  ASSERT_EQ(f.s->stat(ino).size, weights(11).size());
  f.m->shutdown();
  cli_test::fs::remove(f.s->staging_path(ino));
  // Opening must not make an empty copy that would then be compressed.
  EXPECT_THROW(f.m->open(ino, O_RDONLY), store_error);
  EXPECT_FALSE(cli_test::fs::exists(f.s->staging_path(ino)));
  f.m->unlink(root_inode, "a.safetensors");
}

TEST(mount_race, open_and_unlink_race_leaves_no_ghost_copy) {
  watchdog dog(120s);
  fixture f(0);
  std::string const data = weights(12, 4000);
  for (int i = 0; i < 100; ++i) {
    std::string const name = std::string("f") + std::to_string(i);
    uint64_t const ino = f.put(name, data);
    auto opener = start([&] {
      try {
        bool const w = f.m->open(ino, i % 2 ? O_RDONLY : O_RDWR);
        f.m->release(ino, w);
      } catch (store_error const&) {
        // removed first: ENOENT is a fine answer
      } catch (std::system_error const&) {
      }
    });
    f.m->unlink(root_inode, name);
    opener.get();
  }
  ASSERT_TRUE(f.settle());
  EXPECT_EQ(f.staged_copies(), 0u);
  EXPECT_TRUE(f.s->list(root_inode).empty());
}

// The cycle of the old lock order: a writer restaging a compressed file
// (node lock, then the store), an unlink asking whether inodes are open
// (store lock, then the node table) and a lookup naming the node (node
// table, then node lock). All three at once, many times, must not hang.
TEST(mount_race, restage_unlink_lookup_do_not_deadlock) {
  watchdog dog(40s);
  fixture f(0);
  std::string const data = weights(13, 40000);
  uint64_t const ino = f.put("hot.safetensors", data);
  ASSERT_TRUE(f.settle());
  std::atomic<bool> stop{false};
  std::atomic<int> restaged{0}, looked{0};
  auto end = std::chrono::steady_clock::now() + 3s;
  std::thread writer([&] {
    for (; !stop; ++restaged) {
      ASSERT_TRUE(f.m->open(ino, O_WRONLY));
      f.m->release(ino, true);
    }
  });
  std::thread looker([&] {
    for (; !stop; ++looked) f.m->lookup(root_inode, "hot.safetensors");
  });
  // A while, and enough of each however slow the machine is.
  int rounds = 0;
  while (std::chrono::steady_clock::now() < end || rounds < 20 ||
         restaged < 5 || looked < 5) {
    std::string const name = std::string("tmp") + std::to_string(rounds++ % 8);
    uint64_t const t = f.put(name, "x");
    bool const w = f.m->open(t, O_RDONLY);
    f.m->unlink(root_inode, name);  // open: the store asks keep()
    f.m->release(t, w);
  }
  stop = true;
  writer.join();
  looker.join();
  ASSERT_TRUE(f.settle());
  EXPECT_TRUE(f.read(ino) == data);
  EXPECT_EQ(f.staged_copies(), 0u);
}

// POSIX: an open file that loses its last name stays readable (and fstat
// works) through its handles until the last close, which drops the inode
// and its staged copy. Once per state the file can be in.

/// Reads and fstat through a handle of `ino`, which has no name left.
void expect_orphan_reads(fixture& f, uint64_t ino, std::string const& data) {
  std::string got(data.size() + 100, '\0');
  size_t n = 0;
  ASSERT_NO_THROW(n = f.m->read(ino, 0, got.size(),
                                reinterpret_cast<uint8_t*>(got.data())));
  got.resize(n);
  EXPECT_TRUE(got == data) << got.size() << " bytes instead of " << data.size();
  struct stat st {};
  ASSERT_NO_THROW(st = f.m->getattr(ino));
  EXPECT_EQ(static_cast<size_t>(st.st_size), data.size());
  EXPECT_EQ(st.st_nlink, 0u);
}

/// After the last close of an orphan: nothing of it is left.
void expect_dropped(fixture& f, uint64_t ino) {
  EXPECT_THROW(f.s->stat(ino), store_error);
  EXPECT_EQ(f.staged_copies(), 0u);
  EXPECT_EQ(f.m->pending(), 0u);
  EXPECT_THROW(f.m->open(ino, O_RDONLY), store_error);
  EXPECT_EQ(f.staged_copies(), 0u);
}

TEST(mount_race, unlinked_open_file_reads_while_staged) {
  watchdog dog(60s);
  fixture f(600000);
  std::string const data = weights(20);
  uint64_t const ino =
      f.m->create(root_inode, "a.safetensors", 0644, O_WRONLY, {}).st_ino;
  f.write(ino, 0, data);
  EXPECT_EQ(f.state(ino), "staged");  // its writer still has it open
  bool const w = f.m->open(ino, O_RDONLY);
  f.m->unlink(root_inode, "a.safetensors");
  expect_orphan_reads(f, ino, data);
  f.m->release(ino, true);  // the writer goes; an orphan is not queued
  EXPECT_EQ(f.m->pending(), 0u);
  expect_orphan_reads(f, ino, data);
  f.m->release(ino, w);
  expect_dropped(f, ino);
}

TEST(mount_race, unlinked_open_file_reads_while_queued) {
  watchdog dog(60s);
  fixture f(600000);
  std::string const data = weights(21);
  uint64_t const ino = f.put("a.safetensors", data);
  EXPECT_EQ(f.state(ino), "queued");
  bool const w = f.m->open(ino, O_RDONLY);
  f.m->unlink(root_inode, "a.safetensors");
  EXPECT_EQ(f.m->pending(), 0u);  // off the queue
  expect_orphan_reads(f, ino, data);
  f.m->release(ino, w);
  expect_dropped(f, ino);
}

TEST(mount_race, unlinked_open_file_reads_while_compressing) {
  watchdog dog(60s);
  fixture f(0);
  f.gate.arm();
  std::string const data = weights(22);
  uint64_t const ino = f.put("a.safetensors", data);
  ASSERT_TRUE(f.gate.wait_arrived());
  bool const w = f.m->open(ino, O_RDONLY);
  f.m->unlink(root_inode, "a.safetensors");
  expect_orphan_reads(f, ino, data);
  f.gate.release();
  ASSERT_TRUE(f.settle());
  expect_orphan_reads(f, ino, data);
  f.m->release(ino, w);
  expect_dropped(f, ino);
}

TEST(mount_race, unlinked_open_file_reads_while_compressed) {
  watchdog dog(60s);
  fixture f(0);
  std::string const data = weights(23);
  uint64_t const ino = f.put("a.safetensors", data);
  ASSERT_TRUE(f.settle());
  ASSERT_EQ(f.state(ino), "compressed");
  bool const w = f.m->open(ino, O_RDONLY);
  // Replaced by a rename this time (the same keep as an unlink).
  uint64_t const other = f.put("b.safetensors", "x");
  f.m->rename(root_inode, "b.safetensors", root_inode, "a.safetensors", 0);
  expect_orphan_reads(f, ino, data);
  f.m->release(ino, w);
  EXPECT_EQ(f.s->lookup(root_inode, "a.safetensors"), other);
  ASSERT_TRUE(f.settle());
  expect_dropped(f, ino);
}

/// An open that reaches the mount while an unlink is dropping the inode
/// (the store asked "is it open?" before the open counted itself, and has
/// not committed yet): the open must fail with ENOENT, as if the unlink had
/// come first -- not succeed and then fail its reads or fstat.
void open_racing_a_drop(bool compressed, int flags) {
  watchdog dog(60s);
  fixture f(compressed ? 0 : 600000);
  std::string const data = weights(24, 20000);
  uint64_t const ino = f.put("a.safetensors", data);
  if (compressed) {
    ASSERT_TRUE(f.settle());
    ASSERT_EQ(f.state(ino), "compressed");
  }
  f.points.arm("unlink_drop");
  auto unlinker = start([&] { f.m->unlink(root_inode, "a.safetensors"); });
  ASSERT_TRUE(f.points.wait_arrived());
  std::optional<bool> writer;  // what a successful open returned
  std::optional<store_errc> code;
  auto opener = start([&] {
    try {
      writer = f.m->open(ino, flags);
    } catch (store_error const& e) {
      code = e.code();
    }
  });
  // The open waits for the unlink to commit (or, wrongly, gets in before
  // it): give it the time to get there while the store is held.
  opener.wait_for(300ms);
  f.points.release();
  unlinker.get();
  opener.get();
  EXPECT_EQ(code, store_errc::not_found) << "the open succeeded";
  if (writer) {
    // What the kernel does next with the handle: read, fstat, close.
    std::string step = "read";
    try {
      std::string got(data.size(), '\0');
      f.m->read(ino, 0, got.size(), reinterpret_cast<uint8_t*>(got.data()));
      step = "fstat";
      f.m->getattr(ino);
    } catch (store_error const& e) {
      ADD_FAILURE() << "open succeeded, then " << step
                    << " failed: " << e.what();
    }
    f.m->release(ino, *writer);
    ASSERT_TRUE(f.settle());
  }
  expect_dropped(f, ino);
}

TEST(mount_race, open_racing_a_drop_of_a_staged_file_fails) {
  open_racing_a_drop(false, O_RDONLY);
}
TEST(mount_race, open_for_writing_racing_a_drop_of_a_staged_file_fails) {
  open_racing_a_drop(false, O_RDWR);
}
TEST(mount_race, open_racing_a_drop_of_a_compressed_file_fails) {
  open_racing_a_drop(true, O_RDONLY);
}
TEST(mount_race, open_for_writing_racing_a_drop_of_a_compressed_file_fails) {
  open_racing_a_drop(true, O_RDWR);
}

}  // namespace
}  // namespace brevis::fs
