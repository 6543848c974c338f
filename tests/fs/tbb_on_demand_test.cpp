// oneTBB's library loaded on the first call into it
// (fs/pipeline/tbb_on_demand.cpp), and, where the C++ runtime is linked in
// (BREVIS_STATIC_CXX_RUNTIME), exceptions that cross libtbb: this test
// links as brevis does. Each test runs in its own process (ctest), so the
// first one sees a process that has not used oneTBB yet.

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <tbb/concurrent_vector.h>
#include <tbb/global_control.h>
#include <tbb/parallel_for.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

bool tbb_loaded() {
  void* const handle = dlopen(BREVIS_TBB_SONAME, RTLD_NOW | RTLD_NOLOAD);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

TEST(tbb_on_demand, loads_the_library_on_the_first_parallel_loop) {
  EXPECT_FALSE(tbb_loaded());
  std::atomic<int> sum{0};
  tbb::parallel_for(0, 1000, [&](int i) { sum += i; });
  EXPECT_EQ(sum.load(), 499500);
  EXPECT_TRUE(tbb_loaded());
}

TEST(tbb_on_demand, an_exception_from_a_worker_reaches_the_caller_intact) {
  tbb::global_control const two(tbb::global_control::max_allowed_parallelism,
                                2);
  auto const caller = std::this_thread::get_id();
  // A body on a worker thread throws; libtbb catches it there and rethrows
  // it here. Items take a while so that the worker does take some; retried
  // in case a busy machine left every item to this thread.
  int thrown = 0;
  for (int round = 0; round < 20 && thrown < 3; ++round) {
    try {
      tbb::parallel_for(0, 64, [&](int i) {
        std::this_thread::sleep_for(std::chrono::microseconds(300));
        if (std::this_thread::get_id() != caller) {
          throw std::out_of_range("item " + std::to_string(i));
        }
      });
    } catch (std::out_of_range const& e) {
      EXPECT_EQ(std::string(e.what()).rfind("item ", 0), 0u) << e.what();
      ++thrown;
    }
    EXPECT_EQ(std::uncaught_exceptions(), 0);
  }
  ASSERT_GT(thrown, 0) << "no item ran on a worker thread";
  // Every thread's exception state is back to none: with two C++ runtimes
  // (the executable's throwing, libstdc++.so's catching in libtbb) the
  // worker's count of uncaught exceptions would stay raised.
  std::atomic<int> raised{0};
  tbb::parallel_for(0, 64, [&](int) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    if (std::uncaught_exceptions() != 0) ++raised;
  });
  EXPECT_EQ(raised.load(), 0);
}

TEST(tbb_on_demand, an_exception_thrown_inside_libtbb_is_caught_here) {
  // concurrent_vector::at has libtbb build and throw the out_of_range.
  tbb::concurrent_vector<int> const v(3);
  try {
    (void)v.at(5);
    FAIL() << "nothing thrown";
  } catch (std::out_of_range const&) {
  }
  EXPECT_TRUE(tbb_loaded());
  EXPECT_EQ(std::uncaught_exceptions(), 0);
}

}  // namespace
