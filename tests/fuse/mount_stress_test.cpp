// Concurrent readers and writers on a real mount with compression running
// underneath (a short quiet time): several threads write, patch, truncate,
// read, rename, delete and touch files at once for a bounded time. Each
// thread owns its names and keeps a model of their bytes and times, so
// every read is checked; a reader thread also reads the others' files
// (any bytes, but no error besides ENOENT). A watchdog turns a hang into a
// failure (with the daemon's stacks when gdb is there), then everything is
// checked again after the last compression and after a remount.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "tests/cli/helpers.h"
#include "tests/fuse/mount_harness.h"

namespace brevis::cli_test {
namespace {

using namespace std::chrono_literals;

struct file_model {
  std::string bytes;
  std::optional<int64_t> mtime_ns;  // set by the last touch
};

int64_t mtime_of(struct stat const& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
         st.st_mtim.tv_nsec;
}

/// One worker: its own names in two shared directories.
class worker {
 public:
  worker(fs::path root, int id, uint64_t seed)
      : root_(std::move(root)), id_(id), rng_(seed) {}

  /// Runs operations until `stop`; returns the first problem or "".
  std::string run(std::atomic<bool> const& stop) {
    while (!stop) {
      std::string const e = step();
      if (!e.empty()) return e;
      ++ops_;
    }
    return "";
  }

  /// Every file of the model reads back (bytes and touched times).
  std::string check_all() {
    for (auto const& [name, m] : model_) {
      std::string const e = check(name, m);
      if (!e.empty()) return e;
    }
    for (int k = 0; k < names; ++k) {
      std::string const n = name(k);
      if (!model_.count(n) && fs::exists(root_ / n)) return n + ": resurrected";
    }
    return "";
  }
  size_t ops() const { return ops_.load(); }
  std::vector<std::string> paths() const {
    std::vector<std::string> out;
    for (auto const& [n, m] : model_) out.push_back(n);
    return out;
  }

 private:
  static constexpr int names = 6;

  std::string name(int k) const {
    return std::string("d") + std::to_string(k % 2) + "/t" +
           std::to_string(id_) + "_" + std::to_string(k);
  }
  fs::path path(std::string const& n) const { return root_ / n; }

  std::string content() {
    size_t const count = rng_() % 4 == 0 ? rng_() % 64 : rng_() % 200000;
    return make_safetensors(
        {{"w", "BF16", {count}, bf16_weights(count, rng_())}});
  }

  static std::string err(std::string const& what, std::string const& n) {
    return n + ": " + what + ": " + std::strerror(errno);
  }

  std::string check(std::string const& n, file_model const& m) {
    int fd = ::open(path(n).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err("open to read", n);
    std::string got(m.bytes.size() + 4096, '\0');
    size_t done = 0;
    for (;;) {
      ssize_t const r = ::pread(fd, &got[done], got.size() - done, done);
      if (r < 0) {
        ::close(fd);
        return err("read", n);
      }
      if (r == 0) break;
      done += static_cast<size_t>(r);
      if (done == got.size()) break;
    }
    struct stat st {};
    ::fstat(fd, &st);
    ::close(fd);
    got.resize(done);
    if (got != m.bytes) {
      size_t i = 0;
      while (i < got.size() && i < m.bytes.size() && got[i] == m.bytes[i]) ++i;
      return n + ": wrong bytes (" + std::to_string(got.size()) + " vs " +
             std::to_string(m.bytes.size()) + ", first difference at " +
             std::to_string(i) + ")";
    }
    if (m.mtime_ns && mtime_of(st) != *m.mtime_ns) {
      return n + ": mtime " + std::to_string(mtime_of(st)) + " instead of " +
             std::to_string(*m.mtime_ns);
    }
    return "";
  }

  std::string step() {
    std::string const n = name(static_cast<int>(rng_() % names));
    auto it = model_.find(n);
    bool const exists = it != model_.end();
    switch (rng_() % 8) {
      case 0:
      case 1: {  // write the whole file
        std::string const data = content();
        int fd = ::open(path(n).c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0) return err("create", n);
        for (size_t off = 0; off < data.size();) {
          size_t const len =
              std::min<size_t>(data.size() - off, 1 + rng_() % (128 << 10));
          ssize_t const w = ::pwrite(fd, data.data() + off, len, off);
          if (w <= 0) {
            ::close(fd);
            return err("write", n);
          }
          off += static_cast<size_t>(w);
        }
        if (::close(fd) != 0) return err("close", n);
        model_[n] = {data, std::nullopt};
        return "";
      }
      case 2: {  // patch bytes in place (and maybe past the end)
        if (!exists) return "";
        std::string& b = it->second.bytes;
        size_t const off = b.empty() ? 0 : rng_() % (b.size() + 1);
        std::string const patch = random_bytes(1 + rng_() % 5000, rng_());
        int fd = ::open(path(n).c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) return err("open to patch", n);
        ssize_t const w = ::pwrite(fd, patch.data(), patch.size(), off);
        if (w != static_cast<ssize_t>(patch.size())) {
          ::close(fd);
          return err("patch", n);
        }
        if (::close(fd) != 0) return err("close", n);
        if (b.size() < off + patch.size()) b.resize(off + patch.size());
        b.replace(off, patch.size(), patch);
        it->second.mtime_ns.reset();
        return "";
      }
      case 3: {  // read and compare
        if (!exists) {
          if (::access(path(n).c_str(), F_OK) == 0) return n + ": exists";
          return "";
        }
        return check(n, it->second);
      }
      case 4: {  // rename over another of ours
        if (!exists) return "";
        std::string const to = name(static_cast<int>(rng_() % names));
        if (to == n) return "";
        if (::rename(path(n).c_str(), path(to).c_str()) != 0) {
          return err("rename to " + to, n);
        }
        file_model m = std::move(it->second);
        model_.erase(it);
        model_[to] = std::move(m);
        return "";
      }
      case 5: {  // delete
        if (!exists) return "";
        if (::unlink(path(n).c_str()) != 0) return err("unlink", n);
        model_.erase(it);
        return "";
      }
      case 6: {  // truncate (shorter or longer)
        if (!exists) return "";
        std::string& b = it->second.bytes;
        size_t const size = rng_() % (b.size() + 10000);
        if (::truncate(path(n).c_str(), static_cast<off_t>(size)) != 0) {
          return err("truncate", n);
        }
        b.resize(size, '\0');
        it->second.mtime_ns.reset();
        return "";
      }
      default: {  // touch: the time must stick, even under compression
        if (!exists) return "";
        int64_t const t =
            static_cast<int64_t>(1500000000 + rng_() % 100000000) * 1000000000 +
            static_cast<int64_t>(rng_() % 1000000000);
        timespec const ts[2] = {{t / 1000000000, t % 1000000000},
                                {t / 1000000000, t % 1000000000}};
        if (::utimensat(AT_FDCWD, path(n).c_str(), ts, 0) != 0) {
          return err("utimens", n);
        }
        it->second.mtime_ns = t;
        struct stat st {};
        if (::stat(path(n).c_str(), &st) != 0) return err("stat", n);
        if (mtime_of(st) != t) return n + ": touch did not stick";
        return "";
      }
    }
  }

  fs::path root_;
  int id_;
  std::mt19937_64 rng_;
  std::map<std::string, file_model> model_;
  std::atomic<size_t> ops_{0};
};

/// Fails the test instead of hanging: after `limit`, dumps the daemon's
/// threads (gdb) into `report` and kills it, which fails every pending
/// request on the mount.
class mount_watchdog {
 public:
  mount_watchdog(mount_daemon& d, std::chrono::seconds limit)
      : t_([this, &d, limit] {
          std::unique_lock lk(mu_);
          if (cv_.wait_for(lk, limit, [&] { return done_; })) return;
          fired_ = true;
          if (fs::exists("/usr/bin/gdb")) {
            report_ =
                run_program({"/usr/bin/gdb", "-p", std::to_string(d.pid()),
                             "-batch", "-ex", "thread apply all bt"})
                    .out;
          }
          ::kill(d.pid(), SIGKILL);
        }) {}
  ~mount_watchdog() { finish(); }
  void finish() {
    {
      std::lock_guard lk(mu_);
      done_ = true;
    }
    cv_.notify_all();
    if (t_.joinable()) t_.join();
  }
  bool fired() const { return fired_; }
  std::string const& report() const { return report_; }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::atomic<bool> fired_{false};
  std::string report_;
  std::thread t_;
};

TEST(mount_stress, concurrent_writers_readers_renames_deletes) {
  if (!fuse_usable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  temp_dir dir;
  mount_daemon d(dir / "store", dir / "mnt", dir / "mount.log");
  ASSERT_EQ(d.start({"--quiet-ms", "5"}), "");
  fs::create_directories(d.mnt() / "d0");
  fs::create_directories(d.mnt() / "d1");

  constexpr int writers = 4;
  std::vector<std::unique_ptr<worker>> ws;
  for (int i = 0; i < writers; ++i) {
    ws.push_back(std::make_unique<worker>(d.mnt(), i, 1000 + i));
  }
  std::atomic<bool> stop{false};
  std::vector<std::string> errors(writers + 1);
  std::atomic<int> failed{0};
  {
    mount_watchdog dog(d, 90s);
    std::vector<std::thread> ts;
    for (int i = 0; i < writers; ++i) {
      ts.emplace_back([&, i] {
        errors[i] = ws[i]->run(stop);
        if (!errors[i].empty()) ++failed;
      });
    }
    // Reads whatever the others have: any bytes, but only ENOENT as error.
    std::atomic<size_t> foreign_reads{0};
    ts.emplace_back([&] {
      std::mt19937_64 rng(7);
      std::vector<char> buf(1 << 17);
      while (!stop) {
        fs::path const p = d.mnt() /
                           (std::string("d") + std::to_string(rng() % 2)) /
                           (std::string("t") + std::to_string(rng() % writers) +
                            "_" + std::to_string(rng() % 6));
        int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
          if (errno != ENOENT) {
            errors[writers] = p.string() + ": open: " + std::strerror(errno);
            ++failed;
            return;
          }
          continue;
        }
        for (off_t off = 0;;) {
          ssize_t const r = ::pread(fd, buf.data(), buf.size(), off);
          if (r < 0) {
            errors[writers] = p.string() + ": read: " + std::strerror(errno);
            ++failed;
            break;
          }
          if (r == 0) break;
          off += r;
        }
        ::close(fd);
        ++foreign_reads;
      }
    });
    // Eight seconds, and some work by everyone however slow the machine
    // is (the watchdog bounds this).
    std::this_thread::sleep_for(8s);
    auto busy = [&] {
      for (auto const& w : ws) {
        if (w->ops() < 20) return true;
      }
      return foreign_reads < 5;
    };
    while (busy() && failed == 0) {
      std::this_thread::sleep_for(50ms);
    }
    stop = true;
    for (auto& t : ts) t.join();
    dog.finish();
    ASSERT_FALSE(dog.fired()) << "deadlock; the daemon's threads:\n"
                              << dog.report();
    EXPECT_GT(foreign_reads, 0u);
  }
  size_t ops = 0;
  for (int i = 0; i <= writers; ++i) EXPECT_EQ(errors[i], "") << "thread " << i;
  for (auto const& w : ws) ops += w->ops();
  std::printf("stress: %zu checked operations\n", ops);

  // Everything compresses, then reads back; and again after a remount.
  auto const end = std::chrono::steady_clock::now() + 120s;
  for (auto const& w : ws) {
    for (auto const& n : w->paths()) {
      while (brevis_state(d.mnt() / n) != "compressed" &&
             std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(20ms);
      }
      EXPECT_EQ(brevis_state(d.mnt() / n), "compressed") << n;
    }
    EXPECT_EQ(w->check_all(), "");
  }
  EXPECT_EQ(d.stop(0), 0) << d.log();
  ASSERT_EQ(d.start({"--quiet-ms", "5"}), "");
  for (auto const& w : ws) EXPECT_EQ(w->check_all(), "");
  EXPECT_EQ(d.stop(SIGTERM), 0) << d.log();
  run_result const fsck = brevis({"fsck", d.store().string()});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
}

}  // namespace
}  // namespace brevis::cli_test
