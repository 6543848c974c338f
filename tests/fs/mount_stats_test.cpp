// The daemonized mount's observability through the real binary: `brevis
// mount --log FILE` daemonizes, compresses a file copied in and logs one
// line for it; `brevis stats` runs beside the live mount (read-only index)
// and shows the queue and the job; after `brevis unmount` it says the store
// is not mounted. Skipped without a usable /dev/fuse.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "tests/cli/helpers.h"

namespace brevis::cli_test {
namespace {

using namespace std::chrono_literals;

bool fuse_usable() {
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return fs::exists("/usr/bin/fusermount3");
}

std::string state_of(fs::path const& p) {
  char buf[64];
  ssize_t const n = ::getxattr(p.c_str(), "user.brevis.state", buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

class mount_stats_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fuse_usable()) GTEST_SKIP() << "/dev/fuse is not usable here";
    fs::create_directories(mnt());
  }
  void TearDown() override {
    if (fs::exists(mnt())) {
      run_program({"/usr/bin/fusermount3", "-u", "-z", mnt().string()});
    }
    wait_daemon_gone();
  }
  fs::path store() const { return dir_ / "store"; }
  fs::path mnt() const { return dir_ / "mnt"; }
  fs::path log() const { return dir_ / "brevis.log"; }
  /// The daemon notes its pid in STORE/mount.lock.
  void wait_daemon_gone() {
    std::string const pid_text = fs::exists(store() / "mount.lock")
                                     ? read_file(store() / "mount.lock")
                                     : std::string();
    pid_t const pid = pid_text.empty() ? 0 : std::stoi(pid_text);
    for (int i = 0; pid > 0 && i < 600 && ::kill(pid, 0) == 0; ++i) {
      std::this_thread::sleep_for(50ms);
    }
  }
  temp_dir dir_;
};

TEST_F(mount_stats_test, daemon_logs_to_a_file_and_stats_runs_beside_it) {
  run_result const m =
      brevis({"mount", store().string(), mnt().string(), "--log",
              log().string(), "--quiet-ms", "0", "--pipeline-memory", "8M"});
  ASSERT_EQ(m.exit_code, 0) << m.err;  // daemonized once mounted

  std::string const data =
      make_safetensors({{"w", "BF16", {300000}, bf16_weights(300000, 11)}});
  write_file(mnt() / "w.safetensors", data);
  for (int i = 0; i < 1200 && state_of(mnt() / "w.safetensors") != "compressed";
       ++i) {
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_EQ(state_of(mnt() / "w.safetensors"), "compressed");
  EXPECT_TRUE(read_file(mnt() / "w.safetensors") == data);

  run_result const live = brevis({"stats", store().string()});
  EXPECT_EQ(live.exit_code, 0) << live.err;
  EXPECT_NE(live.out.find("staged:         0 files"), std::string::npos)
      << live.out;
  EXPECT_NE(live.out.find("queue:          0 waiting"), std::string::npos)
      << live.out;
  EXPECT_NE(live.out.find("last 1 jobs"), std::string::npos) << live.out;
  EXPECT_NE(live.out.find("w.safetensors"), std::string::npos) << live.out;

  EXPECT_EQ(brevis({"unmount", mnt().string()}).exit_code, 0);
  wait_daemon_gone();
  std::string const text = read_file(log());
  EXPECT_NE(text.find("compressed 'w.safetensors' (inode "), std::string::npos)
      << text;
  EXPECT_NE(text.find(std::to_string(data.size()) + " -> "), std::string::npos)
      << text;
  run_result const after = brevis({"stats", store().string()});
  EXPECT_EQ(after.exit_code, 0) << after.err;
  EXPECT_NE(after.out.find("queue:          not mounted"), std::string::npos)
      << after.out;
  EXPECT_EQ(brevis({"fsck", store().string()}).exit_code, 0);
}

TEST_F(mount_stats_test, bad_log_path_fails_before_daemonizing) {
  run_result const m = brevis({"mount", store().string(), mnt().string(),
                               "--log", (dir_ / "no/such/dir/log").string()});
  EXPECT_NE(m.exit_code, 0);
  EXPECT_NE(m.err.find("open the log"), std::string::npos) << m.err;
  run_result const bad = brevis(
      {"mount", store().string(), mnt().string(), "--pipeline-memory", "12x"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--pipeline-memory"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace brevis::cli_test
