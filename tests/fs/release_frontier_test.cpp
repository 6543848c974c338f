// Which bytes of the staged copy the pipeline drops from its mapping
// (fs/pipeline/release_frontier.h): the verified prefix in runs, chunks
// past a slow one only beyond a bound, every byte eventually, nothing
// before its chunk is done.

#include "fs/pipeline/release_frontier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

namespace brevis::fs {
namespace {

using range = release_frontier::range;

// `n` chunks of `len` bytes from offset 0.
std::vector<range> tiles(size_t n, uint64_t len) {
  std::vector<range> out;
  for (size_t i = 0; i < n; ++i) out.push_back({i * len, (i + 1) * len});
  return out;
}

TEST(release_frontier, drops_the_done_prefix_in_runs) {
  auto const chunks = tiles(10, 100);
  release_frontier f(chunks, 300, 10000);
  EXPECT_TRUE(f.done(0).empty());  // 100 < 300
  EXPECT_TRUE(f.done(1).empty());
  EXPECT_EQ(f.held(), 200u);
  EXPECT_EQ(f.done(2), (std::vector<range>{{0, 300}}));
  EXPECT_EQ(f.held(), 0u);
  // Out of order: nothing until the gap closes, then one run.
  EXPECT_TRUE(f.done(5).empty());
  EXPECT_TRUE(f.done(4).empty());
  EXPECT_EQ(f.held(), 200u);
  EXPECT_EQ(f.done(3), (std::vector<range>{{300, 600}}));
  EXPECT_TRUE(f.done(3).empty());   // again: ignored
  EXPECT_TRUE(f.done(99).empty());  // no such chunk
  EXPECT_TRUE(f.done(6).empty());
  EXPECT_TRUE(f.done(7).empty());
  EXPECT_EQ(f.done(8), (std::vector<range>{{600, 900}}));
  // The last chunk drops the rest, however short.
  EXPECT_EQ(f.done(9), (std::vector<range>{{900, 1000}}));
  EXPECT_EQ(f.held(), 0u);
}

TEST(release_frontier, bounds_what_waits_behind_a_slow_chunk) {
  auto const chunks = tiles(10, 100);
  release_frontier f(chunks, 1000, 250);
  // Chunk 0 is slow: 1, 2 wait (200 <= 250); 3 tips it over, and 1-3 go
  // as one range; 5 then waits again (4 is still pending).
  EXPECT_TRUE(f.done(1).empty());
  EXPECT_TRUE(f.done(2).empty());
  EXPECT_EQ(f.done(3), (std::vector<range>{{100, 400}}));
  EXPECT_EQ(f.held(), 0u);
  EXPECT_TRUE(f.done(5).empty());
  EXPECT_EQ(f.held(), 100u);
  // Dropped neighbours that are not adjacent make separate ranges.
  EXPECT_TRUE(f.done(7).empty());
  EXPECT_EQ(f.done(9),
            (std::vector<range>{{500, 600}, {700, 800}, {900, 1000}}));
  // The frontier passes what was dropped on its own (dropping it again is
  // harmless), and the end drops everything left.
  EXPECT_TRUE(f.done(0).empty());  // up to 400: below the run
  EXPECT_TRUE(f.done(4).empty());
  EXPECT_TRUE(f.done(6).empty());
  EXPECT_EQ(f.done(8), (std::vector<range>{{0, 1000}}));
}

TEST(release_frontier, drops_every_byte_once_done_in_any_order) {
  // Uneven chunks (cut per tensor) done in a random order: the ranges
  // cover exactly the file, and never a chunk that is not done yet.
  std::mt19937 rng(5);
  std::vector<range> chunks;
  uint64_t at = 64;  // a header before the first chunk is not ours
  for (int i = 0; i < 300; ++i) {
    uint64_t const len = 1 + rng() % 5000;
    chunks.push_back({at, at + len});
    at += len;
  }
  std::vector<size_t> order(chunks.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  release_frontier f(chunks, 20000, 30000);
  std::vector<bool> done(chunks.size()), dropped_byte(at);
  for (size_t i : order) {
    done[i] = true;
    for (range const& r : f.done(i)) {
      ASSERT_LE(r.begin, r.end);
      for (size_t j = 0; j < chunks.size(); ++j) {
        bool const overlaps =
            chunks[j].begin < r.end && r.begin < chunks[j].end;
        ASSERT_TRUE(!overlaps || done[j]) << "chunk " << j << " not done";
      }
      for (uint64_t b = r.begin; b < r.end; ++b) dropped_byte[b] = true;
    }
    ASSERT_LE(f.held(), 20000u + 30000u + 5000u);
  }
  EXPECT_EQ(f.held(), 0u);
  for (uint64_t b = 64; b < at; ++b) ASSERT_TRUE(dropped_byte[b]) << b;
  for (uint64_t b = 0; b < 64; ++b) ASSERT_FALSE(dropped_byte[b]) << b;
}

TEST(release_frontier, no_chunks) {
  release_frontier f({}, 100, 100);
  EXPECT_TRUE(f.done(0).empty());
  EXPECT_EQ(f.held(), 0u);
}

}  // namespace
}  // namespace brevis::fs
