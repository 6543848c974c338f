// resize_gate: reads share it, a truncate holds it alone, and a waiting
// truncate goes before reads that come after it.

#include "fs/fuse/resize_gate.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

namespace brevis::fs {
namespace {

using namespace std::chrono_literals;

void wait_for(std::atomic<bool> const& flag) {
  while (!flag) std::this_thread::sleep_for(1ms);
}

/// Whether f returns within 10 s, on another thread (left running if not:
/// it waits on a gate that nothing will open).
template <typename F>
bool returns(F f) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread([f, done] {
    f();
    *done = true;
  }).detach();
  for (int i = 0; i < 10000 && !*done; ++i) std::this_thread::sleep_for(1ms);
  return *done;
}

TEST(resize_gate, reads_share_it) {
  auto gate = std::make_shared<resize_gate>();
  resize_gate::hold const a = resize_gate::enter_read(gate);
  EXPECT_TRUE(returns([gate] { resize_gate::enter_read(gate); }));
}

TEST(resize_gate, a_waiting_truncate_goes_before_later_reads) {
  auto gate = std::make_shared<resize_gate>();
  std::atomic<bool> resizing{false};
  std::atomic<bool> resized{false};
  std::atomic<bool> late_read{false};
  std::atomic<bool> resize_saw_late_read{false};
  auto first =
      std::make_unique<resize_gate::hold>(resize_gate::enter_read(gate));
  std::thread resize([&] {
    resizing = true;
    resize_gate::hold const h = resize_gate::enter_resize(gate);
    resized = true;
    std::this_thread::sleep_for(50ms);
    resize_saw_late_read = late_read.load();
  });
  wait_for(resizing);
  std::this_thread::sleep_for(50ms);  // the truncate now waits for `first`
  std::thread reader([&] {
    resize_gate::hold const h = resize_gate::enter_read(gate);
    late_read = true;
  });
  std::this_thread::sleep_for(50ms);
  EXPECT_FALSE(resized) << "a truncate went in while a read held the gate";
  EXPECT_FALSE(late_read) << "a read went in ahead of a waiting truncate";
  first.reset();
  resize.join();
  reader.join();
  EXPECT_TRUE(resized);
  EXPECT_FALSE(resize_saw_late_read) << "a read went in during a truncate";
  EXPECT_TRUE(late_read);
}

TEST(resize_gate, a_hold_moved_from_releases_nothing_twice) {
  auto gate = std::make_shared<resize_gate>();
  {
    resize_gate::hold a = resize_gate::enter_resize(gate);
    resize_gate::hold b = std::move(a);
    a = resize_gate::hold();  // releases nothing: `b` holds it
  }
  // Released once: both a read and another truncate go in.
  EXPECT_TRUE(returns([gate] { resize_gate::enter_read(gate); }));
  EXPECT_TRUE(returns([gate] { resize_gate::enter_resize(gate); }));
}

}  // namespace
}  // namespace brevis::fs
