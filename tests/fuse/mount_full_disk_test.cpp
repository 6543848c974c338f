// The mount with its store on a full disk (a small tmpfs, so root only):
// a write the kernel hands over after write() returned (the writeback
// cache) and that fails there reaches the writer's close, whichever
// descriptor the kernel told first, and fsync; the file is not compressed
// as if whole, across a remount too, and fsck reports it; rm still frees
// the space (LMDB copies the pages a commit changes, so a removal needs
// space to commit: the store's reserve).

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>

#include "tests/cli/helpers.h"
#include "tests/fuse/mount_harness.h"

namespace brevis::cli_test {
namespace {

using namespace std::chrono_literals;

// A tmpfs of `bytes` at `dir` for the test's life.
class small_disk {
 public:
  small_disk(fs::path dir, size_t bytes) : dir_(std::move(dir)) {
    fs::create_directories(dir_);
    std::string const opt = "size=" + std::to_string(bytes);
    ok_ = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opt.c_str()) == 0;
  }
  ~small_disk() {
    if (ok_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  small_disk(small_disk const&) = delete;
  small_disk& operator=(small_disk const&) = delete;
  bool ok() const { return ok_; }
  /// Makes it `bytes` large (space freed, as far as the store can tell).
  bool resize(size_t bytes) {
    std::string const opt = "size=" + std::to_string(bytes);
    return ::mount("tmpfs", dir_.c_str(), "tmpfs", MS_REMOUNT, opt.c_str()) ==
           0;
  }

 private:
  fs::path dir_;
  bool ok_ = false;
};

TEST(mount_full_disk, writers_are_told_and_rm_frees_space) {
  if (!fuse_usable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  temp_dir d;
  small_disk disk(d / "disk", 16u << 20);
  if (!disk.ok()) GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  mount_daemon m(d / "disk" / "store", d / "mnt", d / "mount.log");
  ASSERT_EQ(m.start({"--quiet-ms", "50"}), "");
  fs::path const big = m.mnt() / "big";
  fs::path const filler = m.mnt() / "filler";
  write_file(filler, std::string(8u << 20, 'f'));

  // More than the disk holds, in writes that all return at once.
  std::string const chunk(1u << 20, 'w');
  int const fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  for (int i = 0; i < 24; ++i) {
    if (::write(fd, chunk.data(), chunk.size()) < 0) break;
  }
  // Another descriptor closed first takes the kernel's one report of the
  // failed writeback (as a forked child's inherited copy, or `head`).
  int const other = ::open(big.c_str(), O_RDONLY);
  ASSERT_GE(other, 0);
  ::close(other);
  errno = 0;
  EXPECT_EQ(::close(fd), -1);
  EXPECT_EQ(errno, ENOSPC);
  int const again = ::open(big.c_str(), O_RDONLY);
  ASSERT_GE(again, 0);
  errno = 0;
  EXPECT_EQ(::fsync(again), -1);
  EXPECT_EQ(errno, ENOSPC);
  ::close(again);
  std::this_thread::sleep_for(300ms);  // six quiet periods
  EXPECT_EQ(brevis_state(big), "staged");
  EXPECT_NE(m.log().find("a write of the staged copy failed"),
            std::string::npos)
      << m.log();
  // The disk still full, rm frees space.
  errno = 0;
  EXPECT_EQ(::unlink(filler.c_str()), 0) << std::strerror(errno);
  // The loss outlives the mount: fsck reports it, and the next mount does
  // not compress the file as if whole either.
  ASSERT_EQ(m.stop(SIGTERM), 0) << m.log();
  run_result const lost = brevis({"fsck", m.store().string()});
  EXPECT_EQ(lost.exit_code, 1) << lost.out << lost.err;
  EXPECT_NE(lost.out.find("was lost"), std::string::npos) << lost.out;
  ASSERT_TRUE(disk.resize(64u << 20));  // room to compress it now
  ASSERT_EQ(m.start({"--quiet-ms", "50"}), "");
  std::this_thread::sleep_for(500ms);
  EXPECT_EQ(brevis_state(big), "staged");

  errno = 0;
  EXPECT_EQ(::unlink(big.c_str()), 0) << std::strerror(errno);
  std::string const small =
      make_safetensors({{"w", "BF16", {100000}, bf16_weights(100000, 31)}});
  write_file(m.mnt() / "small", small);
  auto const end = std::chrono::steady_clock::now() + 30s;
  while (brevis_state(m.mnt() / "small") != "compressed" &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  EXPECT_EQ(brevis_state(m.mnt() / "small"), "compressed");
  EXPECT_EQ(read_file(m.mnt() / "small"), small);
  ASSERT_EQ(m.stop(SIGTERM), 0) << m.log();
  run_result const r = brevis({"fsck", m.store().string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

// rm of a compressed file on a full disk gives its pack space back without
// gc: its records are punched out (FORMAT.md S.2.1), which takes no space.
TEST(mount_full_disk, a_removed_compressed_file_is_punched_out_on_a_full_disk) {
  if (!fuse_usable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  temp_dir d;
  small_disk disk(d / "disk", 64u << 20);
  if (!disk.ok()) GTEST_SKIP() << "cannot mount a tmpfs (needs root)";
  mount_daemon m(d / "disk" / "store", d / "mnt", d / "mount.log");
  ASSERT_EQ(m.start({"--quiet-ms", "50"}), "");
  std::string const w =
      make_safetensors({{"w", "BF16", {3000000}, bf16_weights(3000000, 33)}});
  write_file(m.mnt() / "w", w);
  auto const end = std::chrono::steady_clock::now() + 30s;
  while (brevis_state(m.mnt() / "w") != "compressed" &&
         std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(brevis_state(m.mnt() / "w"), "compressed");
  auto pack_bytes = [&] { return disk_bytes_of_files(m.store() / "packs"); };
  uint64_t const before = pack_bytes();
  ASSERT_GT(before, 2u << 20);
  // The rest of the disk filled beside the store.
  {
    int const fill = ::open((d / "disk" / "fill").c_str(),
                            O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_GE(fill, 0);
    std::string const block(1u << 16, 'x');
    while (::write(fill, block.data(), block.size()) > 0) {
    }
    ::close(fill);
  }
  errno = 0;
  EXPECT_EQ(::unlink((m.mnt() / "w").c_str()), 0) << std::strerror(errno);
  auto const punched_by = std::chrono::steady_clock::now() + 30s;
  while (pack_bytes() > before / 8 &&
         std::chrono::steady_clock::now() < punched_by) {
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_LE(pack_bytes(), before / 8);
  ASSERT_EQ(m.stop(SIGTERM), 0) << m.log();
  fs::remove(d / "disk" / "fill");
  run_result const r = brevis({"fsck", m.store().string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

}  // namespace
}  // namespace brevis::cli_test
