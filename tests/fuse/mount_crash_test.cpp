// Nothing lost: the daemon is killed with SIGKILL at many points while
// files are being written and compressed -- after a varying delay, and at
// the store's own kill points inside a compression's commit
// (BREVIS_STORE_KILL_AT) -- the dead mount is detached and the store
// mounted again. Every file whose close() succeeded reads back byte for
// byte after each remount, the last mount compresses everything, and
// `brevis fsck` finds the store clean.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "tests/cli/helpers.h"
#include "tests/fuse/mount_harness.h"

namespace brevis::cli_test {
namespace {

using namespace std::chrono_literals;

/// fp32 weights that look trained: small, normally distributed.
std::string f32_weights(size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  std::string s(count * 4, '\0');
  for (size_t i = 0; i < count; ++i) {
    float const f = dist(rng);
    std::memcpy(&s[4 * i], &f, 4);
  }
  return s;
}

std::string checkpoint(uint64_t seed) {
  std::mt19937_64 rng(seed);
  size_t const n = 150000 + rng() % 150000;  // 0.6 to 1.2 MB
  return make_safetensors(
      {{"w", "BF16", {n}, bf16_weights(n, seed)},
       {"v", "F32", {n / 2}, f32_weights(n / 2, seed + 1)}});
}

/// open, write in pieces, close: true when every call succeeded.
bool write_whole(fs::path const& p, std::string const& data) {
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = true;
  for (size_t off = 0; ok && off < data.size();) {
    size_t const n = std::min<size_t>(256 << 10, data.size() - off);
    ssize_t const w = ::pwrite(fd, data.data() + off, n, off);
    ok = w > 0;
    if (ok) off += static_cast<size_t>(w);
  }
  return ::close(fd) == 0 && ok;
}

/// The whole file, or nullopt when reading it fails.
std::optional<std::string> read_whole(fs::path const& p) {
  int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t const n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

TEST(mount_crash, sigkill_at_many_points_loses_no_closed_file) {
  if (!fuse_usable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  temp_dir dir;
  mount_daemon d(dir / "store", dir / "mnt", dir / "mount.log");
  std::map<std::string, std::string> closed;  // name -> bytes
  std::set<std::string> torn;  // a write the kill interrupted: any bytes
  auto verify = [&](char const* when) {
    for (auto const& [name, want] : closed) {
      std::optional<std::string> got = read_whole(d.mnt() / name);
      ASSERT_TRUE(got) << when << ": " << name << " unreadable";
      EXPECT_TRUE(*got == want)
          << when << ": " << name << " differs (" << got->size() << " vs "
          << want.size() << " bytes)";
    }
    for (auto const& name : torn) {
      if (fs::exists(d.mnt() / name)) {
        EXPECT_TRUE(read_whole(d.mnt() / name)) << when << ": " << name;
      }
    }
  };

  // Kill points inside the store's commit, then plain kills after a delay.
  char const* const points[] = {"", "pack_write:1", "pack_synced:1",
                                "committed:1"};
  unsigned const delays_ms[] = {0, 40, 120, 250, 400, 700};
  unsigned seed = 1;
  int kills = 0;
  for (int it = 0; it < 10; ++it) {
    std::string const point = points[it % 4];
    std::string const quiet = it % 2 ? "0" : "20";
    ASSERT_EQ(d.start({"--quiet-ms", quiet}), "") << "round " << it;
    verify("after remount");
    if (HasFatalFailure()) return;
    if (!point.empty()) {
      // A daemon that kills itself inside its first commit.
      ASSERT_EQ(d.stop(SIGTERM), 0) << d.log();
      std::string const started =
          d.start({"--quiet-ms", quiet}, {"BREVIS_STORE_KILL_AT=" + point});
      if (!started.empty()) {
        // The point came in the first compression of the resumed queue,
        // before the mount was seen: that was this round's kill.
        ASSERT_EQ(started.rfind("mount exited", 0), 0u) << started;
        ++kills;
        continue;
      }
    }

    // New files, and a rewrite of an older one (restaging a compressed
    // file when it got that far).
    std::vector<std::pair<std::string, std::string>> files;
    for (int k = 0; k < 4; ++k) {
      files.emplace_back(std::string("r") + std::to_string(it) + "_" +
                             std::to_string(k) + ".safetensors",
                         checkpoint(seed++));
    }
    if (!closed.empty()) {
      files.emplace_back(closed.begin()->first, checkpoint(seed++));
    }
    // The kill comes a while after the round's first `need` closes (or
    // at once after a kill point), so each round keeps some files however
    // slow the machine is, and stops somewhere different.
    size_t const need = point.empty() ? 1 + it % 3 : 0;
    std::mutex mu;
    std::condition_variable cv;
    size_t closed_now = 0;
    pid_t const pid = d.pid();
    std::thread killer([&, pid, ms = delays_ms[it % 6]] {
      {
        std::unique_lock lk(mu);
        cv.wait(lk, [&] { return closed_now >= need; });
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
      ::kill(pid, SIGKILL);  // harmless when a kill point came first
    });
    auto count_close = [&](size_t add) {
      std::lock_guard lk(mu);
      closed_now += add;
      cv.notify_all();
    };
    for (auto const& [name, data] : files) {
      if (write_whole(d.mnt() / name, data)) {
        closed[name] = data;
        torn.erase(name);
        count_close(1);
      } else {
        closed.erase(name);
        torn.insert(name);
        break;  // the daemon is gone
      }
    }
    count_close(files.size());  // whatever happened, the killer goes on
    killer.join();
    d.reap_and_detach();
    ++kills;
  }

  // The last mount: everything comes back, then everything compresses.
  ASSERT_EQ(d.start({"--quiet-ms", "0"}), "");
  verify("after the last remount");
  EXPECT_FALSE(closed.empty());  // each round without a kill point closes some
  auto const end = std::chrono::steady_clock::now() + 120s;
  for (auto const& [name, want] : closed) {
    while (brevis_state(d.mnt() / name) != "compressed" &&
           std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(20ms);
    }
    EXPECT_EQ(brevis_state(d.mnt() / name), "compressed") << name;
  }
  verify("compressed");
  EXPECT_EQ(d.stop(SIGTERM), 0) << d.log();
  run_result const fsck = brevis({"fsck", d.store().string()});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
  // Only the torn files' copies may be left in staging (they stay staged).
  size_t copies = 0;
  for (auto const& e : fs::directory_iterator(d.store() / "staging")) {
    (void)e;
    ++copies;
  }
  EXPECT_LE(copies, torn.size());
  EXPECT_EQ(kills, 10);
  std::printf("crash: %d kills, %zu closed files checked, %zu torn writes\n",
              kills, closed.size(), torn.size());
}

}  // namespace
}  // namespace brevis::cli_test
