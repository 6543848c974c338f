// The read path on a real mount: the kernel keeps a compressed file's pages
// across opens (keep_cache), so every new version must reach both a reader
// that opens the file afterwards and one that held it open all along --
// rewritten in place, truncated and rewritten, recompressed, replaced by a
// rename -- and a sequential read of a multi-chunk file, cold and warm,
// comes back byte for byte whatever the request sizes, even when one read
// spans thousands of tiny chunks.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <thread>

#include "fs/fuse/readahead.h"
#include "tests/cli/helpers.h"
#include "tests/fuse/mount_harness.h"

namespace brevis::cli_test {
namespace {

using namespace std::chrono_literals;

class mount_read_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fuse_usable()) GTEST_SKIP() << "/dev/fuse is not usable here";
    ASSERT_EQ(daemon_.start({"--quiet-ms", "50"}), "");
  }
  void TearDown() override {
    if (daemon_.pid() > 0) {
      EXPECT_EQ(daemon_.stop(SIGTERM), 0) << daemon_.log();
    }
  }
  fs::path mnt() const { return daemon_.mnt(); }

  bool wait_compressed(fs::path const& p) {
    for (int i = 0; i < 1200; ++i) {
      if (brevis_state(p) == "compressed") return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  temp_dir dir_;
  mount_daemon daemon_{dir_ / "store", dir_ / "mnt", dir_ / "mount.log"};
};

/// The whole file through `fd` with pread, `piece` bytes at a time.
std::string pread_all(int fd, size_t piece) {
  std::string got;
  std::vector<char> buf(piece);
  for (;;) {
    ssize_t const n =
        ::pread(fd, buf.data(), piece, static_cast<off_t>(got.size()));
    if (n <= 0) break;
    got.append(buf.data(), static_cast<size_t>(n));
  }
  return got;
}

std::string read_fresh(fs::path const& p, size_t piece = 128 << 10) {
  int const fd = ::open(p.c_str(), O_RDONLY);
  if (fd < 0) return "open failed";
  std::string got = pread_all(fd, piece);
  ::close(fd);
  return got;
}

std::string version(uint64_t seed, size_t rows) {
  return make_safetensors(
      {{"w", "BF16", {rows, 1024}, bf16_weights(rows * 1024, seed)},
       {"b", "BF16", {4096}, bf16_weights(4096, seed + 1)}});
}

TEST_F(mount_read_test, kept_pages_never_serve_an_old_version) {
  fs::path const f = mnt() / "model.safetensors";
  std::string const v1 = version(1, 1536);  // 3 MiB: several chunks
  write_file(f, v1);
  ASSERT_TRUE(wait_compressed(f)) << daemon_.log();
  ASSERT_TRUE(read_fresh(f) == v1);  // its pages are cached now
  int const held = ::open(f.c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  ASSERT_TRUE(pread_all(held, 1 << 20) == v1);

  // Patched in place through another descriptor.
  std::string v2 = v1;
  for (size_t i = 100; i < v2.size(); i += 300007) v2[i] ^= 0x33;
  {
    int const fd = ::open(f.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    for (size_t i = 100; i < v2.size(); i += 300007) {
      ASSERT_EQ(::pwrite(fd, &v2[i], 1, static_cast<off_t>(i)), 1);
    }
    ::close(fd);
  }
  EXPECT_TRUE(read_fresh(f) == v2);
  EXPECT_TRUE(pread_all(held, 128 << 10) == v2);
  ASSERT_TRUE(wait_compressed(f)) << daemon_.log();
  EXPECT_TRUE(read_fresh(f, 4096) == v2);
  EXPECT_TRUE(pread_all(held, 1 << 20) == v2);

  // Truncated and rewritten shorter, then recompressed.
  std::string const v3 = version(3, 700);
  write_file(f, v3);
  EXPECT_TRUE(read_fresh(f) == v3);
  EXPECT_TRUE(pread_all(held, 128 << 10) == v3);
  ASSERT_TRUE(wait_compressed(f)) << daemon_.log();
  EXPECT_TRUE(read_fresh(f) == v3);
  EXPECT_TRUE(pread_all(held, 100000) == v3);

  // Replaced by a rename (a checkpoint writer's temp file): a new open
  // sees the new file, the held descriptor keeps the one it opened.
  std::string const v4 = version(4, 1100);
  write_file(mnt() / "model.tmp", v4);
  ASSERT_TRUE(wait_compressed(mnt() / "model.tmp")) << daemon_.log();
  fs::rename(mnt() / "model.tmp", f);
  EXPECT_TRUE(read_fresh(f) == v4);
  EXPECT_TRUE(pread_all(held, 128 << 10) == v3);
  ::close(held);
  EXPECT_TRUE(read_fresh(f, 1 << 20) == v4);
}

TEST_F(mount_read_test, sequential_reads_of_a_compressed_file) {
  fs::path const f = mnt() / "big.safetensors";
  std::string const data = version(9, 2560);  // 5 MiB
  write_file(f, data);
  ASSERT_TRUE(wait_compressed(f)) << daemon_.log();
  // A fresh mount: the chunk cache is empty, the kernel's pages gone.
  ASSERT_EQ(daemon_.stop(SIGTERM), 0) << daemon_.log();
  ASSERT_EQ(daemon_.start({"--quiet-ms", "50"}), "");
  EXPECT_TRUE(read_fresh(f, 1 << 20) == data);
  EXPECT_TRUE(read_fresh(f, 1 << 20) == data);  // the kernel's pages
  // Odd sizes and offsets across chunk boundaries, and past the end.
  int const rd = ::open(f.c_str(), O_RDONLY);
  ASSERT_GE(rd, 0);
  std::vector<char> buf(3 << 20);
  for (size_t off : {size_t{0}, size_t{(1 << 20) - 5}, data.size() - 10}) {
    ssize_t const n =
        ::pread(rd, buf.data(), buf.size(), static_cast<off_t>(off));
    size_t const want = std::min(buf.size(), data.size() - off);
    ASSERT_EQ(n, static_cast<ssize_t>(want)) << off;
    EXPECT_EQ(std::string(buf.data(), want), data.substr(off, want)) << off;
  }
  EXPECT_EQ(::pread(rd, buf.data(), 100, static_cast<off_t>(data.size())), 0);
  ::close(rd);
}

// As root the daemon raises its mount's kernel readahead to the 1 MiB it
// asks for (a sequential reader then sends 1 MiB reads, several at once).
TEST_F(mount_read_test, readahead_window_as_root) {
  if (::geteuid() != 0) GTEST_SKIP() << "only root may set it";
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream info;
  info << in.rdbuf();
  auto const dev =
      brevis::fs::mount_device(info.str(), fs::canonical(mnt()).string());
  ASSERT_TRUE(dev);
  std::ifstream ra("/sys/class/bdi/" + *dev + "/read_ahead_kb");
  size_t kb = 0;
  ASSERT_TRUE(ra >> kb);
  EXPECT_GE(kb, 1024u);
}

TEST_F(mount_read_test, one_read_across_thousands_of_tiny_chunks) {
  // Each small tensor is a chunk of its own: one FUSE read covers ~3000 of
  // them, more pieces than one writev takes.
  std::vector<st_tensor> tensors;
  for (int i = 0; i < 3000; ++i) {
    std::string name = "t";
    name += std::to_string(i);
    tensors.push_back({std::move(name), "BF16", {3}, bf16_weights(3, i)});
  }
  std::string const data = make_safetensors(tensors);
  fs::path const f = mnt() / "tiny.safetensors";
  write_file(f, data);
  ASSERT_TRUE(wait_compressed(f)) << daemon_.log();
  // A fresh mount, so the read reaches the daemon, not the kernel's pages.
  ASSERT_EQ(daemon_.stop(SIGTERM), 0) << daemon_.log();
  ASSERT_EQ(daemon_.start({"--quiet-ms", "50"}), "");
  auto got =
      std::async(std::launch::async, [&] { return read_fresh(f, 1 << 20); });
  if (got.wait_for(60s) != std::future_status::ready) {
    // A reply that never went out: the read hangs until the daemon dies.
    ADD_FAILURE() << "the read hung";
    daemon_.kill9();
  }
  EXPECT_TRUE(got.get() == data);
}

}  // namespace
}  // namespace brevis::cli_test
