// mount_fs without libfuse: reads of a compressed file go through the chunk
// cache, each chunk decoded once; sequential readers get the next chunks
// decoded ahead and drop those they left behind; restaging drops the cached
// chunks; reads across chunk boundaries and past the end, concurrent
// readers, readers racing a rewrite, a recompression and an unlink, and
// queued prefetches outlived by a truncate and a rewrite. Also what the
// mount keeps of removed directories, FIFOs and symlinks until forgotten.

#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "codec/choose/chooser.h"
#include "codec/search/search_chooser.h"
#include "fs/fuse/filesystem.h"
#include "tests/cli/helpers.h"

namespace brevis::fs {
namespace {

struct fixture {
  cli_test::temp_dir dir;
  std::unique_ptr<codec::program_chooser> chooser = codec::make_store_chooser();
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
  static mount_fs::options opts(size_t cache, unsigned prefetch) {
    mount_fs::options o;
    o.compress = false;
    o.cache_bytes = cache;
    o.prefetch = prefetch;
    return o;
  }
  std::unique_ptr<mount_fs> mount(size_t cache, unsigned prefetch) {
    return mount(opts(cache, prefetch));
  }
  std::unique_ptr<mount_fs> mount(mount_fs::options const& o) {
    return std::make_unique<mount_fs>(*s, *chooser, o);
  }
  /// Whether `got` is `want` at `offset` (up to its end).
  static bool same(std::string const& want, uint64_t offset, uint8_t const* got,
                   size_t n) {
    return offset + n <= want.size() &&
           std::memcmp(got, want.data() + offset, n) == 0;
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

/// Whether `ino` reaches the compressed state within 30 s.
bool wait_compressed(mount_fs& m, uint64_t ino) {
  for (int i = 0;
       i < 3000 && m.getxattr(ino, "user.brevis.state") != "compressed"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return m.getxattr(ino, "user.brevis.state") == "compressed";
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

// The window ahead of a sequential reader grows with the bytes it has read
// in a row (up to prefetch_max chunk sizes): the same reads prefetch further
// with room to grow than without. Counted from the chunk map, so that the
// test does not depend on where the chunks are cut.
TEST(mount_fs_cache, the_prefetch_window_grows_with_a_sequential_run) {
  fixture f;
  auto const map = f.s->chunk_map(f.ino);
  ASSERT_GE(map.size(), 6u);
  uint64_t const chunk = f.s->chunk_size();
  uint64_t const upto = map[2].offset;  // read [0, upto) in order
  auto decoded_ahead = [&](unsigned prefetch_max) {
    mount_fs::options o = fixture::opts(16 << 20, 1);
    o.prefetch_max = prefetch_max;
    auto m = f.mount(o);
    std::vector<uint8_t> buf(16 << 10);
    for (uint64_t at = 0; at < upto;) {
      size_t const want =
          static_cast<size_t>(std::min<uint64_t>(buf.size(), upto - at));
      size_t const got = m->read(f.ino, at, want, buf.data());
      EXPECT_TRUE(fixture::same(f.data, at, buf.data(), got));
      if (got == 0) break;
      at += got;
    }
    m->drain_prefetch();
    // Once each (the default 4 MiB slack drops nothing from this file).
    EXPECT_EQ(m->cache().stats().misses, m->cache().entries());
    return static_cast<size_t>(m->cache().stats().misses);
  };
  auto starting_before = [&](uint64_t end) {
    return static_cast<size_t>(std::count_if(
        map.begin(), map.end(),
        [&](store::chunk_span const& c) { return c.offset < end; }));
  };
  size_t const fixed = starting_before(upto + chunk);
  size_t const grown =
      starting_before(upto + std::clamp<uint64_t>(upto, chunk, 8 * chunk));
  ASSERT_GT(grown, fixed);  // the test reads far enough to tell them apart
  EXPECT_EQ(decoded_ahead(1), fixed);
  EXPECT_EQ(decoded_ahead(8), grown);
}

// A read across several chunks hands all but its first to the prefetch
// threads and decodes the first itself: each chunk once, the bytes whole,
// and (a random read) nothing past the read.
TEST(mount_fs_cache, a_read_across_chunks_decodes_them_in_parallel_once) {
  fixture f;
  auto const map = f.s->chunk_map(f.ino);
  ASSERT_GE(map.size(), 6u);
  mount_fs::options o = fixture::opts(16 << 20, 2);
  o.sequential_slack = 0;  // a first read past 0 is then a random one
  auto m = f.mount(o);
  for (int round = 0; round < 2; ++round) {
    uint64_t const from = map[1].offset + 10;
    uint64_t const to = map[5].offset + map[5].length / 2;
    std::vector<uint8_t> buf(to - from);
    ASSERT_EQ(m->read(f.ino, from, buf.size(), buf.data()), buf.size());
    EXPECT_TRUE(fixture::same(f.data, from, buf.data(), buf.size()));
    m->drain_prefetch();
    EXPECT_EQ(m->cache().stats().misses, 5u);  // chunks 1..5, once each
    EXPECT_EQ(m->cache().entries(), 5u);
  }
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

// With the kernel's writeback cache the kernel dates every write itself and
// states the mtime before the last writer's close: that close records the
// stated mtime, though writes the daemon handled after the statement moved
// the staged copy's (they moved it to the close's time, seen after a
// remount). Without the cache, the close records the copy's.
TEST(mount_fs_times, the_last_close_records_the_mtime_the_kernel_stated) {
  fixture f;
  auto m = f.mount(16 << 20, 0);
  std::array<uint8_t, 3> const xyz = {'x', 'y', 'z'};
  int64_t const stated = int64_t{1'000'000'000} * 1'600'000'000 + 123;
  auto mtime = [&] {
    struct stat const st = m->getattr(f.ino);
    return int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
  };
  auto state_then_write = [&] {
    ASSERT_TRUE(m->open(f.ino, O_WRONLY));  // staged (again)
    setattr_request r;
    r.mtime_ns = stated;
    m->setattr(f.ino, r);
    ASSERT_EQ(m->write(f.ino, 70000, xyz.data(), xyz.size()), 3u);
    m->release(f.ino, true);
  };
  state_then_write();
  EXPECT_GT(mtime(), stated) << "no writeback cache: the copy's time";

  m->kernel_keeps_times(true);
  state_then_write();
  EXPECT_EQ(mtime(), stated);
  // Written with no new statement (a write in the same clock tick as the
  // last change): the time stays.
  ASSERT_TRUE(m->open(f.ino, O_WRONLY));
  ASSERT_EQ(m->write(f.ino, 80000, xyz.data(), xyz.size()), 3u);
  m->release(f.ino, true);
  EXPECT_EQ(mtime(), stated);
}

TEST(mount_fs_cache, sequential_reader_drops_chunks_behind) {
  fixture f;
  ASSERT_GE(f.chunks(), 5u);
  // Without prefetch, so that the counts are exact.
  mount_fs::options o = fixture::opts(16 << 20, 0);
  o.sequential_slack = 64 << 10;
  auto m = f.mount(o);
  EXPECT_TRUE(read_in_pieces(*m, f.ino, 16 << 10) == f.data);
  // Each chunk decoded once: none was dropped before the reader was done.
  EXPECT_EQ(m->cache().stats().misses, f.chunks());
  // Only those ending within the slack of the end are left.
  EXPECT_LE(m->cache().entries(), 3u);
  // With prefetch, the same bytes.
  o.prefetch = 2;
  auto p = f.mount(o);
  EXPECT_TRUE(read_in_pieces(*p, f.ino, 16 << 10) == f.data);
  p->drain_prefetch();

  // A random reader's chunks stay.
  auto r = f.mount(o);
  auto const map = f.s->chunk_map(f.ino);
  uint8_t b[16];
  for (size_t i : {size_t{4}, size_t{1}, size_t{3}}) {
    ASSERT_EQ(r->read(f.ino, map[i].offset, sizeof b, b), sizeof b);
  }
  r->drain_prefetch();
  // Far apart: neither dropped nor read ahead.
  EXPECT_EQ(r->cache().entries(), 3u);
  EXPECT_EQ(r->cache().stats().misses, 3u);
}

// The kernel's readahead sends several READs at once and FUSE threads take
// them in any order: a READ answered late must still find the chunks it
// needs, even when the reads past it are further ahead than the slack.
// Each group of 12 reads of 16 KiB (three chunks) comes with its first read
// last.
TEST(mount_fs_cache, reads_answered_out_of_order_decode_each_chunk_once) {
  fixture f;
  ASSERT_GE(f.chunks(), 5u);
  for (unsigned prefetch : {0u, 2u}) {
    mount_fs::options o = fixture::opts(16 << 20, prefetch);
    o.sequential_slack = 64 << 10;
    auto m = f.mount(o);
    size_t const piece = 16 << 10, group = 12;
    std::string got(f.data.size(), '\0');
    std::vector<uint8_t> buf(piece);
    for (uint64_t at = 0; at < f.data.size(); at += group * piece) {
      std::vector<uint64_t> order;
      for (size_t i = 1; i < group; ++i) order.push_back(at + i * piece);
      order.push_back(at);
      for (uint64_t off : order) {
        if (off >= f.data.size()) continue;
        size_t const n = m->read(f.ino, off, piece, buf.data());
        std::memcpy(got.data() + off, buf.data(), n);
      }
    }
    m->drain_prefetch();
    EXPECT_TRUE(got == f.data) << prefetch;
    EXPECT_EQ(m->cache().stats().misses, f.chunks()) << prefetch;
    // The chunks behind were dropped all the same.
    EXPECT_LE(m->cache().entries(), 5u) << prefetch;
  }
}

// A stream that has read a while may find a READ from deep in the kernel's
// window (further past its furthest read than the slack) taken before the
// ones below it: the run goes on, and the chunks it has passed are still
// dropped (a new run at each such READ left them all to the LRU).
TEST(mount_fs_cache, an_established_stream_keeps_reads_far_ahead_in_its_run) {
  cli_test::temp_dir dir;
  auto chooser = codec::make_store_chooser();
  store_options so;
  so.chunk_size = 64 << 10;
  store s((dir / "s").string(), so);
  std::string const data = cli_test::make_safetensors(
      {{"w", "BF16", {3000000}, cli_test::bf16_weights(3000000, 5)}});
  uint64_t const ino =
      s.add_file(root_inode, "f", codec::as_bytes(data), *chooser, 0644, 0).ino;
  size_t const chunks = s.chunk_map(ino).size();
  mount_fs::options o = fixture::opts(16 << 20, 0);
  o.sequential_slack = 64 << 10;
  mount_fs m(s, *chooser, o);
  size_t const piece = 128 << 10, group = 16;  // 2 MiB of READs at once
  std::string got(data.size(), '\0');
  std::vector<uint8_t> buf(piece);
  auto read_at = [&](uint64_t off) {
    if (off >= data.size()) return;
    size_t const n = m.read(ino, off, piece, buf.data());
    std::memcpy(got.data() + off, buf.data(), n);
  };
  uint64_t at = 0;
  for (; at < (3u << 20); at += piece) read_at(at);  // established
  for (; at < data.size(); at += group * piece) {
    read_at(at + (group - 1) * piece);  // the last of the group first
    for (size_t i = 0; i + 1 < group; ++i) read_at(at + i * piece);
  }
  EXPECT_TRUE(got == data);
  EXPECT_EQ(m.cache().stats().misses, chunks);  // each once
  // Those behind the last READs and the slack (one 64 KiB chunk) were
  // dropped: 4 are left, where new runs at the far READs left 12.
  EXPECT_LE(m.cache().entries(), 6u);
}

TEST(mount_fs_cache, reads_across_chunk_boundaries_and_past_the_end) {
  fixture f;
  auto m = f.mount(16 << 20, 2);
  auto const map = f.s->chunk_map(f.ino);
  uint64_t const size = f.data.size();
  std::vector<uint8_t> buf(70000);
  for (size_t i = 1; i < map.size(); ++i) {
    uint64_t const at = map[i].offset;
    for (uint64_t back : {1u, 7u, 4096u}) {
      for (size_t len : {size_t{2}, size_t{4096}, size_t{70000}}) {
        if (back > at) continue;
        uint64_t const off = at - back;
        size_t const want =
            static_cast<size_t>(std::min<uint64_t>(len, size - off));
        ASSERT_EQ(m->read(f.ino, off, len, buf.data()), want) << off;
        EXPECT_TRUE(fixture::same(f.data, off, buf.data(), want)) << off;
      }
    }
    // One piece per chunk, straight from the cached chunks.
    mount_fs::read_data const d = m->read_view(f.ino, at - 1, 2);
    EXPECT_EQ(d.size, 2u);
    ASSERT_EQ(d.pieces.size(), 2u);
    EXPECT_EQ(d.hold.size(), 2u);
    EXPECT_EQ(d.pieces[0].iov_len, 1u);
    EXPECT_EQ(*static_cast<uint8_t const*>(d.pieces[1].iov_base),
              static_cast<uint8_t>(f.data[at]));
  }
  ASSERT_EQ(m->read(f.ino, size - 3, 100, buf.data()), 3u);
  EXPECT_TRUE(fixture::same(f.data, size - 3, buf.data(), 3));
  EXPECT_EQ(m->read(f.ino, size, 100, buf.data()), 0u);
  EXPECT_EQ(m->read(f.ino, size + 12345, 100, buf.data()), 0u);
  EXPECT_EQ(m->read(f.ino, uint64_t{1} << 62, 100, buf.data()), 0u);
  EXPECT_TRUE(m->read_view(f.ino, size + 1, 10).pieces.empty());
}

TEST(mount_fs_cache, concurrent_readers_of_one_file) {
  fixture f;
  // A cache of three chunks: readers evict and drop each other's chunks.
  mount_fs::options o = fixture::opts(3 * (64 << 10), 2);
  o.sequential_slack = 64 << 10;
  auto m = f.mount(o);
  std::atomic<int> wrong{0};
  auto sequential = [&](uint64_t start, size_t piece) {
    std::vector<uint8_t> buf(piece);
    for (uint64_t off = start;;) {
      size_t const n = m->read(f.ino, off, piece, buf.data());
      if (n == 0) break;
      if (!fixture::same(f.data, off, buf.data(), n)) ++wrong;
      off += n;
    }
  };
  auto random = [&](unsigned seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint8_t> buf(100000);
    for (int i = 0; i < 300; ++i) {
      uint64_t const off = rng() % (f.data.size() + 100);
      size_t const len = 1 + rng() % buf.size();
      size_t const n = m->read(f.ino, off, len, buf.data());
      size_t const want = off >= f.data.size()
                              ? 0
                              : static_cast<size_t>(std::min<uint64_t>(
                                    len, f.data.size() - off));
      if (n != want || !fixture::same(f.data, off, buf.data(), n)) ++wrong;
    }
  };
  std::vector<std::thread> ts;
  ts.emplace_back(sequential, 0, 16 << 10);
  ts.emplace_back(sequential, 0, 10000);
  ts.emplace_back(sequential, f.data.size() / 2, 4096);
  ts.emplace_back(random, 1);
  ts.emplace_back(random, 2);
  for (auto& t : ts) t.join();
  m->drain_prefetch();
  EXPECT_EQ(wrong, 0);
  EXPECT_LE(m->cache().bytes(), m->cache().budget());
}

// Prefetch jobs still queued (one slow decoder, the whole file asked
// ahead) when the file is truncated and rewritten, then compressed again:
// no read, while staged or after, returns a byte of an old version.
TEST(mount_fs_cache, prefetch_never_serves_bytes_of_an_old_version) {
  fixture f;
  mount_fs::options o = fixture::opts(16 << 20, 64);
  o.compress = true;
  o.quiet_ms = 0;
  o.decoders = 1;
  o.prefetch_threads = 1;
  auto m = f.mount(o);
  m->start();
  std::string want = f.data;
  for (int round = 0; round < 3; ++round) {
    uint8_t b[1];
    ASSERT_EQ(m->read(f.ino, 1, 1, b), 1u);  // asks for the rest ahead
    ASSERT_TRUE(m->open(f.ino, O_WRONLY));
    setattr_request r;
    r.size = want.size() - 40000;
    m->setattr(f.ino, r);
    want.resize(*r.size);
    // A new tail and a changed byte in a chunk the prefetcher had queued.
    std::string const tail(25000, static_cast<char>('a' + round));
    want += tail;
    want[200000] = static_cast<char>(want[200000] ^ 0x33);
    ASSERT_EQ(
        m->write(f.ino, *r.size, reinterpret_cast<uint8_t const*>(tail.data()),
                 tail.size()),
        tail.size());
    ASSERT_EQ(m->write(f.ino, 200000,
                       reinterpret_cast<uint8_t const*>(&want[200000]), 1),
              1u);
    EXPECT_TRUE(read_in_pieces(*m, f.ino, 50000) == want);  // staged
    m->release(f.ino, true);
    ASSERT_TRUE(wait_compressed(*m, f.ino));
    EXPECT_TRUE(read_in_pieces(*m, f.ino, 30000) == want);
    m->drain_prefetch();
    EXPECT_TRUE(read_in_pieces(*m, f.ino, 70000) == want);  // from the cache
  }
  m->shutdown();
}

// With the writeback cache the kernel zero-fills a short READ reply up to
// the size it knows, and learns a truncate's size only from its reply: a
// read must not be answered between the cut and that reply.
TEST(mount_fs_cache, truncates_and_reads_wait_for_each_others_replies) {
  fixture f;
  auto m = f.mount(16 << 20, 0);
  ASSERT_FALSE(m->open(f.ino, O_RDONLY));  // the reader's descriptor
  std::atomic<bool> resized{false};
  std::atomic<bool> release{false};
  std::thread truncate;
  {
    // A read being answered: its reply still reads the old bytes.
    mount_fs::read_data const reading = m->read_view(f.ino, 0, 100);
    ASSERT_EQ(reading.size, 100u);
    truncate = std::thread([&] {
      ASSERT_TRUE(m->open(f.ino, O_WRONLY));
      setattr_request r;
      r.size = 10;
      resize_gate::hold replying;  // as op_setattr keeps it until its reply
      m->setattr(f.ino, r, &replying);
      resized = true;
      m->release(f.ino, true);
      while (!release)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_FALSE(resized) << "a truncate cut the file under a read's reply";
  }
  while (!resized) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  // Until the truncate's reply is out, reads wait; then they see its size.
  std::atomic<bool> read_done{false};
  size_t got = 0;
  std::thread reader([&] {
    std::array<uint8_t, 100> buf{};
    got = m->read(f.ino, 0, buf.size(), buf.data());
    read_done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(read_done) << "a read was answered before a truncate's reply";
  release = true;
  truncate.join();
  reader.join();
  EXPECT_EQ(got, 10u);
  m->release(f.ino, false);
}

TEST(mount_fs_cache, reads_racing_a_rewrite_a_recompression_and_an_unlink) {
  fixture f;
  mount_fs::options o = fixture::opts(1 << 20, 2);
  o.compress = true;
  o.quiet_ms = 0;
  o.sequential_slack = 64 << 10;
  auto m = f.mount(o);
  m->start();
  // Every rewrite flips one byte (one pwrite, so a read sees it whole):
  // each read must match one of the two versions, never a mix of chunks.
  uint64_t const at = 70001;
  std::string other = f.data;
  other[at] = static_cast<char>(other[at] ^ 0x5a);
  ASSERT_FALSE(m->open(f.ino, O_RDONLY));  // the readers' handle
  std::atomic<bool> stop{false};
  std::atomic<int> wrong{0}, reads{0};
  auto reader = [&](size_t piece) {
    std::vector<uint8_t> buf(piece);
    while (!stop) {
      for (uint64_t off = 0; !stop;) {
        size_t const n = m->read(f.ino, off, piece, buf.data());
        if (n == 0) break;
        if (!fixture::same(f.data, off, buf.data(), n) &&
            !fixture::same(other, off, buf.data(), n)) {
          ++wrong;
        }
        ++reads;
        off += n;
      }
    }
  };
  std::thread r1(reader, 16 << 10), r2(reader, 50000);
  std::string const* now = &f.data;
  for (int round = 0; round < 3; ++round) {
    now = now == &f.data ? &other : &f.data;
    ASSERT_TRUE(m->open(f.ino, O_WRONLY));  // back to staging
    ASSERT_EQ(
        m->write(f.ino, at, reinterpret_cast<uint8_t const*>(&(*now)[at]), 1),
        1u);
    m->release(f.ino, true);  // queued, compressed behind the readers
    ASSERT_TRUE(wait_compressed(*m, f.ino));
    std::vector<uint8_t> buf(now->size());
    ASSERT_EQ(m->read(f.ino, 0, buf.size(), buf.data()), buf.size());
    EXPECT_TRUE(fixture::same(*now, 0, buf.data(), buf.size()));
  }
  // Unlinked while open: the readers go on reading the orphan.
  m->unlink(root_inode, "f");
  int const before = reads;
  for (int i = 0; i < 500 && reads < before + 20; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  stop = true;
  r1.join();
  r2.join();
  EXPECT_EQ(wrong, 0);
  EXPECT_GE(reads, before + 20);
  m->release(f.ino, false);  // the last handle: the inode goes
  uint8_t b[4];
  EXPECT_THROW(m->read(f.ino, 0, sizeof b, b), store_error);
  m->shutdown();
}

// What the mount keeps of a removed inode (for the kernel's fstat of one
// still held) lasts until the kernel forgets it: its attributes, not a
// regular file's bytes.
TEST(mount_fs_names, removed_inodes_are_kept_until_forgotten) {
  fixture f;
  auto m = f.mount(1 << 20, 0);
  caller const me{};
  uint64_t const dir = m->mkdir(root_inode, "d", 0700, me).st_ino;
  uint64_t const fifo =
      m->mknod_special(root_inode, "p", S_IFIFO | 0600, me).st_ino;
  uint64_t const link = m->symlink(root_inode, "l", "x", me).st_ino;
  // The kernel holds each (as after the entry replies ops.cpp counts).
  for (uint64_t ino : {dir, fifo, link, f.ino}) m->looked_up(ino);
  m->rmdir(root_inode, "d");
  m->unlink(root_inode, "p");
  m->unlink(root_inode, "l");
  m->unlink(root_inode, "f");
  for (uint64_t ino : {dir, fifo, link, f.ino}) {
    struct stat const st = m->getattr(ino);
    EXPECT_EQ(st.st_nlink, 0u) << ino;
    EXPECT_EQ(st.st_ino, ino);
  }
  EXPECT_TRUE(S_ISDIR(m->getattr(dir).st_mode));
  EXPECT_TRUE(S_ISREG(m->getattr(f.ino).st_mode));
  EXPECT_EQ(m->getattr(f.ino).st_size, static_cast<off_t>(f.data.size()));
  EXPECT_TRUE(m->readdir(dir).empty());
  EXPECT_THROW(m->open(f.ino, O_RDONLY), store_error);
  for (uint64_t ino : {dir, fifo, link, f.ino}) {
    m->forget(ino, 1);
    EXPECT_THROW(m->getattr(ino), store_error) << ino;
  }
  m->forget(root_inode, 1);  // a live inode: nothing to drop
  EXPECT_TRUE(S_ISDIR(m->getattr(root_inode).st_mode));
}

// A removed inode is kept while the kernel holds a reference, counted as
// FUSE counts them: a FORGET gives back only the references it names (one
// reaching the daemon after a newer lookup must not end the newer one).
TEST(mount_fs_names, removed_inodes_are_kept_while_referenced) {
  fixture f;
  auto m = f.mount(1 << 20, 0);
  caller const me{};
  uint64_t const twice = m->mkdir(root_inode, "twice", 0700, me).st_ino;
  uint64_t const batch = m->mkdir(root_inode, "batch", 0700, me).st_ino;
  uint64_t const never = m->mkdir(root_inode, "never", 0700, me).st_ino;
  m->looked_up(twice);
  m->looked_up(twice);
  m->looked_up(batch);
  m->looked_up(batch);
  m->looked_up(batch);
  for (char const* name : {"twice", "batch", "never"}) {
    m->rmdir(root_inode, name);
  }
  m->forget(twice, 1);
  EXPECT_EQ(m->getattr(twice).st_nlink, 0u);
  m->forget(twice, 1);
  EXPECT_THROW(m->getattr(twice), store_error);
  m->forget(batch, 3);  // FORGET's nlookup: all three at once
  EXPECT_THROW(m->getattr(batch), store_error);
  // Never given to the kernel (a rename over a name it had not looked up):
  // nothing is kept, so nothing waits for a FORGET that never comes.
  EXPECT_THROW(m->getattr(never), store_error);
}

// The kernel sends a release without waiting for its answer, so the
// session can end before the last ones arrive (seen in CI: an orphan left in
// the store). The stop releases what is still held as the closes would
// have: a written file's size and the mtime the kernel stated are recorded,
// an orphan dropped.
TEST(mount_fs_stop, handles_never_released_are_released_at_the_stop) {
  fixture f;
  auto m = f.mount(16 << 20, 0);
  m->kernel_keeps_times(true);
  std::string const bytes(5000, 'n');
  uint64_t const made = m->create(root_inode, "n", 0644, O_WRONLY, {}).st_ino;
  setattr_request stated;
  stated.mtime_ns = int64_t{1'000'000'000} * 1'600'000'000 + 7;
  m->setattr(made, stated);
  ASSERT_EQ(m->write(made, 0, reinterpret_cast<uint8_t const*>(bytes.data()),
                     bytes.size()),
            bytes.size());
  ASSERT_FALSE(m->open(f.ino, O_RDONLY));
  m->unlink(root_inode, "f");  // an orphan while the reader holds it
  ASSERT_EQ(f.s->stat(made).size, 0u) << "recorded before the close";
  m->shutdown();
  EXPECT_EQ(m->release_all_at_stop(), 2u);
  EXPECT_EQ(f.s->stat(made).size, bytes.size());
  EXPECT_EQ(f.s->stat(made).mtime_ns, *stated.mtime_ns);
  EXPECT_EQ(m->getattr(made).st_mtim.tv_nsec, 7) << "the copy's time";
  EXPECT_THROW(f.s->stat(f.ino), store_error) << "the orphan stayed";
  EXPECT_EQ(m->release_all_at_stop(), 0u) << "released twice";
  m.reset();
  fsck_options fo;
  EXPECT_TRUE(f.s->fsck(fo).clean());
}

}  // namespace
}  // namespace brevis::fs
