// The index's deferred sync (fs/store/deferred_sync.h): commits left
// unsynced are synced once, a delay after the first of them; a failed sync
// is tried again; nothing runs (no thread either) until one is due;
// stopping does not sync.

#include "fs/store/deferred_sync.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>

#include "tests/cli/helpers.h"

namespace brevis::fs::detail {
namespace {

using namespace std::chrono_literals;

bool wait_for(std::atomic<int> const& v, int want,
              std::chrono::milliseconds limit) {
  auto const end = std::chrono::steady_clock::now() + limit;
  while (v.load() < want) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(deferred_sync, nothing_runs_until_a_sync_is_due) {
  std::atomic<int> syncs{0};
  size_t const threads = cli_test::thread_count();
  {
    deferred_sync d([&] { ++syncs; }, 10ms);
    std::this_thread::sleep_for(30ms);
    // At most: a thread an earlier test joined may still have been listed.
    EXPECT_LE(cli_test::thread_count(), threads);
  }
  EXPECT_EQ(syncs.load(), 0);
}

TEST(deferred_sync, one_sync_covers_the_commits_before_it) {
  std::atomic<int> syncs{0};
  deferred_sync d([&] { ++syncs; }, 200ms);
  auto const start = std::chrono::steady_clock::now();
  for (int i = 0; i < 50; ++i) d.due();
  ASSERT_TRUE(wait_for(syncs, 1, 10s));
  EXPECT_GE(std::chrono::steady_clock::now() - start, 200ms);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(syncs.load(), 1);  // the 50 took one sync
  d.due();                     // a later commit takes the next
  ASSERT_TRUE(wait_for(syncs, 2, 10s));
}

TEST(deferred_sync, a_failed_sync_is_tried_again) {
  std::atomic<int> calls{0};
  deferred_sync d(
      [&] {
        if (++calls < 3) throw std::runtime_error("EIO");
      },
      5ms);
  d.due();  // once: the retries come by themselves
  ASSERT_TRUE(wait_for(calls, 3, 10s));
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(calls.load(), 3);  // and stop once one succeeds
}

TEST(deferred_sync, stopping_does_not_wait_for_the_delay) {
  std::atomic<int> syncs{0};
  auto const start = std::chrono::steady_clock::now();
  {
    deferred_sync d([&] { ++syncs; }, 60s);
    d.due();
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);
  EXPECT_EQ(syncs.load(), 0);  // the store syncs what is left itself
}

}  // namespace
}  // namespace brevis::fs::detail
