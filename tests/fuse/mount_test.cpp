// The mount end to end: the real binary serves a temporary store on a
// temporary directory (-f, in the background); files go in with cp, come
// back byte for byte while staged, after compression and after a remount,
// and load in numpy/torch exactly as the originals do. Skipped when
// /dev/fuse cannot be used. Every test unmounts in teardown.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>

#include "tests/cli/helpers.h"

namespace brevis::cli_test {
namespace {

using namespace std::chrono_literals;

bool fuse_usable() {
  int fd = ::open("/dev/fuse", O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  ::close(fd);
  return fs::exists("/usr/bin/fusermount3") || fs::exists("/bin/fusermount3");
}

std::string xattr(fs::path const& p, char const* name) {
  char buf[256];
  ssize_t n = ::getxattr(p.c_str(), name, buf, sizeof buf);
  return n < 0 ? std::string() : std::string(buf, static_cast<size_t>(n));
}

// How long the kernel trusts a file's cached attributes (attr_timeout in
// fs/fuse/ops.cpp).
constexpr auto attr_cache = std::chrono::milliseconds(1000);

// A file's st_blocks fetched from the daemon past the kernel's cache, which
// it fills again; -1 if statx fails.
int64_t blocks_from_daemon(fs::path const& f) {
  struct statx sx {};
  if (::statx(AT_FDCWD, f.c_str(), AT_STATX_FORCE_SYNC, STATX_BLOCKS, &sx) !=
      0) {
    return -1;
  }
  return static_cast<int64_t>(sx.stx_blocks);
}

class mount_test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fuse_usable()) GTEST_SKIP() << "/dev/fuse is not usable here";
    fs::create_directories(mnt());
  }

  void TearDown() override {
    if (pid_ > 0) {
      // Never leave a mount behind, whatever the test did.
      run_program({"/usr/bin/fusermount3", "-u", "-z", mnt().string()});
      stop(SIGTERM);
    }
  }

  fs::path store() const { return dir_ / "store"; }
  fs::path mnt() const { return dir_ / "mnt"; }

  /// Starts `brevis mount -f` and waits until the mount is there.
  void mount(unsigned quiet_ms = 50) {
    std::vector<std::string> argv = {
        brevis_binary(),          "mount",          "-f",          "--quiet-ms",
        std::to_string(quiet_ms), store().string(), mnt().string()};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    std::string const log = (dir_ / "mount.log").string();
    posix_spawn_file_actions_addopen(&fa, 2, log.c_str(),
                                     O_WRONLY | O_CREAT | O_APPEND, 0644);
    ASSERT_EQ(posix_spawn(&pid_, args[0], &fa, nullptr, args.data(), environ),
              0);
    posix_spawn_file_actions_destroy(&fa);
    struct stat parent {};
    ::stat(dir_.path().c_str(), &parent);
    for (int i = 0; i < 200; ++i) {
      struct stat st {};
      if (::stat(mnt().c_str(), &st) == 0 && st.st_dev != parent.st_dev) {
        return;
      }
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        FAIL() << "mount exited: " << read_file(dir_ / "mount.log");
      }
      std::this_thread::sleep_for(50ms);
    }
    FAIL() << "mount did not appear";
  }

  /// Sends `sig` (or unmounts with `brevis unmount` when 0) and returns
  /// the daemon's exit code.
  int stop(int sig) {
    if (pid_ <= 0) return -1;
    if (sig == 0) {
      EXPECT_EQ(brevis({"unmount", mnt().string()}).exit_code, 0);
    } else {
      ::kill(pid_, sig);
    }
    int status = 0;
    for (int i = 0; i < 600; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        int const code =
            WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        if (code != 0) ADD_FAILURE() << read_file(dir_ / "mount.log");
        return code;
      }
      std::this_thread::sleep_for(50ms);
    }
    ::kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return -1;
  }

  /// Waits until every file's state is `want`.
  bool wait_state(std::vector<fs::path> const& files, std::string const& want,
                  std::chrono::seconds limit = 60s) {
    auto const end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      bool all = true;
      for (auto const& f : files) all &= xattr(f, "user.brevis.state") == want;
      if (all) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  temp_dir dir_;
  pid_t pid_ = -1;
};

std::string sample_safetensors(uint64_t seed) {
  return make_safetensors(
      {{"w", "BF16", {64, 1024}, bf16_weights(64 * 1024, seed)},
       {"b", "BF16", {4096}, bf16_weights(4096, seed + 7)}});
}

TEST_F(mount_test, cp_compress_load_remount) {
  fs::path const src = dir_ / "checkpoint";
  fs::create_directories(src / "sub");
  write_file(src / "model.safetensors", sample_safetensors(1));
  write_file(src / "sub" / "small.txt", "hello\n");
  bool const torch = python_has("torch");
  if (torch) {
    run_result r = run_program(
        {"/usr/bin/python3", "-c",
         "import torch, sys\n"
         "g = torch.Generator().manual_seed(3)\n"
         "torch.save({'w': torch.randn(128, 512, generator=g).to("
         "torch.bfloat16), 'n': torch.arange(1000)}, sys.argv[1])\n",
         (src / "model.pt").string()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  mount();
  ASSERT_EQ(
      run_program({"/bin/cp", "-r", src.string(), mnt().string()}).exit_code,
      0);
  fs::path const dst = mnt() / "checkpoint";
  std::vector<fs::path> files = {dst / "model.safetensors",
                                 dst / "sub" / "small.txt"};
  if (torch) files.push_back(dst / "model.pt");
  auto same = [&] {
    for (auto const& f : files) {
      fs::path const rel = fs::relative(f, dst);
      EXPECT_EQ(read_file(f), read_file(src / rel)) << rel;
    }
  };
  same();  // staged (or already compressed): bytes are right either way
  ASSERT_TRUE(wait_state(files, "compressed")) << read_file(dir_ / "mount.log");
  same();

  // du: blocks count stored bytes; the weights compress.
  struct stat st {};
  ASSERT_EQ(::stat((dst / "model.safetensors").c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size),
            read_file(src / "model.safetensors").size());
  EXPECT_LT(st.st_blocks * 512, st.st_size);
  EXPECT_EQ(xattr(dst / "model.safetensors", "user.brevis.logical"),
            std::to_string(st.st_size));

  // numpy (safetensors by hand) and torch read the mount like the original.
  std::string const check =
      "import json, struct, sys, numpy as np\n"
      "def st(p):\n"
      "  b = open(p, 'rb').read(); n = struct.unpack('<Q', b[:8])[0]\n"
      "  h = json.loads(b[8:8+n]); d = b[8+n:]\n"
      "  return {k: np.frombuffer(d[v['data_offsets'][0]:"
      "v['data_offsets'][1]], np.uint16) for k, v in h.items() if k != "
      "'__metadata__'}\n"
      "a, b = st(sys.argv[1] + '/model.safetensors'), "
      "st(sys.argv[2] + '/model.safetensors')\n"
      "assert a.keys() == b.keys()\n"
      "assert all((a[k] == b[k]).all() for k in a)\n"
      "if len(sys.argv) > 3:\n"
      "  import torch\n"
      "  x = torch.load(sys.argv[1] + '/model.pt')\n"
      "  y = torch.load(sys.argv[2] + '/model.pt')\n"
      "  assert all(torch.equal(x[k], y[k]) for k in x)\n";
  if (python_has("numpy")) {
    std::vector<std::string> argv = {"/usr/bin/python3", "-c", check,
                                     dst.string(), src.string()};
    if (torch) argv.push_back("torch");
    run_result r = run_program(argv);
    EXPECT_EQ(r.exit_code, 0) << r.err;
  }

  // `brevis stats` works beside the mount.
  run_result stats = brevis({"stats", store().string()});
  EXPECT_EQ(stats.exit_code, 0) << stats.err;

  EXPECT_EQ(stop(0), 0);  // brevis unmount; the daemon exits cleanly
  mount();
  same();
  for (auto const& f : files) {
    EXPECT_EQ(xattr(f, "user.brevis.state"), "compressed");
  }
  EXPECT_EQ(stop(SIGINT), 0);
  run_result fsck = brevis({"fsck", store().string()});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.out << fsck.err;
}

TEST_F(mount_test, sigterm_leaves_staged_and_remount_resumes) {
  std::string const data = sample_safetensors(5);
  mount(600000);  // quiet for ten minutes: nothing compresses
  write_file(mnt() / "a.safetensors", data);
  // release reaches the daemon after close returns: wait for it.
  EXPECT_TRUE(wait_state({mnt() / "a.safetensors"}, "queued", 10s));
  EXPECT_EQ(stop(SIGTERM), 0);
  mount(50);
  EXPECT_EQ(read_file(mnt() / "a.safetensors"), data);
  ASSERT_TRUE(wait_state({mnt() / "a.safetensors"}, "compressed"));
  EXPECT_EQ(read_file(mnt() / "a.safetensors"), data);
  EXPECT_EQ(stop(SIGTERM), 0);
}

// The kernel trusts a file's cached attributes for attr_timeout (1 s,
// fs/fuse/ops.cpp); the daemon drops them once a file is compressed, so
// `du` shows the savings at once. While the test waits, it fetches the
// attributes from the daemon (AT_STATX_FORCE_SYNC), so the kernel caches
// the staged size; once the state reads "compressed" (after the job, and
// so after the notice), one plain stat must show the stored size. That
// proves the notice only if the last fetch still saw the staged size and
// the cache it filled had not run out by the stat: a fetch between the
// commit and the end of the job, or a stall on a loaded machine, makes the
// attempt prove nothing, and the test tries another file.
TEST_F(mount_test, du_sees_the_stored_size_as_soon_as_compressed) {
  mount(50);
  bool proved = false;
  for (int attempt = 0; attempt < 5 && !proved; ++attempt) {
    std::string const data = sample_safetensors(11 + attempt);
    fs::path const f = mnt() / std::to_string(attempt);
    write_file(f, data);
    uint64_t cached = 0;  // st_blocks as last fetched from the daemon
    auto cached_at = std::chrono::steady_clock::now();
    auto const end = cached_at + 60s;
    while (xattr(f, "user.brevis.state") != "compressed") {
      ASSERT_LT(std::chrono::steady_clock::now(), end)
          << read_file(dir_ / "mount.log");
      int64_t const blocks = blocks_from_daemon(f);
      ASSERT_GE(blocks, 0);
      cached = static_cast<uint64_t>(blocks);
      cached_at = std::chrono::steady_clock::now();
      std::this_thread::sleep_for(5ms);
    }
    uint64_t const stored = std::stoull(xattr(f, "user.brevis.stored"));
    ASSERT_LT(stored, data.size());
    auto const want = static_cast<blkcnt_t>((stored + 511) / 512);
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    bool const cache_live =
        std::chrono::steady_clock::now() - cached_at < attr_cache - 100ms;
    if (!cache_live || cached == static_cast<uint64_t>(want)) continue;
    EXPECT_EQ(st.st_blocks, want) << "stored " << stored << " bytes";
    EXPECT_EQ(st.st_size, static_cast<off_t>(data.size()));
    EXPECT_EQ(read_file(f), data);
    proved = true;
  }
  EXPECT_TRUE(proved) << "in every attempt the attributes were fetched after "
                         "the commit, or the machine stalled past the cache";
  EXPECT_EQ(stop(SIGTERM), 0);
}

// The daemon's threads carry names that say what they do (`top -H`, perf,
// /proc/PID/task/*/comm): its FUSE workers, prefetchers and compression
// workers each by their own.
TEST_F(mount_test, the_daemons_threads_are_named_by_their_work) {
  mount(50);
  std::string const data = sample_safetensors(5);
  fs::path const f = mnt() / "named.safetensors";
  write_file(f, data);
  ASSERT_TRUE(wait_state({f}, "compressed")) << read_file(dir_ / "mount.log");
  EXPECT_EQ(read_file(f), data);  // a read of the compressed file
  std::map<std::string, int> names;
  fs::path const tasks = fs::path("/proc") / std::to_string(pid_) / "task";
  for (auto const& t : fs::directory_iterator(tasks)) {
    std::string name = read_file(t.path() / "comm");
    while (!name.empty() && name.back() == '\n') name.pop_back();
    ++names[name];
  }
  std::string all;
  for (auto const& [name, count] : names) {
    all += name + " x" + std::to_string(count) + "; ";
  }
  EXPECT_GE(names["brevis-fuse"], 1) << all;
  EXPECT_GE(names["brevis-prefetch"], 2) << all;
  EXPECT_GE(names["brevis-compress"], 1) << all;
  EXPECT_EQ(stop(SIGTERM), 0);
}

// Opening a compressed file for writing brings it back to staging; the
// daemon drops the kernel's cached attributes then too, so `du` shows the
// staged size at once rather than the stored one for up to attr_timeout.
// As above, an attempt proves it only if the stat came while the attributes
// fetched before the open were still cached.
TEST_F(mount_test, du_sees_the_staged_size_as_soon_as_reopened_for_writing) {
  mount(50);
  bool proved = false;
  for (int attempt = 0; attempt < 5 && !proved; ++attempt) {
    std::string const data = sample_safetensors(21 + attempt);
    fs::path const f = mnt() / std::to_string(100 + attempt);
    write_file(f, data);
    ASSERT_TRUE(wait_state({f}, "compressed"));
    int64_t const blocks = blocks_from_daemon(f);
    auto const cached_at = std::chrono::steady_clock::now();
    uint64_t const stored = std::stoull(xattr(f, "user.brevis.stored"));
    ASSERT_EQ(blocks, static_cast<int64_t>((stored + 511) / 512));
    int const fd = ::open(f.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    struct stat st {};
    ASSERT_EQ(::stat(f.c_str(), &st), 0);
    bool const cache_live =
        std::chrono::steady_clock::now() - cached_at < attr_cache - 100ms;
    if (cache_live) {
      EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, data.size())
          << "still the stored size: " << stored << " bytes";
      EXPECT_EQ(xattr(f, "user.brevis.state"), "staged");
      proved = true;
    }
    ::close(fd);
    EXPECT_EQ(read_file(f), data);
  }
  EXPECT_TRUE(proved) << "the machine stalled past the cache in every attempt";
  EXPECT_EQ(stop(SIGTERM), 0);
}

TEST_F(mount_test, posix_operations) {
  mount(50);
  fs::path const m = mnt();
  std::string const data = sample_safetensors(9);
  write_file(m / "f", data);
  ASSERT_TRUE(wait_state({m / "f"}, "compressed"));

  // Writing into a compressed file brings it back to staging.
  {
    int fd = ::open((m / "f").c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, "XY", 2, 100), 2);
    ::close(fd);
  }
  std::string want = data;
  want.replace(100, 2, "XY");
  EXPECT_EQ(read_file(m / "f"), want);
  // Truncating a compressed file.
  ASSERT_TRUE(wait_state({m / "f"}, "compressed"));
  fs::resize_file(m / "f", 1000);
  EXPECT_EQ(read_file(m / "f"), want.substr(0, 1000));

  // Directories, renames, links, symlinks.
  fs::create_directories(m / "d1" / "d2");
  write_file(m / "d1" / "x", "x-data");
  write_file(m / "y", "y-data");
  fs::rename(m / "d1" / "x", m / "d1" / "d2" / "x");
  fs::rename(m / "y", m / "d1" / "d2" / "x");  // over an existing file
  EXPECT_EQ(read_file(m / "d1" / "d2" / "x"), "y-data");
  EXPECT_FALSE(fs::exists(m / "y"));
  write_file(m / "z", "z");
  EXPECT_NE(::syscall(SYS_renameat2, AT_FDCWD, (m / "z").c_str(), AT_FDCWD,
                      (m / "d1" / "d2" / "x").c_str(), 1 /*NOREPLACE*/),
            0);
  EXPECT_EQ(errno, EEXIST);
  std::error_code ec;
  fs::rename(m / "d1", m / "d1" / "d2" / "inside", ec);
  EXPECT_TRUE(ec);
  EXPECT_NE(::rmdir((m / "d1").c_str()), 0);
  EXPECT_EQ(errno, ENOTEMPTY);
  fs::create_hard_link(m / "z", m / "z2");
  EXPECT_EQ(fs::hard_link_count(m / "z"), 2u);
  fs::create_symlink("d1/d2/x", m / "s");
  EXPECT_EQ(fs::read_symlink(m / "s"), "d1/d2/x");
  EXPECT_EQ(read_file(m / "s"), "y-data");
  fs::rename(m / "d1", m / "d3");
  EXPECT_EQ(read_file(m / "d3" / "d2" / "x"), "y-data");

  // An unlinked open file stays readable until closed.
  {
    int fd = ::open((m / "z").c_str(), O_RDONLY);
    ASSERT_GE(fd, 0);
    fs::remove(m / "z");
    fs::remove(m / "z2");
    char c = 0;
    EXPECT_EQ(::pread(fd, &c, 1, 0), 1);
    EXPECT_EQ(c, 'z');
    ::close(fd);
  }

  // Attributes, times, extended attributes.
  fs::permissions(m / "f", fs::perms::owner_read);
  EXPECT_EQ(fs::status(m / "f").permissions() & fs::perms::all,
            fs::perms::owner_read);
  EXPECT_EQ(::chown((m / "f").c_str(), 1234, 5678), 0);
  struct stat st {};
  ::stat((m / "f").c_str(), &st);
  EXPECT_EQ(st.st_uid, 1234u);
  EXPECT_EQ(st.st_gid, 5678u);
  timespec const ts[2] = {{1000, 0}, {2000, 0}};
  EXPECT_EQ(::utimensat(AT_FDCWD, (m / "f").c_str(), ts, 0), 0);
  ::stat((m / "f").c_str(), &st);
  EXPECT_EQ(st.st_mtim.tv_sec, 2000);
  EXPECT_EQ(::setxattr((m / "f").c_str(), "user.note", "hi", 2, 0), 0);
  EXPECT_EQ(xattr(m / "f", "user.note"), "hi");
  EXPECT_NE(::setxattr((m / "f").c_str(), "user.brevis.state", "x", 1, 0), 0);
  // As ext4: a namespace with no name is invalid, one the mount does not
  // know unsupported; security.* and system.* are never set, so reading or
  // removing one finds nothing.
  std::array<char, 8> buf{};
  struct name_case {
    char const* name;
    int set_errno, get_errno;
  };
  for (auto const& [name, set_errno, get_errno] :
       {name_case{"user.", EINVAL, EINVAL},
        {"trusted.", EINVAL, EINVAL},
        {"bogus.x", EOPNOTSUPP, EOPNOTSUPP},
        {"security.x", EOPNOTSUPP, ENODATA},
        {"system.posix_acl_access", 0, ENODATA}}) {
    // (The kernel parses an ACL before it is set: "hi" is EINVAL there.)
    if (set_errno != 0) {
      errno = 0;
      EXPECT_EQ(::setxattr((m / "f").c_str(), name, "hi", 2, 0), -1) << name;
      EXPECT_EQ(errno, set_errno) << name;
    }
    errno = 0;
    EXPECT_EQ(::getxattr((m / "f").c_str(), name, buf.data(), buf.size()), -1)
        << name;
    EXPECT_EQ(errno, get_errno) << name;
    errno = 0;
    EXPECT_EQ(::removexattr((m / "f").c_str(), name), -1) << name;
    EXPECT_EQ(errno, get_errno) << name;
  }

  EXPECT_EQ(stop(0), 0);
  mount(50);
  EXPECT_EQ(read_file(m / "d3" / "d2" / "x"), "y-data");
  EXPECT_EQ(read_file(m / "f"), want.substr(0, 1000));
  EXPECT_EQ(xattr(m / "f", "user.note"), "hi");
  EXPECT_EQ(fs::read_symlink(m / "s"), "d1/d2/x");
  EXPECT_FALSE(fs::exists(m / "z"));
  ::stat((m / "f").c_str(), &st);
  EXPECT_EQ(st.st_mtim.tv_sec, 2000);
  EXPECT_EQ(stop(SIGTERM), 0);
}

TEST_F(mount_test, second_mount_of_a_store_fails) {
  mount(50);
  fs::path const other = dir_ / "mnt2";
  fs::create_directories(other);
  run_result r = brevis({"mount", "-f", store().string(), other.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("already mounted"), std::string::npos) << r.err;
  struct stat a {
  }, b{};
  ::stat(other.c_str(), &b);
  ::stat(dir_.path().c_str(), &a);
  EXPECT_EQ(a.st_dev, b.st_dev);  // nothing mounted there
  write_file(mnt() / "x", "still served");
  EXPECT_EQ(read_file(mnt() / "x"), "still served");
  EXPECT_EQ(stop(0), 0);
  mount(50);  // the lock went with the first mount
  EXPECT_EQ(read_file(mnt() / "x"), "still served");
  EXPECT_EQ(stop(SIGTERM), 0);
}

TEST_F(mount_test, cached_reads_programs_and_no_stale_bytes) {
  // Several 1 MiB chunks, read in 128 KiB pieces at odd offsets.
  std::string const data = make_safetensors(
      {{"w", "BF16", {1280, 1024}, bf16_weights(1280 * 1024, 11)},
       {"b", "BF16", {4096}, bf16_weights(4096, 12)}});
  mount(50);
  fs::path const f = mnt() / "big.safetensors";
  write_file(f, data);
  ASSERT_TRUE(wait_state({f}, "compressed")) << read_file(dir_ / "mount.log");
  auto read_pieces = [&](size_t start, size_t piece) {
    int fd = ::open(f.c_str(), O_RDONLY);
    EXPECT_GE(fd, 0);
    std::string got;
    std::vector<char> buf(piece);
    for (size_t off = start;;) {
      ssize_t const n = ::pread(fd, buf.data(), piece, static_cast<off_t>(off));
      if (n <= 0) break;
      got.append(buf.data(), static_cast<size_t>(n));
      off += static_cast<size_t>(n);
    }
    ::close(fd);
    return got;
  };
  EXPECT_TRUE(read_pieces(0, 128 << 10) == data);
  EXPECT_TRUE(read_pieces(12345, 100000) == data.substr(12345));
  EXPECT_TRUE(read_pieces(0, 128 << 10) == data);  // warm

  // The programs of its regions, one line per run of chunks.
  char buf[65536];
  ssize_t const n =
      ::getxattr(f.c_str(), "user.brevis.programs", buf, sizeof buf);
  ASSERT_GT(n, 0);
  std::string const programs(buf, static_cast<size_t>(n));
  EXPECT_EQ(programs.rfind("0-", 0), 0u) << programs;
  EXPECT_NE(programs.find(std::string("-") + std::to_string(data.size()) + " "),
            std::string::npos)
      << programs;
  EXPECT_EQ(programs.back(), '\n');

  // Rewritten in place, then recompressed: never the cached old bytes.
  std::string changed = data;
  for (size_t i = 0; i < changed.size(); i += 4099) changed[i] ^= 0x5a;
  {
    int fd = ::open(f.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    for (size_t i = 0; i < changed.size(); i += 4099) {
      ASSERT_EQ(::pwrite(fd, &changed[i], 1, static_cast<off_t>(i)), 1);
    }
    ::close(fd);
  }
  EXPECT_TRUE(read_pieces(0, 128 << 10) == changed);
  ASSERT_TRUE(wait_state({f}, "compressed"));
  EXPECT_TRUE(read_pieces(0, 128 << 10) == changed);
  // Replaced by rename: the new file's bytes.
  write_file(mnt() / "other", data.substr(0, 2 << 20));
  ASSERT_TRUE(wait_state({mnt() / "other"}, "compressed"));
  fs::rename(mnt() / "other", f);
  EXPECT_TRUE(read_pieces(0, 128 << 10) == data.substr(0, 2 << 20));
  EXPECT_EQ(stop(SIGTERM), 0);
}

}  // namespace
}  // namespace brevis::cli_test
