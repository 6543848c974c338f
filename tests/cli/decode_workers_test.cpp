// How many chunks the CLI decodes at once: as many threads as asked, unless
// the chunks' decode budgets would not fit the memory allowed.

#include "src/decode_workers.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include "codec/container/archive.h"
#include "codec/dsl/interpreter.h"

namespace brevis::cli {
namespace {

constexpr uint64_t mib = uint64_t{1} << 20;
constexpr uint64_t gib = uint64_t{1} << 30;

TEST(decode_workers, chunks_of_the_usual_size_take_every_thread) {
  EXPECT_EQ(decode_workers(2, mib, gib), 2u);
  EXPECT_EQ(decode_workers(16, mib, 2 * gib), 16u);
  EXPECT_EQ(decode_workers(1, mib, 64 * gib), 1u);
}

TEST(decode_workers, forged_long_chunks_take_only_what_fits) {
  uint64_t const longest = codec::max_chunk_size;  // 64 MiB
  uint64_t const each = codec::decode_budget(longest) + 3 * longest;
  EXPECT_GT(each, gib);  // what one decode of them may take
  EXPECT_EQ(decode_workers(32, longest, 2 * gib), 1u);
  EXPECT_EQ(decode_workers(32, longest, 16 * gib), 16 * gib / each);
  EXPECT_LT(decode_workers(32, longest, 16 * gib), 32u);
  // Whatever it chooses fits, unless a single decode does not.
  for (uint64_t len : {mib / 2, mib, 4 * mib, 16 * mib, longest}) {
    for (uint64_t memory : {gib, 3 * gib, 40 * gib}) {
      unsigned const w = decode_workers(64, len, memory);
      uint64_t const per =
          codec::decode_budget(static_cast<size_t>(len)) + 3 * len;
      EXPECT_GE(w, 1u);
      EXPECT_LE(w, 64u);
      if (w > 1) {
        EXPECT_LE(w * per, memory) << len << " " << memory;
      }
      if (w < 64) {
        EXPECT_GT((w + 1) * per, memory) << len << " " << memory;
      }
    }
  }
}

TEST(decode_workers, always_one_at_least) {
  EXPECT_EQ(decode_workers(0, mib, gib), 1u);
  EXPECT_EQ(decode_workers(8, codec::max_chunk_size, 0), 1u);
  EXPECT_EQ(decode_workers(8, 0, gib), 8u);
  // Past the format's limit (callers refuse such chunks first).
  EXPECT_EQ(decode_workers(8, uint64_t{1} << 62, 64 * gib), 1u);
}

TEST(decode_workers, the_limit_is_a_share_of_memory_of_one_gib_at_least) {
  EXPECT_GE(decode_memory_limit(), gib);
}

// Under an address-space limit (as a container's would be), a quarter of it.
TEST(decode_workers, the_limit_follows_an_address_space_limit) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's shadow memory takes more than 16 GiB";
#endif
  rlimit old{};
  ASSERT_EQ(::getrlimit(RLIMIT_AS, &old), 0);
  rlimit tight = old;
  tight.rlim_cur = 16 * gib;
  if (old.rlim_max != RLIM_INFINITY && old.rlim_max < tight.rlim_cur) {
    GTEST_SKIP() << "the hard limit is below 16 GiB";
  }
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &tight), 0);
  uint64_t const limit = decode_memory_limit();
  ASSERT_EQ(::setrlimit(RLIMIT_AS, &old), 0);
  EXPECT_LE(limit, 4 * gib);
  EXPECT_GE(limit, gib);
}

}  // namespace
}  // namespace brevis::cli
