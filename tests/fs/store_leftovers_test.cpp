// Pack leftovers the store must live with: a pack file of an append that
// never committed, when crash recovery was skipped (another process held the
// locks at open), must not block the next pack's creation; and a commit
// whose outcome is unknown must not have its pack bytes cut.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "codec/choose/chooser.h"
#include "codec/search/search_chooser.h"
#include "fs/pipeline/compress_graph.h"
#include "fs/store/store.h"
#include "tests/cli/helpers.h"

namespace brevis::fs {
namespace {

using cli_test::temp_dir;

std::string contents(store& s, uint64_t ino) {
  std::string out(s.stat(ino).size, '\0');
  s.read(ino, 0, out.size(), reinterpret_cast<uint8_t*>(out.data()));
  return out;
}

uint64_t bytes_of(std::filesystem::path const& p) {
  return std::filesystem::file_size(p);
}

struct leftover_fixture {
  temp_dir dir;
  std::unique_ptr<codec::program_chooser> chooser = codec::make_store_chooser();
  std::string data = cli_test::make_safetensors(
      {{"w", "BF16", {50000}, cli_test::bf16_weights(50000, 5)}});
  store_options so;

  leftover_fixture() {
    so.chunk_size = 64 << 10;
    so.pack_limit = 1;  // every add starts a new pack
  }
  std::string path() const { return (dir / "s").string(); }
  std::filesystem::path pack(int id) const {
    char name[32];
    std::snprintf(name, sizeof name, "%08x.pack", id);
    return dir / "s" / "packs" / name;
  }
  /// Opens the store while "another process" holds the append lock, so
  /// recovery is skipped and leftovers stay.
  std::unique_ptr<store> open_without_recovery() {
    int const fd = ::open((dir / "s/index/append.lock").c_str(), O_RDWR);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(::flock(fd, LOCK_EX), 0);
    auto s = std::make_unique<store>(path(), so);
    ::close(fd);
    EXPECT_FALSE(s->report().recovered);
    return s;
  }
};

TEST(store_leftovers, uncommitted_pack_does_not_block_the_next_add) {
  leftover_fixture f;
  {
    store s(f.path(), f.so);
    s.add_file(root_inode, "a", codec::as_bytes(f.data), *f.chooser, 0644, 0);
  }
  ASSERT_TRUE(std::filesystem::exists(f.pack(1)));
  // An add that created pack 2 and died before its commit.
  cli_test::write_file(f.pack(2),
                       "\x89"
                       "BPK leftover bytes");
  auto s = f.open_without_recovery();
  ASSERT_TRUE(std::filesystem::exists(f.pack(2)));
  uint64_t const b =
      s->add_file(root_inode, "b", codec::as_bytes(f.data), *f.chooser, 0644, 0)
          .ino;
  EXPECT_TRUE(contents(*s, b) == f.data);
  // Pack 2 is the add's own now, not the leftover.
  EXPECT_TRUE(s->fsck({}).clean());
  EXPECT_EQ(s->stats().packs, 2u);
}

TEST(store_leftovers, uncommitted_pack_does_not_block_the_pipeline) {
  leftover_fixture f;
  {
    store s(f.path(), f.so);
    s.add_file(root_inode, "a", codec::as_bytes(f.data), *f.chooser, 0644, 0);
  }
  cli_test::write_file(f.pack(2), "leftover");
  auto s = f.open_without_recovery();
  store::node_spec spec;
  spec.mode = S_IFREG | 0644;
  // Different bytes, so the payloads are not all stored already.
  std::string const other = cli_test::make_safetensors(
      {{"w", "BF16", {50000}, cli_test::bf16_weights(50000, 6)}});
  uint64_t const ino = s->make_node(root_inode, "c", spec).ino;
  cli_test::write_file(s->staging_path(ino), other);
  compress_request r;
  r.ino = ino;
  r.name = "c";
  r.staged_path = s->staging_path(ino);
  compress_outcome const out = compress_staged_file(*s, *f.chooser, r);
  ASSERT_TRUE(out.ok) << out.error;
  EXPECT_TRUE(contents(*s, ino) == other);
  EXPECT_TRUE(s->fsck({}).clean());
}

TEST(store_leftovers, failed_commit_does_not_cut_the_pack) {
  leftover_fixture f;
  f.so.pack_limit = 1ull << 30;  // append to the same pack
  bool fail = false;
  f.so.fault_hook = [&](std::string_view p) {
    if (p == "commit" && fail) throw store_error(store_errc::io, "injected");
  };
  uint64_t a = 0;
  uint64_t committed_end = 0;
  {
    store s(f.path(), f.so);
    a = s.add_file(root_inode, "a", codec::as_bytes(f.data), *f.chooser, 0644,
                   0)
            .ino;
    committed_end = bytes_of(f.pack(1));
    fail = true;
    std::string const other = cli_test::make_safetensors(
        {{"w", "BF16", {50000}, cli_test::bf16_weights(50000, 9)}});
    EXPECT_THROW(s.add_file(root_inode, "b", codec::as_bytes(other), *f.chooser,
                            0644, 0),
                 store_error);
    // The commit may have happened: its bytes stay.
    EXPECT_GT(bytes_of(f.pack(1)), committed_end);
    fail = false;
  }
  // The next writer's open finds they were not committed and cuts them.
  store s(f.path(), f.so);
  EXPECT_EQ(s.report().truncated.size(), 1u);
  EXPECT_EQ(bytes_of(f.pack(1)), committed_end);
  EXPECT_TRUE(contents(s, a) == f.data);
  EXPECT_FALSE(s.lookup(root_inode, "b"));
  EXPECT_TRUE(s.fsck({}).clean());
}

TEST(store_leftovers, aborted_add_before_commit_is_cut_at_once) {
  leftover_fixture f;
  f.so.pack_limit = 1ull << 30;
  bool fail = false;
  f.so.fault_hook = [&](std::string_view p) {
    if (p == "pack_synced" && fail) {
      throw store_error(store_errc::io, "injected");
    }
  };
  store s(f.path(), f.so);
  s.add_file(root_inode, "a", codec::as_bytes(f.data), *f.chooser, 0644, 0);
  uint64_t const end = bytes_of(f.pack(1));
  fail = true;
  std::string const other = cli_test::make_safetensors(
      {{"w", "BF16", {50000}, cli_test::bf16_weights(50000, 10)}});
  EXPECT_THROW(
      s.add_file(root_inode, "b", codec::as_bytes(other), *f.chooser, 0644, 0),
      store_error);
  EXPECT_EQ(bytes_of(f.pack(1)), end);  // certainly not committed: cut
}

// A created file's empty staged copy exists from its inode's commit on: a
// daemon killed inside a create left a staged inode without one, which fsck
// reported as damage (found by a stop/kill probe). A create stopped before
// its commit leaves a stray copy instead, which tidy() removes.
TEST(store_leftovers, a_created_file_has_its_copy_from_its_commit_on) {
  leftover_fixture f;
  bool fail = false;
  f.so.fault_hook = [&](std::string_view p) {
    if (p == "create_copied" && fail) {
      throw store_error(store_errc::io, "injected");
    }
  };
  store s(f.path(), f.so);
  store::node_spec spec;
  spec.mode = S_IFREG | 0644;
  spec.time_ns = int64_t{1'600'000'000} * 1'000'000'000 + 123;
  uint64_t const ino = s.make_node(root_inode, "c", spec).ino;
  struct stat st {};
  ASSERT_EQ(::stat(s.staging_path(ino).c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 0);
  EXPECT_EQ(st.st_mtim.tv_sec, 1'600'000'000);
  EXPECT_EQ(st.st_mtim.tv_nsec, 123);
  EXPECT_TRUE(s.fsck({}).clean());

  fail = true;
  EXPECT_THROW(s.make_node(root_inode, "d", spec), store_error);
  fail = false;
  EXPECT_FALSE(s.lookup(root_inode, "d").has_value());
  size_t copies = 0;
  for (auto const& e :
       std::filesystem::directory_iterator(f.dir / "s/staging")) {
    (void)e;
    ++copies;
  }
  EXPECT_EQ(copies, 2u) << "the stopped create's copy";
  EXPECT_EQ(s.tidy(), 1u);
  EXPECT_TRUE(std::filesystem::exists(s.staging_path(ino)));
  EXPECT_TRUE(s.fsck({}).clean());
  // The number goes to the next node, whose copy is its own.
  uint64_t const next = s.make_node(root_inode, "e", spec).ino;
  EXPECT_TRUE(std::filesystem::exists(s.staging_path(next)));
  EXPECT_TRUE(s.fsck({}).clean());
}

}  // namespace
}  // namespace brevis::fs
