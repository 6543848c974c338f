// init_once: the initialization runs exactly once, whoever races for it,
// and one that throws is tried again by the next call.

#include "codec/core/init_once.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace brevis::codec {
namespace {

TEST(init_once, runs_once_among_racing_threads) {
  for (int round = 0; round < 50; ++round) {
    init_once once;
    std::atomic<int> runs{0};
    std::atomic<int> seen_done{0};
    int value = 0;  // written by the one run, read by every caller after
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&] {
        once([&] {
          ++runs;
          value = 42;
        });
        if (value == 42) ++seen_done;
      });
    }
    for (std::thread& t : threads) t.join();
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(seen_done.load(), 4);
  }
}

TEST(init_once, a_throwing_run_is_retried) {
  init_once once;
  int calls = 0;
  EXPECT_THROW(once([&] {
                 ++calls;
                 throw std::runtime_error("first");
               }),
               std::runtime_error);
  once([&] { ++calls; });
  once([&] { ++calls; });
  EXPECT_EQ(calls, 2);
}

}  // namespace
}  // namespace brevis::codec
