// mount_fs without libfuse: reads of a compressed file go through the chunk
// cache, each chunk decoded once; sequential readers get the next chunks
// decoded ahead; restaging drops the cached chunks.

#include <fcntl.h>
#include <gtest/gtest.h>

#include "codec/choose/chooser.h"
#include "fs/fuse/filesystem.h"
#include "tests/cli/helpers.h"

namespace brevis::fs {
namespace {

struct fixture {
  cli_test::temp_dir dir;
  std::unique_ptr<codec::program_chooser> chooser =
      codec::make_candidate_chooser();
  std::unique_ptr<store> s;
  std::string data;
  uint64_t ino = 0;

  fixture() {
    store_options so;
    so.chunk_size = 64 << 10;
    s = std::make_unique<store>((dir / "s").string(), so);
    data = cli_test::make_safetensors(
        {{"w", "BF16", {150000}, cli_test::bf16_weights(150000, 3)},
         {"b", "BF16", {50000}, cli_test::bf16_weights(50000, 4)}});
    ino = s->add_file(root_inode, "f", codec::as_bytes(data), *chooser, 0644, 0)
              .ino;
  }
  size_t chunks() const { return s->chunk_map(ino).size(); }
  std::unique_ptr<mount_fs> mount(size_t cache, unsigned prefetch) {
    mount_fs::options o;
    o.compress = false;
    o.cache_bytes = cache;
    o.prefetch = prefetch;
    return std::make_unique<mount_fs>(*s, *chooser, o);
  }
};

std::string read_in_pieces(mount_fs& m, uint64_t ino, size_t piece) {
  std::string out;
  std::vector<uint8_t> buf(piece);
  for (;;) {
    size_t const n = m.read(ino, out.size(), piece, buf.data());
    if (n == 0) break;
    out.append(reinterpret_cast<char const*>(buf.data()), n);
  }
  return out;
}

TEST(mount_fs_cache, each_chunk_decoded_once) {
  fixture f;
  ASSERT_GE(f.chunks(), 5u);
  auto m = f.mount(16 << 20, 0);
  EXPECT_TRUE(read_in_pieces(*m, f.ino, 16 << 10) == f.data);
  EXPECT_EQ(m->cache().stats().misses, f.chunks());
  EXPECT_TRUE(read_in_pieces(*m, f.ino, 10000) == f.data);
  EXPECT_EQ(m->cache().stats().misses, f.chunks());  // all warm
  // Past the end, and a piece across chunk boundaries.
  uint8_t b[8];
  EXPECT_EQ(m->read(f.ino, f.data.size(), 8, b), 0u);
  std::vector<uint8_t> big(200000);
  ASSERT_EQ(m->read(f.ino, 1000, big.size(), big.data()), big.size());
  EXPECT_TRUE(
      std::equal(big.begin(), big.end(),
                 reinterpret_cast<uint8_t const*>(f.data.data()) + 1000));
}

TEST(mount_fs_cache, sequential_reads_prefetch) {
  fixture f;
  auto m = f.mount(16 << 20, 2);
  // One byte inside one chunk (the header is a chunk of its own).
  uint64_t const at = f.s->chunk_map(f.ino)[1].offset + 1;
  uint8_t b[1];
  ASSERT_EQ(m->read(f.ino, at, 1, b), 1u);
  m->drain_prefetch();
  EXPECT_EQ(m->cache().entries(), 3u);  // this chunk and the next two
  EXPECT_TRUE(read_in_pieces(*m, f.ino, 16 << 10) == f.data);
  m->drain_prefetch();
  EXPECT_EQ(m->cache().stats().misses, f.chunks());  // none twice

  auto none = f.mount(16 << 20, 0);
  ASSERT_EQ(none->read(f.ino, at, 1, b), 1u);
  none->drain_prefetch();
  EXPECT_EQ(none->cache().entries(), 1u);
}

TEST(mount_fs_cache, restaging_drops_cached_chunks) {
  fixture f;
  auto m = f.mount(16 << 20, 0);
  EXPECT_TRUE(read_in_pieces(*m, f.ino, 64 << 10) == f.data);
  EXPECT_EQ(m->cache().entries(), f.chunks());
  ASSERT_TRUE(m->open(f.ino, O_WRONLY));
  EXPECT_EQ(m->cache().entries(), 0u);
  uint8_t const x[3] = {'x', 'y', 'z'};
  ASSERT_EQ(m->write(f.ino, 70000, x, 3), 3u);
  m->release(f.ino, true);
  std::string want = f.data;
  want.replace(70000, 3, "xyz");
  ASSERT_TRUE(m->open(f.ino, O_RDONLY) == false);
  EXPECT_TRUE(read_in_pieces(*m, f.ino, 64 << 10) == want);
  m->release(f.ino, false);
}

}  // namespace
}  // namespace brevis::fs
