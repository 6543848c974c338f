// oneTBB's workers name themselves `brevis-tbb` when they join the arena
// of a thread that asked for it (fs/pipeline/tbb_worker_names.h).

#include "fs/pipeline/tbb_worker_names.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace brevis::fs {
namespace {

std::string this_thread_name() {
  std::array<char, 16> name{};
  pthread_getname_np(pthread_self(), name.data(), name.size());
  return name.data();
}

// Runs two items that each wait (up to a deadline) until both have
// started, so that the second runs on a worker; the names of the threads
// that ran items other than this one's.
std::vector<std::string> names_of_helpers() {
  auto const caller = std::this_thread::get_id();
  std::atomic<int> started{0};
  std::mutex mu;
  std::vector<std::string> names;
  tbb::parallel_for(0, 2, [&](int) {
    ++started;
    auto const deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (started.load() < 2 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    if (std::this_thread::get_id() != caller) {
      std::lock_guard lk(mu);
      names.push_back(this_thread_name());
    }
  });
  return names;
}

TEST(tbb_worker_names, workers_joining_this_threads_arena_are_named) {
  // oneTBB's own count (the CPUs this process may run on), not the
  // machine's: under `taskset -c 0` it starts no worker.
  if (tbb::this_task_arena::max_concurrency() < 2) {
    GTEST_SKIP() << "oneTBB starts no worker on one CPU";
  }
  std::string const mine = this_thread_name();
  name_tbb_workers_of_this_thread();
  name_tbb_workers_of_this_thread();  // a second call changes nothing
  std::vector<std::string> const names = names_of_helpers();
  ASSERT_FALSE(names.empty()) << "no item ran on a worker";
  for (std::string const& n : names) EXPECT_EQ(n, "brevis-tbb");
  EXPECT_EQ(this_thread_name(), mine);  // the caller keeps its own name
}

}  // namespace
}  // namespace brevis::fs
