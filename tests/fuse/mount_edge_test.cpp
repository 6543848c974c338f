// The mount's edge cases through the real binary: files the parsers do not
// understand and empty files, a 5 GiB sparse file, a tree 20 levels deep
// with 10,000 small files (across a remount), reads and writes through
// mmap of a compressed file, fallocate's modes, POSIX and BSD locks,
// permissions (the mount is the mounting user's unless --allow-other;
// default_permissions enforces mode bits for other users), directory
// listings that follow the directory, setgid directories, names longer
// than NAME_MAX, FIFOs and sockets, removed directories, FIFOs and symlinks
// still held open, a name replaced by rename while readers open it,
// SEEK_DATA and SEEK_HOLE, and fsync.

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>

#include "tests/cli/helpers.h"
#include "tests/fuse/mount_harness.h"

namespace brevis::cli_test {
namespace {

using namespace std::chrono_literals;

class mount_edge : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fuse_usable()) GTEST_SKIP() << "/dev/fuse is not usable here";
  }
  fs::path mnt() const { return d_.mnt(); }

  bool wait_compressed(std::vector<fs::path> const& files) {
    auto const end = std::chrono::steady_clock::now() + 60s;
    for (auto const& f : files) {
      while (brevis_state(f) != "compressed") {
        if (std::chrono::steady_clock::now() > end) return false;
        std::this_thread::sleep_for(20ms);
      }
    }
    return true;
  }
  void remount(std::vector<std::string> const& args) {
    ASSERT_EQ(d_.stop(SIGTERM), 0) << d_.log();
    ASSERT_EQ(d_.start(args), "");
  }
  void fsck_clean() {
    ASSERT_EQ(d_.stop(SIGTERM), 0) << d_.log();
    run_result const r = brevis({"fsck", d_.store().string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  }

  temp_dir dir_;
  mount_daemon d_{dir_ / "store", dir_ / "mnt", dir_ / "mount.log"};
};

std::string pread_at(int fd, off_t off, size_t n) {
  std::string s(n, '\0');
  ssize_t const r = ::pread(fd, s.data(), n, off);
  s.resize(r < 0 ? 0 : static_cast<size_t>(r));
  return s;
}

TEST_F(mount_edge, empty_and_unparsed_files) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  std::string const weights =
      make_safetensors({{"w", "BF16", {100000}, bf16_weights(100000, 1)}});
  std::map<std::string, std::string> files = {
      {"empty", ""},
      {"empty.safetensors", ""},
      // A header length far past the end, a cut-off file, a .pt that is
      // no zip, random bytes, text.
      {"bad_header.safetensors",
       std::string("\xff\xff\xff\xff\x00\x00\x00\x00", 8) + weights},
      {"cut.safetensors", weights.substr(0, weights.size() / 2 + 3)},
      {"model.pt", "PK\x03\x04" + random_bytes(300000, 2)},
      {"random.bin", random_bytes(1 << 20, 3)},
      {"config.json", "{\"hidden\": 4096, \"layers\": 32}\n"},
  };
  std::vector<fs::path> paths;
  for (auto const& [name, data] : files) {
    write_file(mnt() / name, data);
    paths.push_back(mnt() / name);
  }
  auto same = [&](char const* when) {
    for (auto const& [name, data] : files) {
      EXPECT_TRUE(read_file(mnt() / name) == data) << when << ": " << name;
      EXPECT_EQ(fs::file_size(mnt() / name), data.size()) << name;
    }
  };
  same("staged");
  ASSERT_TRUE(wait_compressed(paths)) << d_.log();
  same("compressed");
  remount({"--quiet-ms", "0"});
  same("remounted");
  fsck_clean();
}

// Stays staged (--no-compress): compressing 5 GiB is the pipeline's
// business and far too slow for a test; this is about the staged path,
// sizes and holes.
TEST_F(mount_edge, sparse_five_gib_file) {
  ASSERT_EQ(d_.start({"--no-compress"}), "");
  fs::path const f = mnt() / "sparse.bin";
  off_t const size = 5ll << 30;
  std::vector<std::pair<off_t, std::string>> pieces = {
      {0, "head"},
      {(1ll << 30) + 123, random_bytes(70000, 4)},
      {(4ll << 30) - 5, "across 4 GiB"},
      {size - 4096, random_bytes(4096, 5)},
  };
  {
    int fd = ::open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, size), 0);
    for (auto const& [off, s] : pieces) {
      ASSERT_EQ(::pwrite(fd, s.data(), s.size(), off),
                static_cast<ssize_t>(s.size()));
    }
    ASSERT_EQ(::close(fd), 0);
  }
  auto check = [&](char const* when) {
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    EXPECT_EQ(st.st_size, size) << when;
    EXPECT_LT(st.st_blocks * 512, 16 << 20) << when;  // the holes stay holes
    int fd = ::open(f.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    for (auto const& [off, s] : pieces) {
      EXPECT_TRUE(pread_at(fd, off, s.size()) == s) << when << " at " << off;
    }
    // Holes read as zeros, sampled across the file; the end is the end.
    for (off_t off = 4096; off < size - 8192; off += 97ll << 20) {
      bool in_piece = false;
      for (auto const& [p, s] : pieces) {
        in_piece |= off + 4096 > p && off < p + static_cast<off_t>(s.size());
      }
      if (in_piece) continue;
      EXPECT_EQ(pread_at(fd, off, 4096), std::string(4096, '\0'))
          << when << " at " << off;
    }
    EXPECT_EQ(pread_at(fd, size, 10), "");
    EXPECT_EQ(pread_at(fd, size - 2, 10), pieces.back().second.substr(4094));
    ::close(fd);
  };
  check("written");
  remount({"--no-compress"});
  check("remounted");
  fsck_clean();
}

// SEEK_DATA and SEEK_HOLE never hide data: the kernel sends FUSE_LSEEK
// without writing back the pages it caches first, so the staged copy's holes
// are no answer while a writer's pages are in flight; the mount leaves lseek
// to the kernel, whose answer (data up to the size it knows) is always
// right. `cp --sparse=always`, which seeks for data, copies the file whole.
TEST_F(mount_edge, seeking_data_and_holes_never_skips_data) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  fs::path const f = mnt() / "holes.bin";
  off_t const size = 8 << 20;
  std::vector<std::pair<off_t, std::string>> const pieces = {
      {4 << 20, random_bytes(4096, 11)}, {size - 100, random_bytes(100, 12)}};
  // The data at `off` (length `n`) is found where it is: SEEK_DATA from
  // the start reaches it no later than `off`, SEEK_HOLE from `off` no
  // earlier than its end.
  auto data_found = [](int fd, off_t off, size_t n) {
    off_t const d = ::lseek(fd, 0, SEEK_DATA);
    off_t const h = ::lseek(fd, off, SEEK_HOLE);
    return d >= 0 && d <= off && h >= off + static_cast<off_t>(n);
  };
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int fd = ::open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, size), 0);
  for (auto const& [off, bytes] : pieces) {
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), off),
              static_cast<ssize_t>(bytes.size()));
    // Still open: the page may be the kernel's alone.
    EXPECT_TRUE(data_found(fd, off, bytes.size())) << "open, at " << off;
  }
  EXPECT_EQ(::lseek(fd, size, SEEK_DATA), -1);
  EXPECT_EQ(errno, ENXIO);
  ASSERT_EQ(::close(fd), 0);
  std::string want(static_cast<size_t>(size), '\0');
  for (auto const& [off, bytes] : pieces) {
    want.replace(static_cast<size_t>(off), bytes.size(), bytes);
  }
  auto check = [&](char const* when) {
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
    int const rfd = ::open(f.c_str(), O_RDONLY);
    ASSERT_GE(rfd, 0);
    for (auto const& [off, bytes] : pieces) {
      EXPECT_TRUE(data_found(rfd, off, bytes.size())) << when << ", at " << off;
    }
    ::close(rfd);
    fs::path const copy = dir_ / "copy.bin";
    fs::remove(copy);
    run_result const r =
        run_program({"/bin/cp", "--sparse=always", f.string(), copy.string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(read_file(copy) == want) << when;
  };
  check("closed");
  ASSERT_TRUE(wait_compressed({f})) << d_.log();
  check("compressed");
  fsck_clean();
}

// Each create is a few round trips and two commits: under the sanitizers
// a tenth of the files keeps the test short.
#if defined(__SANITIZE_ADDRESS__)
constexpr int many_files = 1000;
#else
constexpr int many_files = 10000;
#endif

TEST_F(mount_edge, deep_tree_and_ten_thousand_files) {
  ASSERT_EQ(d_.start({"--no-compress"}), "");
  fs::path deep = mnt();
  for (int i = 0; i < 20; ++i) {
    deep /= "level" + std::to_string(i);
    ASSERT_TRUE(fs::create_directory(deep)) << deep;
    write_file(deep / "here.txt", "depth " + std::to_string(i) + "\n");
  }
  auto content = [](int i) {
    return std::string("file ") + std::to_string(i) + "\n" +
           std::string(static_cast<size_t>(i % 300), static_cast<char>(i));
  };
  auto name = [&](int i) {
    return mnt() / (std::string("many") + std::to_string(i % 10)) /
           (std::string("f") + std::to_string(i));
  };
  auto const t0 = std::chrono::steady_clock::now();
  for (int dir = 0; dir < 10; ++dir) {
    ASSERT_TRUE(fs::create_directory(mnt() / ("many" + std::to_string(dir))));
  }
  // Four at a time: each create is a few round trips and a commit.
  auto in_parallel = [](auto f) {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t) {
      ts.emplace_back([t, &f] {
        for (int i = t; i < many_files; i += 4) f(i);
      });
    }
    for (auto& t : ts) t.join();
  };
  in_parallel([&](int i) { write_file(name(i), content(i)); });
  double const secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  std::printf("%d files created in %.1f s\n", many_files, secs);
  auto check = [&](char const* when) {
    fs::path p = mnt();
    for (int i = 0; i < 20; ++i) {
      p /= "level" + std::to_string(i);
      EXPECT_EQ(read_file(p / "here.txt"), "depth " + std::to_string(i) + "\n")
          << when;
    }
    for (int dir = 0; dir < 10; ++dir) {
      size_t n = 0;
      for (auto const& e :
           fs::directory_iterator(mnt() / ("many" + std::to_string(dir)))) {
        (void)e;
        ++n;
      }
      EXPECT_EQ(n, static_cast<size_t>(many_files / 10)) << when;
    }
    std::atomic<int> wrong{0};
    in_parallel([&](int i) { wrong += read_file(name(i)) != content(i); });
    EXPECT_EQ(wrong, 0) << when;
  };
  check("written");
  remount({"--no-compress"});
  check("remounted");
  fsck_clean();
}

TEST_F(mount_edge, mmap_reads_and_writes_a_compressed_file) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  std::string const data =
      make_safetensors({{"w", "BF16", {1500000}, bf16_weights(1500000, 6)}});
  fs::path const f = mnt() / "m.safetensors";
  write_file(f, data);
  ASSERT_TRUE(wait_compressed({f})) << d_.log();
  {
    int fd = ::open(f.c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    void* p = ::mmap(nullptr, data.size(), PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_EQ(std::memcmp(p, data.data(), data.size()), 0);
    ::munmap(p, data.size());
    size_t const off = 1 << 20;
    p = ::mmap(nullptr, data.size() - off, PROT_READ, MAP_PRIVATE, fd, off);
    ASSERT_NE(p, MAP_FAILED);
    EXPECT_EQ(std::memcmp(p, data.data() + off, data.size() - off), 0);
    ::munmap(p, data.size() - off);
    ::close(fd);
  }
  EXPECT_EQ(brevis_state(f), "compressed");  // reading left it so
  // A shared writable mapping restages it; the change survives the
  // recompression and a remount.
  std::string want = data;
  {
    int fd = ::open(f.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    auto* p = static_cast<char*>(::mmap(
        nullptr, data.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    ASSERT_NE(p, MAP_FAILED);
    for (size_t i = 100; i < data.size(); i += 65537) {
      p[i] = static_cast<char>(~p[i]);
      want[i] = static_cast<char>(~want[i]);
    }
    EXPECT_EQ(::msync(p, data.size(), MS_SYNC), 0);
    ::munmap(p, data.size());
    ::close(fd);
  }
  EXPECT_TRUE(read_file(f) == want);
  ASSERT_TRUE(wait_compressed({f})) << d_.log();
  EXPECT_TRUE(read_file(f) == want);
  remount({"--quiet-ms", "0"});
  EXPECT_TRUE(read_file(f) == want);
  fsck_clean();
}

TEST_F(mount_edge, fallocate_modes) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  fs::path const f = mnt() / "falloc.bin";
  std::string const bytes = random_bytes(3 << 20, 7);
  std::string want;
  {
    int fd = ::open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::fallocate(fd, 0, 0, 1 << 20), 0) << std::strerror(errno);
    struct stat st {};
    ::fstat(fd, &st);
    EXPECT_EQ(st.st_size, 1 << 20);
    ASSERT_EQ(::pwrite(fd, bytes.data(), bytes.size(), 0),
              static_cast<ssize_t>(bytes.size()));
    // KEEP_SIZE past the end: space, not size.
    ASSERT_EQ(::fallocate(fd, FALLOC_FL_KEEP_SIZE, 3 << 20, 1 << 20), 0);
    ::fstat(fd, &st);
    EXPECT_EQ(st.st_size, 3 << 20);
    // A hole punched in the middle reads as zeros.
    ASSERT_EQ(::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                          1 << 20, 256 << 10),
              0)
        << std::strerror(errno);
    want = bytes;
    std::fill(want.begin() + (1 << 20), want.begin() + (1 << 20) + (256 << 10),
              '\0');
    EXPECT_TRUE(pread_at(fd, 0, want.size()) == want);
    // Modes the mount does not do are refused, not ignored.
    EXPECT_NE(::fallocate(fd, FALLOC_FL_COLLAPSE_RANGE, 0, 1 << 20), 0);
    EXPECT_EQ(errno, EOPNOTSUPP);
    ASSERT_EQ(::close(fd), 0);
  }
  EXPECT_TRUE(read_file(f) == want);
  ASSERT_TRUE(wait_compressed({f})) << d_.log();
  EXPECT_TRUE(read_file(f) == want);
  fsck_clean();
}

// The mtime a writer sees before its close is the one a remount shows, when
// the kernel writes the pages back only at the close, a second later. (A
// write the daemon handled after the kernel's setattr of the times, on
// another thread, once moved it to the close's time; mount_fs_times forces
// that order.)
TEST_F(mount_edge, mtime_survives_a_remount_after_a_late_write_back) {
  ASSERT_EQ(d_.start({"--quiet-ms", "60000"}), "");
  fs::path const f = mnt() / "late.bin";
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int fd = ::open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 40000), 0);
  ASSERT_EQ(::pwrite(fd, "0123456789", 10, 39990), 10);
  std::this_thread::sleep_for(1100ms);
  struct stat before {};  // the last change's time, as ext4 would keep it
  ASSERT_EQ(::fstat(fd, &before), 0);
  ASSERT_EQ(::close(fd), 0);
  remount({"--quiet-ms", "60000"});
  struct stat after {};
  ASSERT_EQ(::stat(f.c_str(), &after), 0);
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
  // And the ctime: the kernel states it beside the mtime (it was the
  // close's time in the store, moving a few ms across every remount).
  EXPECT_EQ(after.st_ctim.tv_sec, before.st_ctim.tv_sec);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
  EXPECT_EQ(after.st_size, 40000);
  fsck_clean();
}

// A chmod while the file is open for writing, then a close: the ctime a
// remount shows is the chmod's (the close recorded the last write's, which
// is older). An open for writing that writes nothing leaves it.
TEST_F(mount_edge, ctime_of_a_chmod_while_open_survives_a_remount) {
  ASSERT_EQ(d_.start({"--quiet-ms", "60000"}), "");
  fs::path const f = mnt() / "c.bin";
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int fd = ::open(f.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::pwrite(fd, "0123456789", 10, 0), 10);
  std::this_thread::sleep_for(1100ms);
  ASSERT_EQ(::fchmod(fd, 0600), 0);
  struct stat before {};
  ASSERT_EQ(::fstat(fd, &before), 0);
  ASSERT_EQ(::close(fd), 0);
  auto same_ctime = [&](char const* when) {
    struct stat after {};
    ASSERT_EQ(::stat(f.c_str(), &after), 0) << when;
    EXPECT_EQ(after.st_ctim.tv_sec, before.st_ctim.tv_sec) << when;
    EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec) << when;
    EXPECT_EQ(after.st_mode & 07777, 0600u) << when;
  };
  remount({"--quiet-ms", "60000"});
  same_ctime("after the chmod");
  std::this_thread::sleep_for(20ms);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  fd = ::open(f.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::close(fd), 0);
  remount({"--quiet-ms", "60000"});
  same_ctime("after an open for writing that wrote nothing");
  fsck_clean();
}

TEST_F(mount_edge, posix_and_bsd_locks) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  fs::path const f = mnt() / "locked";
  write_file(f, std::string(1000, 'x'));
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  pid_t const child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // Holds a write lock on [0, 100) and an flock until told to go.
    int fd = ::open(f.c_str(), O_RDWR);
    struct flock l {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    l.l_start = 0;
    l.l_len = 100;
    int ok = fd >= 0 && ::fcntl(fd, F_SETLK, &l) == 0;
    int fd2 = ::open(f.c_str(), O_RDONLY);
    ok = ok && fd2 >= 0 && ::flock(fd2, LOCK_EX | LOCK_NB) == 0;
    char c = ok ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(done[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  int fd = ::open(f.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  struct flock l {};
  l.l_type = F_WRLCK;
  l.l_whence = SEEK_SET;
  l.l_start = 50;
  l.l_len = 10;
  EXPECT_NE(::fcntl(fd, F_SETLK, &l), 0);
  EXPECT_TRUE(errno == EAGAIN || errno == EACCES);
  ASSERT_EQ(::fcntl(fd, F_GETLK, &l), 0);
  EXPECT_EQ(l.l_type, F_WRLCK);
  EXPECT_EQ(l.l_pid, child);
  struct flock other {};
  other.l_type = F_WRLCK;
  other.l_whence = SEEK_SET;
  other.l_start = 200;
  other.l_len = 100;
  EXPECT_EQ(::fcntl(fd, F_SETLK, &other), 0);  // no overlap
  EXPECT_NE(::flock(fd, LOCK_EX | LOCK_NB), 0);
  EXPECT_EQ(errno, EWOULDBLOCK);
  (void)!::write(done[1], "g", 1);
  int status = 0;
  ::waitpid(child, &status, 0);
  l.l_start = 50;
  l.l_type = F_WRLCK;
  EXPECT_EQ(::fcntl(fd, F_SETLK, &l), 0);  // released with the child
  EXPECT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  ::close(fd);
  for (int p : {ready[0], ready[1], done[0], done[1]}) ::close(p);
  fsck_clean();
}

/// Runs argv as uid/gid 65534 (nobody) with no supplementary groups.
run_result as_nobody(std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/usr/bin/setpriv", "--reuid=65534",
                             "--regid=65534", "--clear-groups"});
  return run_program(argv);
}

TEST_F(mount_edge, permissions) {
  if (::geteuid() != 0 || !fs::exists("/usr/bin/setpriv")) {
    GTEST_SKIP() << "needs root and setpriv";
  }
  // Let nobody walk to the mountpoint.
  fs::permissions(dir_.path(), fs::perms(0755));
  ASSERT_EQ(d_.start({"--no-compress"}), "");
  write_file(mnt() / "pub", "public\n");
  fs::permissions(mnt() / "pub", fs::perms(0644));
  // Without --allow-other the mount is root's alone.
  EXPECT_NE(as_nobody({"/bin/cat", (mnt() / "pub").string()}).exit_code, 0);
  EXPECT_NE(as_nobody({"/usr/bin/stat", mnt().string()}).exit_code, 0);
  EXPECT_EQ(read_file(mnt() / "pub"), "public\n");

  remount({"--no-compress", "--allow-other"});
  write_file(mnt() / "secret", "secret\n");
  fs::permissions(mnt() / "secret", fs::perms(0600));
  fs::create_directory(mnt() / "mine");
  ASSERT_EQ(::chown((mnt() / "mine").c_str(), 65534, 65534), 0);
  fs::create_directory(mnt() / "roots");
  // Mode bits hold for everyone else (default_permissions).
  run_result r = as_nobody({"/bin/cat", (mnt() / "pub").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "public\n");
  EXPECT_NE(as_nobody({"/bin/cat", (mnt() / "secret").string()}).exit_code, 0);
  EXPECT_NE(
      as_nobody({"/bin/sh", "-c", "echo x >> " + (mnt() / "pub").string()})
          .exit_code,
      0);
  EXPECT_NE(
      as_nobody({"/bin/chmod", "666", (mnt() / "pub").string()}).exit_code, 0);
  EXPECT_NE(
      as_nobody({"/usr/bin/touch", (mnt() / "roots" / "x").string()}).exit_code,
      0);
  EXPECT_EQ(read_file(mnt() / "pub"), "public\n");
  EXPECT_FALSE(fs::exists(mnt() / "roots" / "x"));
  // In a directory it owns, nobody creates files, and they are its own.
  r = as_nobody(
      {"/bin/sh", "-c", "echo mine > " + (mnt() / "mine" / "f").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  struct stat st {};
  ASSERT_EQ(::stat((mnt() / "mine" / "f").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(st.st_gid, 65534u);
  EXPECT_EQ(read_file(mnt() / "mine" / "f"), "mine\n");
  fsck_clean();
}

TEST_F(mount_edge, an_o_trunc_open_by_another_user_clears_setuid_and_setgid) {
  if (::geteuid() != 0 || !fs::exists("/usr/bin/setpriv")) {
    GTEST_SKIP() << "needs root and setpriv";
  }
  fs::permissions(dir_.path(), fs::perms(0755));
  ASSERT_EQ(d_.start({"--quiet-ms", "0", "--allow-other"}), "");
  // Staged, and compressed (opening it for writing restages it).
  fs::path const staged = mnt() / "staged", packed = mnt() / "packed";
  write_file(packed, std::string(100000, 'p'));
  ASSERT_TRUE(wait_compressed({packed})) << d_.log();
  write_file(staged, "s");
  auto const mode = [](fs::path const& p) {
    struct stat st {};
    EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
    return st.st_mode & 07777;
  };
  for (fs::path const& f : {staged, packed}) {
    ASSERT_EQ(::chmod(f.c_str(), 06777), 0);
    // As ext4 does: the writer is not root, so both bits go.
    run_result const r = as_nobody({"/bin/sh", "-c", ": > " + f.string()});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(mode(f), 0777u) << f;
    EXPECT_EQ(fs::file_size(f), 0u);
    // Setgid without group execute goes too when the writer is not in the
    // file's group, and stays when it is. Root keeps all.
    ASSERT_EQ(::chmod(f.c_str(), 02766), 0);
    EXPECT_EQ(as_nobody({"/bin/sh", "-c", ": > " + f.string()}).exit_code, 0);
    EXPECT_EQ(mode(f), 0766u) << f;
    ASSERT_EQ(::chown(f.c_str(), 0, 65534), 0);
    ASSERT_EQ(::chmod(f.c_str(), 02766), 0);
    EXPECT_EQ(as_nobody({"/bin/sh", "-c", ": > " + f.string()}).exit_code, 0);
    EXPECT_EQ(mode(f), 02766u) << f;
    ASSERT_EQ(::chown(f.c_str(), 0, 0), 0);
    ASSERT_EQ(::chmod(f.c_str(), 06777), 0);
    write_file(f, "");
    EXPECT_EQ(mode(f), 06777u) << f;
  }
  remount({"--quiet-ms", "0", "--allow-other"});
  EXPECT_EQ(mode(staged), 06777u);
  fsck_clean();
}

TEST_F(mount_edge, attributes_stay_listable_and_trusted_ones_root_s) {
  ASSERT_EQ(d_.start({"--no-compress", "--allow-other"}), "");
  fs::path const f = mnt() / "f";
  write_file(f, "x");
  // Names of 200 bytes until there is no room (ENOSPC, as on ext4): the
  // list still fits listxattr's 64 KiB, so cp -a and getfattr -d still work.
  int added = 0;
  for (;; ++added) {
    std::string name = "user." + std::to_string(added) + "-";
    name.resize(200, 'n');
    if (::setxattr(f.c_str(), name.c_str(), "v", 1, 0) != 0) {
      EXPECT_EQ(errno, ENOSPC);
      break;
    }
    ASSERT_LT(added, 1000);
  }
  EXPECT_GT(added, 250);
  ssize_t const listed = ::listxattr(f.c_str(), nullptr, 0);
  EXPECT_GT(listed, 0) << std::strerror(errno);
  EXPECT_LE(listed, 65536);
  std::vector<char> names(static_cast<size_t>(std::max<ssize_t>(listed, 0)));
  EXPECT_EQ(::listxattr(f.c_str(), names.data(), names.size()), listed);
  // Replacing one is still allowed; so are values up to the total.
  std::string const first = [] {
    std::string n = "user.0-";
    n.resize(200, 'n');
    return n;
  }();
  EXPECT_EQ(::setxattr(f.c_str(), first.c_str(), "w", 1, XATTR_REPLACE), 0);

  if (::geteuid() != 0 || !fs::exists("/usr/bin/setpriv")) return;
  fs::permissions(dir_.path(), fs::perms(0755));
  write_file(mnt() / "g", "y");
  fs::permissions(mnt() / "g", fs::perms(0644));
  ASSERT_EQ(::setxattr((mnt() / "g").c_str(), "trusted.secret", "s", 1, 0), 0);
  ASSERT_EQ(::setxattr((mnt() / "g").c_str(), "user.open", "o", 1, 0), 0);
  std::string const list_py =
      "import os,sys; print(sorted(os.listxattr(sys.argv[1])))";
  run_result r =
      as_nobody({"/usr/bin/python3", "-c", list_py, (mnt() / "g").string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("trusted."), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("user.open"), std::string::npos) << r.out;
  r = run_program({"/usr/bin/python3", "-c", list_py, (mnt() / "g").string()});
  EXPECT_NE(r.out.find("trusted.secret"), std::string::npos) << r.out;
}

// cp -a and cp --preserve=xattr, in, out and within the mount, copy the
// user's own attributes and leave the mount's user.brevis.* ones behind
// (scripts/setup.sh's /etc/xattr.conf entry): copied out they would go
// stale, and copied in they cannot be set.
TEST_F(mount_edge, copies_keep_user_attributes_and_leave_the_mounts_behind) {
  if (read_file("/etc/xattr.conf").find("user.brevis.*") == std::string::npos) {
    GTEST_FAIL() << "/etc/xattr.conf has no user.brevis.* entry: run "
                    "scripts/setup.sh";
  }
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  fs::path const f = mnt() / "f";
  write_file(
      f, make_safetensors({{"w", "BF16", {50000}, bf16_weights(50000, 5)}}));
  ASSERT_TRUE(wait_compressed({f}));
  ASSERT_EQ(::setxattr(f.c_str(), "user.note", "kept", 4, 0), 0);
  fs::path const out = dir_.path() / "out";
  fs::create_directory(out);
  auto names = [](fs::path const& p) {
    std::vector<char> buf(4096);
    ssize_t const n = ::listxattr(p.c_str(), buf.data(), buf.size());
    std::string all(buf.data(), static_cast<size_t>(std::max<ssize_t>(n, 0)));
    std::replace(all.begin(), all.end(), '\0', ' ');
    return all;
  };
  struct copy {
    std::vector<std::string> flags;
    fs::path from, to;
  };
  for (copy const& c :
       {copy{{"-a"}, f, out / "a"}, copy{{"--preserve=xattr"}, f, out / "x"},
        copy{{"-a"}, f, mnt() / "within"},
        copy{{"-a"}, out / "a", mnt() / "in"}}) {
    std::vector<std::string> argv{"/usr/bin/cp"};
    argv.insert(argv.end(), c.flags.begin(), c.flags.end());
    argv.push_back(c.from.string());
    argv.push_back(c.to.string());
    run_result const r = run_program(argv);
    EXPECT_EQ(r.exit_code, 0) << c.to << ": " << r.err;
    EXPECT_EQ(r.err, "") << c.to;
    EXPECT_TRUE(read_file(c.to) == read_file(f)) << c.to;
    std::string const listed = names(c.to);
    EXPECT_NE(listed.find("user.note"), std::string::npos) << c.to << listed;
    bool const in_mount = c.to.parent_path() == mnt();
    // In the mount, a file lists its own state; out of it, none.
    EXPECT_EQ(listed.find("user.brevis.") != std::string::npos, in_mount)
        << c.to << ": " << listed;
  }
}

// Sets /proc/sys/fs/pipe-max-size for its lifetime (root only).
class pipe_max_size {
 public:
  explicit pipe_max_size(std::string const& value) {
    old_ = read_file(path_);
    std::ofstream(path_) << value;
    ok_ = read_file(path_) == value + "\n";
  }
  ~pipe_max_size() { std::ofstream(path_) << old_; }
  bool ok() const { return ok_; }

 private:
  fs::path const path_ = "/proc/sys/fs/pipe-max-size";
  std::string old_;
  bool ok_ = false;
};

// Staged files through splice: with a pipe that holds a 1 MiB request,
// libfuse splices WRITE requests into our write_buf and READ replies from
// the staged copy's descriptor. Every size and offset reads back exactly,
// and past the end reads short.
TEST_F(mount_edge, staged_files_read_and_write_spliced) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root (pipe-max-size)";
  pipe_max_size const big("2097152");
  if (!big.ok()) GTEST_SKIP() << "pipe-max-size cannot be raised here";
  ASSERT_EQ(d_.start({"--no-compress"}), "");
  std::map<std::string, std::string> files;
  uint64_t seed = 1;
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{8191}, size_t{8193}, size_t{(1 << 20) - 1},
        size_t{(1 << 20) + 1}, size_t{(3 << 20) + 17}}) {
    std::string const name = "f" + std::to_string(size);
    files[name] = random_bytes(size, seed++);
    // Written in 1 MiB + 5 pieces, so requests straddle the pages.
    int const fd = ::open((mnt() / name).c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    std::string const& data = files[name];
    for (size_t at = 0; at < data.size(); at += (1 << 20) + 5) {
      size_t const n = std::min(data.size() - at, size_t{(1 << 20) + 5});
      ASSERT_EQ(::pwrite(fd, data.data() + at, n, static_cast<off_t>(at)),
                static_cast<ssize_t>(n));
    }
    ASSERT_EQ(::close(fd), 0);
  }
  for (auto const& [name, data] : files) {
    int const fd = ::open((mnt() / name).c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    // Out of the kernel's cache, so reads reach the daemon.
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    EXPECT_EQ(pread_at(fd, 0, data.size() + 4096), data) << name;
    ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
    for (size_t at : {size_t{0}, size_t{4095}, data.size() / 2,
                      data.size() > 3 ? data.size() - 3 : size_t{0}}) {
      EXPECT_EQ(pread_at(fd, static_cast<off_t>(at), 1 << 20),
                data.substr(std::min(at, data.size()), 1 << 20))
          << name << " at " << at;
    }
    ::close(fd);
  }
  remount({"--no-compress"});
  for (auto const& [name, data] : files) {
    EXPECT_EQ(read_file(mnt() / name), data) << name;
  }
  fsck_clean();
}

std::vector<std::string> names_in(DIR* d) {
  std::vector<std::string> v;
  while (dirent const* e = ::readdir(d)) v.emplace_back(e->d_name);
  std::sort(v.begin(), v.end());
  return v;
}

TEST_F(mount_edge, directory_listings_follow_the_directory) {
  ASSERT_EQ(d_.start({"--no-compress"}), "");
  fs::path const dir = mnt() / "d";
  fs::create_directory(dir);
  write_file(dir / "old", "o");
  write_file(dir / "log", "l");
  DIR* d = ::opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(names_in(d), (std::vector<std::string>{".", "..", "log", "old"}));
  // rewinddir lists the directory as it is now.
  write_file(dir / "new", "n");
  fs::remove(dir / "old");
  ::rewinddir(d);
  EXPECT_EQ(names_in(d), (std::vector<std::string>{".", "..", "log", "new"}));
  ::closedir(d);
  // A name removed between opendir and the reading is not handed back to
  // the kernel as cached: it can be created again at once (log rotation).
  d = ::opendir(dir.c_str());
  ASSERT_NE(d, nullptr);
  fs::remove(dir / "log");
  (void)names_in(d);
  struct stat st {};
  EXPECT_NE(::stat((dir / "log").c_str(), &st), 0);
  int const fd =
      ::open((dir / "log").c_str(), O_CREAT | O_WRONLY | O_APPEND, 0644);
  EXPECT_GE(fd, 0) << std::strerror(errno);
  if (fd >= 0) ::close(fd);
  ::closedir(d);
  EXPECT_TRUE(fs::exists(dir / "log"));
  fsck_clean();
}

TEST_F(mount_edge, setgid_directories_hand_down_their_group) {
  ASSERT_EQ(d_.start({"--no-compress"}), "");
  fs::path const dir = mnt() / "shared";
  fs::create_directory(dir);
  gid_t const group = ::getgid() == 65534 ? 65533 : 65534;
  ASSERT_EQ(::chown(dir.c_str(), ::getuid(), group), 0) << std::strerror(errno);
  ASSERT_EQ(::chmod(dir.c_str(), 02775), 0);
  write_file(dir / "f", "f");
  fs::create_directory(dir / "sub");
  fs::create_symlink("f", dir / "l");
  struct stat st {};
  ASSERT_EQ(::stat((dir / "f").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, group);
  EXPECT_EQ(st.st_mode & S_ISGID, 0u);
  ASSERT_EQ(::stat((dir / "sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, group);
  EXPECT_NE(st.st_mode & S_ISGID, 0u);  // subdirectories pass it on
  ASSERT_EQ(::lstat((dir / "l").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, group);
  // Elsewhere, the creator's group.
  write_file(mnt() / "plain", "p");
  ASSERT_EQ(::stat((mnt() / "plain").c_str(), &st), 0);
  EXPECT_EQ(st.st_gid, ::getgid());
  fsck_clean();
}

TEST_F(mount_edge, names_past_name_max_are_too_long) {
  ASSERT_EQ(d_.start({"--no-compress"}), "");
  write_file(mnt() / "f", "f");
  std::string const longest(NAME_MAX, 'n');
  std::string const past = (mnt() / std::string(NAME_MAX + 1, 'n')).string();
  write_file(mnt() / longest, "ok");
  EXPECT_EQ(read_file(mnt() / longest), "ok");
  auto too_long = [](int rc) { return rc < 0 && errno == ENAMETOOLONG; };
  struct stat st {};
  EXPECT_TRUE(too_long(::stat(past.c_str(), &st)));
  EXPECT_TRUE(too_long(::mkdir(past.c_str(), 0755)));
  EXPECT_TRUE(too_long(::open(past.c_str(), O_CREAT | O_WRONLY, 0644)));
  EXPECT_TRUE(too_long(::symlink("f", past.c_str())));
  EXPECT_TRUE(too_long(::link((mnt() / "f").c_str(), past.c_str())));
  EXPECT_TRUE(too_long(::rename((mnt() / "f").c_str(), past.c_str())));
  EXPECT_TRUE(too_long(::unlink(past.c_str())));
  EXPECT_EQ(read_file(mnt() / "f"), "f");
  fsck_clean();
}

// FIFOs and sockets (mkfifo, mknod, a Unix socket's bind) are made, carry
// data between processes through the kernel, take a hard link, a rename
// and an unlink, and survive a remount; device nodes are refused (EPERM):
// the mount is nodev, and their numbers are not kept.
TEST_F(mount_edge, fifos_and_sockets) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  fs::path const fifo = mnt() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0640), 0) << std::strerror(errno);
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_uid, ::getuid());
  EXPECT_EQ(st.st_size, 0);
  std::string got;
  std::thread reader([&] { got = read_file(fifo); });
  {
    int const w = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    ASSERT_GE(w, 0) << std::strerror(errno);
    EXPECT_EQ(::write(w, "through the pipe", 16), 16);
    ::close(w);
  }
  reader.join();
  EXPECT_EQ(got, "through the pipe");

  ASSERT_EQ(::link(fifo.c_str(), (mnt() / "fifo2").c_str()), 0);
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 2u);
  ASSERT_EQ(::rename(fifo.c_str(), (mnt() / "fifo3").c_str()), 0);
  ASSERT_EQ(::unlink((mnt() / "fifo2").c_str()), 0);

  fs::path const sock = mnt() / "sock";
  ASSERT_EQ(::mknod(sock.c_str(), S_IFSOCK | 0600, 0), 0)
      << std::strerror(errno);
  int const s = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(s, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::string const bound = (mnt() / "bound").string();
  ASSERT_LT(bound.size(), sizeof addr.sun_path);
  std::copy_n(bound.c_str(), bound.size() + 1, std::begin(addr.sun_path));
  EXPECT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
      << std::strerror(errno);
  ::close(s);
  EXPECT_NE(::mknod((mnt() / "dev").c_str(), S_IFCHR | 0600, makedev(1, 3)), 0);
  EXPECT_EQ(errno, EPERM);

  remount({"--quiet-ms", "0"});
  ASSERT_EQ(::stat((mnt() / "fifo3").c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_nlink, 1u);
  EXPECT_FALSE(fs::exists(mnt() / "fifo") || fs::exists(mnt() / "fifo2"));
  ASSERT_EQ(::stat(sock.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  ASSERT_EQ(::stat(bound.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_FALSE(fs::exists(mnt() / "dev"));
  for (char const* n : {"fifo3", "sock", "bound"}) {
    EXPECT_EQ(::unlink((mnt() / n).c_str()), 0) << n;
  }
  fsck_clean();
}

// A directory, FIFO, symlink or file whose last name goes while a process
// holds it (an O_PATH descriptor for the file, which the mount never sees
// opened) behaves as on a local filesystem: fstat says nlink 0 (it said
// ENOENT), a removed directory lists empty, also as the cwd, and nothing can
// be made in it; the FIFO still carries data. Once let go, nothing is left.
TEST_F(mount_edge, removed_inodes_still_held) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  fs::path const dir = mnt() / "d";
  ASSERT_EQ(::mkdir(dir.c_str(), 0750), 0);
  int const dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0) << std::strerror(errno);
  ASSERT_EQ(::rmdir(dir.c_str()), 0);
  struct stat st {};
  ASSERT_EQ(::fstat(dfd, &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(st.st_mode & 07777, 0750u);
  DIR* listing = ::fdopendir(::dup(dfd));
  ASSERT_NE(listing, nullptr) << std::strerror(errno);
  errno = 0;
  EXPECT_EQ(::readdir(listing), nullptr);
  EXPECT_EQ(errno, 0) << std::strerror(errno);
  ::closedir(listing);
  EXPECT_LT(::openat(dfd, "x", O_CREAT | O_WRONLY | O_CLOEXEC, 0600), 0);
  EXPECT_EQ(errno, ENOENT);
  EXPECT_EQ(::fchmod(dfd, 0700), 0) << std::strerror(errno);
  ASSERT_EQ(::fstat(dfd, &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ::close(dfd);

  int const here = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(here, 0);
  fs::path const cwd = mnt() / "cwd";
  ASSERT_EQ(::mkdir(cwd.c_str(), 0755), 0);
  ASSERT_EQ(::chdir(cwd.c_str()), 0);
  ASSERT_EQ(::rmdir(cwd.c_str()), 0);
  EXPECT_EQ(::stat(".", &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_nlink, 0u);
  DIR* in_cwd = ::opendir(".");
  EXPECT_NE(in_cwd, nullptr) << std::strerror(errno);
  if (in_cwd) {
    EXPECT_EQ(::readdir(in_cwd), nullptr);
    ::closedir(in_cwd);
  }
  ASSERT_EQ(::fchdir(here), 0);
  ::close(here);

  fs::path const fifo = mnt() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  int const r = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(r, 0) << std::strerror(errno);
  int const w = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
  ASSERT_GE(w, 0) << std::strerror(errno);
  ASSERT_EQ(::unlink(fifo.c_str()), 0);
  ASSERT_EQ(::fstat(w, &st), 0) << std::strerror(errno);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(::write(w, "still", 5), 5);
  char buf[8] = {};
  EXPECT_EQ(::read(r, buf, sizeof buf), 5);
  EXPECT_EQ(std::string(buf, 5), "still");
  ::close(w);
  ::close(r);

  // fstat through an O_PATH descriptor (the mount never sees it opened)
  // of `p`, unlinked after it was taken.
  auto fstat_after_unlink = [&](fs::path const& p) {
    int const fd = ::open(p.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    EXPECT_EQ(::unlink(p.c_str()), 0);
    bool const ok = ::fstat(fd, &st) == 0;
    EXPECT_TRUE(ok) << std::strerror(errno);
    ::close(fd);
    return ok;
  };
  fs::path const link = mnt() / "link";
  ASSERT_EQ(::symlink("somewhere", link.c_str()), 0);
  ASSERT_TRUE(fstat_after_unlink(link));
  EXPECT_TRUE(S_ISLNK(st.st_mode));
  EXPECT_EQ(st.st_nlink, 0u);

  fs::path const file = mnt() / "file";
  write_file(file, "bytes");
  ASSERT_TRUE(fstat_after_unlink(file));
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_nlink, 0u);
  EXPECT_EQ(st.st_size, 5);

  // Open through the mount when unlinked (kept whole until its release),
  // then let go while an O_PATH descriptor still holds it.
  fs::path const held = mnt() / "held";
  write_file(held, "bytes");
  int const hfd = ::open(held.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(hfd, 0) << std::strerror(errno);
  int const hpath = ::open(held.c_str(), O_PATH | O_CLOEXEC);
  ASSERT_GE(hpath, 0) << std::strerror(errno);
  ASSERT_EQ(::unlink(held.c_str()), 0);
  ::close(hfd);
  std::this_thread::sleep_for(1500ms);  // past the kernel's attribute cache
  ASSERT_EQ(::fstat(hpath, &st), 0) << std::strerror(errno);
  EXPECT_EQ(st.st_nlink, 0u);
  ::close(hpath);

  for (fs::path const& p : {dir, cwd, fifo, link, file, held}) {
    EXPECT_FALSE(fs::exists(fs::symlink_status(p))) << p;
  }
  fsck_clean();
}

// Checkpoint writers save by writing a temporary and renaming it over the
// name. A reader opening, stat-ing or reading the xattrs of that name
// meanwhile finds the old file or the new one, never ENOENT: the kernel,
// still holding the replaced inode, got ENOENT for it (now ESTALE, on which
// it looks the name up again).
TEST_F(mount_edge, a_name_replaced_by_rename_never_looks_missing) {
  ASSERT_EQ(d_.start({"--quiet-ms", "200"}), "");
  fs::path const target = mnt() / "ckpt";
  fs::path const tmp = mnt() / "ckpt.tmp";
  write_file(target, std::string(5000, 'A'));
  std::atomic<bool> stop{false};
  std::atomic<int> renames{0}, opens{0}, missing{0}, wrong{0};
  std::thread writer([&] {
    for (int i = 0; !stop; ++i) {
      write_file(tmp, std::string(7000, i % 2 ? 'B' : 'C'));
      if (::rename(tmp.c_str(), target.c_str()) == 0) ++renames;
    }
  });
  std::vector<std::thread> readers;
  for (int k = 0; k < 3; ++k) {
    readers.emplace_back([&, k] {
      while (!stop) {
        if (k == 2) {
          struct stat st {};
          char v[64];
          if ((::stat(target.c_str(), &st) != 0 && errno == ENOENT) ||
              (::getxattr(target.c_str(), "user.brevis.state", v, sizeof v) <
                   0 &&
               errno == ENOENT)) {
            ++missing;
          }
          continue;
        }
        int const fd =
            ::open(target.c_str(), (k == 0 ? O_RDONLY : O_RDWR) | O_CLOEXEC);
        if (fd < 0) {
          if (errno == ENOENT) ++missing;
          continue;
        }
        std::string const got = pread_at(fd, 0, 8000);
        ::close(fd);
        ++opens;
        bool const whole = (got.size() == 5000 || got.size() == 7000) &&
                           got.find_first_not_of(got.empty() ? 'A' : got[0]) ==
                               std::string::npos;
        if (!whole) ++wrong;
      }
    });
  }
  std::this_thread::sleep_for(4s);
  stop = true;
  writer.join();
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(missing.load(), 0) << renames.load() << " renames";
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(renames.load(), 10);
  EXPECT_GT(opens.load(), 100);
  fsck_clean();
}

// A process that looked a name up before a rename replaced its file opens
// the file it found, as on a local filesystem: here re-opened through
// /proc/self/fd from an O_PATH descriptor, with no name to look up again.
// It was ESTALE (the file dropped at the rename), and an open racing two
// renames returned that to its caller (a CI run of mount_stress). Let go,
// the file goes; still held at the stop, it goes with the mount.
TEST_F(mount_edge, a_file_replaced_while_held_still_opens) {
  // Quiet long enough that the second file is replaced staged.
  ASSERT_EQ(d_.start({"--quiet-ms", "1500"}), "");
  auto open_again = [](int path_fd, int flags) {
    std::string const proc = "/proc/self/fd/" + std::to_string(path_fd);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
    return ::open(proc.c_str(), flags | O_CLOEXEC);
  };
  auto still_kept = [&] {
    run_result const r = brevis({"fsck", d_.store().string()});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return r.out.find("still open on the live mount") != std::string::npos;
  };
  fs::path const target = mnt() / "ckpt";
  fs::path const tmp = mnt() / "ckpt.tmp";
  write_file(target, "compressed, then replaced");
  ASSERT_TRUE(wait_compressed({target}));
  int held_at_stop = -1;
  ino_t staged_ino = 0;
  for (int round = 0; round < 2; ++round) {
    std::string const old =
        round == 0 ? "compressed, then replaced" : "staged, then replaced";
    if (round == 1) write_file(target, old);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
    int const held = ::open(target.c_str(), O_PATH | O_CLOEXEC);
    ASSERT_GE(held, 0) << std::strerror(errno);
    struct stat st {};
    ASSERT_EQ(::fstat(held, &st), 0) << std::strerror(errno);
    if (round == 1) {
      staged_ino = st.st_ino;
      ASSERT_TRUE(
          fs::exists(d_.store() / "staging" / std::to_string(staged_ino)));
    }
    write_file(tmp, "new " + std::to_string(round));
    ASSERT_EQ(::rename(tmp.c_str(), target.c_str()), 0);
    for (int twice = 0; twice < 2; ++twice) {  // a release keeps it too
      int const fd = open_again(held, O_RDONLY);
      ASSERT_GE(fd, 0) << std::strerror(errno);
      ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
      EXPECT_EQ(pread_at(fd, 0, 100), old);
      ::close(fd);
    }
    EXPECT_EQ(read_file(target), "new " + std::to_string(round));
    EXPECT_TRUE(still_kept());
    if (round == 1) {
      held_at_stop = held;
      break;
    }
    ::close(held);
    auto const end = std::chrono::steady_clock::now() + 10s;
    while (still_kept() && std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(50ms);
    }
    EXPECT_FALSE(still_kept()) << "let go, the replaced file stayed";
  }
  fsck_clean();
  // Staged copies are named by inode number (the mount's st_ino).
  EXPECT_FALSE(fs::exists(d_.store() / "staging" / std::to_string(staged_ino)))
      << "the replaced file's staged copy was left behind";
  ::close(held_at_stop);
}

// fsync and fdatasync of a file open for writing, of a compressed file and
// of a directory succeed, and a file synced while still open comes back
// whole after the daemon is killed (SIGKILL) and the store mounted again:
// what a synced writer may count on short of a power cut (which a test
// cannot make; fsync also syncs the copy's entry in staging/ for that).
TEST_F(mount_edge, a_synced_open_file_survives_a_killed_daemon) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  std::string const data =
      make_safetensors({{"w", "BF16", {100000}, bf16_weights(100000, 5)}});
  write_file(mnt() / "c", data);
  ASSERT_TRUE(wait_compressed({mnt() / "c"})) << d_.log();
  int const cfd = ::open((mnt() / "c").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(cfd, 0);
  EXPECT_EQ(::fsync(cfd), 0) << std::strerror(errno);
  ::close(cfd);
  int const dfd = ::open(mnt().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(dfd, 0);
  EXPECT_EQ(::fsync(dfd), 0) << std::strerror(errno);
  ::close(dfd);

  int const fd =
      ::open((mnt() / "s").c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  ASSERT_EQ(::write(fd, data.data(), data.size()),
            static_cast<ssize_t>(data.size()));
  EXPECT_EQ(::fdatasync(fd), 0) << std::strerror(errno);
  EXPECT_EQ(::fsync(fd), 0) << std::strerror(errno);
  d_.kill9();
  ::close(fd);  // on a dead mount: its error does not matter
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  EXPECT_TRUE(read_file(mnt() / "s") == data);
  EXPECT_TRUE(read_file(mnt() / "c") == data);
  fsck_clean();
}

// fsck of a live mount: a compressed file unlinked while a reader holds it
// open is the mount's orphan, not damage. fsck keeps it (--repair used to
// drop it, and the reader's next read failed).
TEST_F(mount_edge, fsck_of_a_live_mount_keeps_files_unlinked_while_open) {
  ASSERT_EQ(d_.start({"--quiet-ms", "50"}), "");
  std::string const data =
      make_safetensors({{"w", "BF16", {300000}, bf16_weights(300000, 11)}});
  write_file(mnt() / "g", data);
  ASSERT_TRUE(wait_compressed({mnt() / "g"}));
  int const fd = ::open((mnt() / "g").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  fs::remove(mnt() / "g");
  for (char const* mode : {"", "--repair"}) {
    std::vector<std::string> args = {"fsck", d_.store().string()};
    if (*mode) args.emplace_back(mode);
    run_result const r = brevis(args);
    EXPECT_EQ(r.exit_code, 0) << mode << r.out << r.err;
    EXPECT_EQ(r.out.find("problem:"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("removed"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("still open on the live mount"), std::string::npos)
        << r.out;
  }
  // Read back whole through the descriptor, past any cached pages.
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  EXPECT_EQ(pread_at(fd, 0, data.size()), data);
  ::close(fd);
  // The kernel sends the last release without waiting for it, so the orphan
  // may outlive this mount; the next mount drops it before anything else.
  remount({"--quiet-ms", "50"});
  fsck_clean();
}

// A file unlinked while open when the mount stops: its last release never
// comes (the session is over, and the kernel does not wait for a release
// anyway), so the stop releases it, dropping the orphan. An offline fsck
// found it with no directory entry (a CI run of
// a_name_replaced_by_rename_never_looks_missing).
TEST_F(mount_edge, an_orphan_open_at_the_stop_goes_with_the_mount) {
  ASSERT_EQ(d_.start({"--quiet-ms", "50"}), "");
  write_file(mnt() / "o", std::string(3000, 'o'));
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): open(2)
  int const fd = ::open((mnt() / "o").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  fs::remove(mnt() / "o");
  ASSERT_EQ(d_.stop(SIGTERM), 0) << d_.log();
  run_result const r = brevis({"fsck", d_.store().string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("problem:"), std::string::npos) << r.out;
  EXPECT_NE(d_.log().find("files released at the stop"), std::string::npos)
      << d_.log();
  ::close(fd);  // the connection is gone: nothing reaches the store
  fs::path const staging = d_.store() / "staging";
  EXPECT_TRUE(fs::is_empty(staging)) << "a staged copy was left behind";
}

// A writer still holding its file when the mount is told to stop: what its
// write(2)s handed to the kernel's page cache (the writeback cache) is
// written back before the session ends, and recorded, instead of being
// thrown away with the connection (the file read back empty: a stop/kill
// probe). A second signal would stop at once.
TEST_F(mount_edge, a_stop_keeps_what_a_writer_still_open_has_written) {
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  std::string const data(300000, 'h');
  // NOLINTBEGIN(cppcoreguidelines-pro-type-vararg): open(2)
  int const fd =
      ::open((mnt() / "held").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  // NOLINTEND(cppcoreguidelines-pro-type-vararg)
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::write(fd, data.data(), data.size()),
            static_cast<ssize_t>(data.size()));
  ASSERT_EQ(d_.stop(SIGTERM), 0) << d_.log();
  ::close(fd);  // the connection is gone
  EXPECT_NE(d_.log().find("writes back what it holds"), std::string::npos)
      << d_.log();
  ASSERT_EQ(d_.start({"--quiet-ms", "0"}), "");
  std::string const got = read_file(mnt() / "held");
  EXPECT_EQ(got.size(), data.size()) << d_.log();
  EXPECT_TRUE(got == data);
  fsck_clean();
}

// The packs a gc beside the mount removes: the daemon lets go of their
// descriptors when it next reports free space (df) or opens a pack, so
// their space comes back, and what moved still reads back.
TEST_F(mount_edge, gc_beside_the_mount_frees_the_packs_it_removes) {
  ASSERT_EQ(d_.start({"--quiet-ms", "50"}), "");
  std::string const a =
      make_safetensors({{"w", "BF16", {300000}, bf16_weights(300000, 21)}});
  std::string const b =
      make_safetensors({{"w", "BF16", {300000}, bf16_weights(300000, 22)}});
  write_file(mnt() / "a", a);
  write_file(mnt() / "b", b);
  ASSERT_TRUE(wait_compressed({mnt() / "a", mnt() / "b"}));
  auto removed_packs_held = [&] {
    int n = 0;
    fs::path const fds = "/proc/" + std::to_string(d_.pid()) + "/fd";
    for (auto const& e : fs::directory_iterator(fds)) {
      std::error_code ec;
      std::string const target = fs::read_symlink(e.path(), ec).string();
      n += target.find(".pack (deleted)") != std::string::npos;
    }
    return n;
  };
  // The daemon reads a and b from the pack (caches dropped first).
  int fd = ::open((mnt() / "b").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0);
  EXPECT_EQ(pread_at(fd, 0, b.size()), b);
  ::close(fd);
  fs::remove(mnt() / "a");
  run_result const r =
      brevis({"gc", d_.store().string(), "--threshold", "0.9"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 packs rewritten"), std::string::npos) << r.out;
  EXPECT_GT(removed_packs_held(), 0);  // the case in question
  struct statvfs sv {};
  ASSERT_EQ(::statvfs(mnt().c_str(), &sv), 0);
  EXPECT_EQ(removed_packs_held(), 0);
  EXPECT_EQ(read_file(mnt() / "b"), b);
  fsck_clean();
}

// A reopen for writing takes a queued file off the queue; one that fails
// (here: the staged copy swapped for a link, which the mount will not
// follow) wrote nothing, so the file goes back on the queue rather than
// staying uncompressed until the next mount. So does a failed truncate.
TEST_F(mount_edge, a_failed_reopen_leaves_a_queued_file_queued) {
  ASSERT_EQ(d_.start({"--quiet-ms", "600000"}), "");
  std::string const data =
      make_safetensors({{"w", "BF16", {30000}, bf16_weights(30000, 25)}});
  write_file(mnt() / "f", data);
  // The kernel sends the release after close() returned.
  for (int i = 0; i < 500 && brevis_state(mnt() / "f") != "queued"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ASSERT_EQ(brevis_state(mnt() / "f"), "queued");
  struct stat st {};
  ASSERT_EQ(::stat((mnt() / "f").c_str(), &st), 0);
  fs::path const staged = d_.store() / "staging" / std::to_string(st.st_ino);
  fs::path const aside = d_.store() / "aside";
  fs::rename(staged, aside);
  fs::create_symlink(aside, staged);
  int const fd = ::open((mnt() / "f").c_str(), O_WRONLY);
  EXPECT_LT(fd, 0);
  if (fd >= 0) ::close(fd);
  EXPECT_EQ(brevis_state(mnt() / "f"), "queued");
  EXPECT_NE(::truncate((mnt() / "f").c_str(), 10), 0);
  EXPECT_EQ(brevis_state(mnt() / "f"), "queued");
  fs::remove(staged);
  fs::rename(aside, staged);
  EXPECT_EQ(read_file(mnt() / "f"), data);
  fsck_clean();
}

// rm gives the space back without gc: a removed file's payloads are punched
// out of their pack a few seconds later (FORMAT.md S.2.1), and the file
// left reads back, after a remount too.
TEST_F(mount_edge, removing_a_file_frees_its_space_without_gc) {
  ASSERT_EQ(d_.start({"--quiet-ms", "50"}), "");
  std::string const a =
      make_safetensors({{"w", "BF16", {300000}, bf16_weights(300000, 23)}});
  std::string const b =
      make_safetensors({{"w", "BF16", {300000}, bf16_weights(300000, 24)}});
  write_file(mnt() / "a", a);
  write_file(mnt() / "b", b);
  ASSERT_TRUE(wait_compressed({mnt() / "a", mnt() / "b"}));
  auto pack_disk_bytes = [&] {
    return disk_bytes_of_files(d_.store() / "packs");
  };
  uint64_t const before = pack_disk_bytes();
  fs::remove(mnt() / "a");
  // The mount waits 5 s before punching (reads in flight finish first).
  for (int i = 0; i < 300 && pack_disk_bytes() > before * 3 / 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_LE(pack_disk_bytes(), before * 3 / 4);  // a was half of it
  EXPECT_EQ(read_file(mnt() / "b"), b);
  fsck_clean();  // unmounts
  std::string const log = d_.log();
  size_t const at = log.find("space given back: ");
  ASSERT_NE(at, std::string::npos) << log;
  EXPECT_GT(std::stoul(log.substr(at + 18)), 0u) << log;  // records punched
  ASSERT_EQ(d_.start({"--quiet-ms", "50"}), "");
  EXPECT_EQ(read_file(mnt() / "b"), b);
  fsck_clean();
}

// Damage found by a read (here a pack gone from under a compressed file)
// is EIO for the reader, never zeros or ESTALE, and a line in the mount's
// --log, which a daemon's stderr is not; the mount keeps serving.
TEST_F(mount_edge, damage_is_eio_and_goes_to_the_log) {
  fs::path const events = dir_ / "events.log";
  std::vector<std::string> const args = {"--quiet-ms", "50", "--log",
                                         events.string()};
  ASSERT_EQ(d_.start(args), "");
  std::string const a =
      make_safetensors({{"w", "BF16", {300000}, bf16_weights(300000, 23)}});
  write_file(mnt() / "a", a);
  ASSERT_TRUE(wait_compressed({mnt() / "a"}));
  ASSERT_EQ(d_.stop(SIGTERM), 0) << d_.log();
  for (auto const& e : fs::directory_iterator(d_.store() / "packs")) {
    fs::remove(e.path());
  }
  ASSERT_EQ(d_.start(args), "");
  int const fd = ::open((mnt() / "a").c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  std::string buf(a.size(), '\0');
  errno = 0;
  EXPECT_EQ(::pread(fd, buf.data(), buf.size(), 0), -1);
  EXPECT_EQ(errno, EIO);
  ::close(fd);
  write_file(mnt() / "b", "still serving");
  EXPECT_EQ(read_file(mnt() / "b"), "still serving");
  std::string const log = read_file(events);
  EXPECT_NE(log.find("error: read: "), std::string::npos) << log;
  EXPECT_NE(log.find("no such pack"), std::string::npos) << log;
}

}  // namespace
}  // namespace brevis::cli_test
