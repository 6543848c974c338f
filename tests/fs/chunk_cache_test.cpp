// The read path's chunk cache: budget and LRU order, generations and
// invalidation, joined concurrent loads, errors, reservations (taken over,
// run, withdrawn), the prefetcher's jobs and the decode slots.

#include "fs/cache/chunk_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "fs/cache/chunk_buffers.h"
#include "fs/cache/decode_slots.h"

namespace brevis::fs {
namespace {

chunk_cache::chunk make(size_t n, uint8_t v) {
  auto c = std::make_shared<chunk_bytes>(n);
  c->resize(n);
  std::memset(c->data(), v, n);
  return c;
}

TEST(chunk_cache, keeps_within_budget_and_evicts_lru) {
  chunk_cache c(4 * 1000, 1);
  for (uint64_t i = 0; i < 4; ++i) c.insert({1, 1, i * 1000}, make(1000, 1));
  EXPECT_EQ(c.entries(), 4u);
  EXPECT_EQ(c.bytes(), 4000u);
  ASSERT_TRUE(c.find({1, 1, 0}));  // now the most recent
  c.insert({1, 1, 9000}, make(1000, 2));
  EXPECT_EQ(c.bytes(), 4000u);
  EXPECT_TRUE(c.find({1, 1, 0}));
  EXPECT_FALSE(c.find({1, 1, 1000}));  // the least recent went
  EXPECT_TRUE(c.find({1, 1, 9000}));
  EXPECT_EQ(c.stats().evictions, 1u);
  c.insert({1, 1, 20000}, make(5000, 3));  // larger than the budget
  EXPECT_FALSE(c.find({1, 1, 20000}));
  EXPECT_LE(c.bytes(), c.budget());
}

TEST(chunk_cache, zero_budget_keeps_nothing) {
  chunk_cache c(0);
  int loads = 0;
  auto load = [&] {
    ++loads;
    return make(10, 1);
  };
  EXPECT_EQ(c.get_or_load({1, 1, 0}, load)->size(), 10u);
  EXPECT_EQ(c.get_or_load({1, 1, 0}, load)->size(), 10u);
  EXPECT_EQ(loads, 2);
  EXPECT_EQ(c.bytes(), 0u);
}

TEST(chunk_cache, generations_and_invalidation) {
  chunk_cache c(1 << 20);
  c.insert({7, 1, 0}, make(100, 1));
  c.insert({7, 1, 100}, make(100, 1));
  c.insert({8, 1, 0}, make(100, 8));
  // A new generation of the file never sees the old bytes.
  EXPECT_FALSE(c.find({7, 2, 0}));
  EXPECT_EQ((*c.find({7, 1, 0}))[0], 1);
  c.invalidate(7);
  EXPECT_FALSE(c.find({7, 1, 0}));
  EXPECT_FALSE(c.find({7, 1, 100}));
  EXPECT_TRUE(c.find({8, 1, 0}));
  EXPECT_EQ(c.bytes(), 100u);
}

TEST(chunk_cache, load_once_and_errors_reach_the_caller) {
  chunk_cache c(1 << 20);
  int loads = 0;
  for (int i = 0; i < 3; ++i) {
    auto got = c.get_or_load({1, 1, 0}, [&] {
      ++loads;
      return make(64, 5);
    });
    EXPECT_EQ((*got)[63], 5);
  }
  EXPECT_EQ(loads, 1);
  EXPECT_THROW(c.get_or_load({1, 1, 64},
                             []() -> chunk_cache::chunk {
                               throw std::runtime_error("x");
                             }),
               std::runtime_error);
  EXPECT_FALSE(c.present({1, 1, 64}));  // a failure is not kept
  EXPECT_EQ(c.get_or_load({1, 1, 64}, [] { return make(1, 9); })->data()[0], 9);
}

// 40 chunks of 4 KiB: all fit in 1 MiB; in 64 KiB the shards thrash.
void hammer(size_t budget, bool fits) {
  chunk_cache c(budget, 4);
  std::atomic<int> loads{0};
  std::atomic<bool> bad{false};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        uint64_t const off = static_cast<uint64_t>((i * 7 + t) % 40) * 4096;
        auto got = c.get_or_load({3, 1, off}, [&] {
          ++loads;
          std::this_thread::yield();
          return make(4096, static_cast<uint8_t>(off / 4096));
        });
        if (got->size() != 4096 || (*got)[4095] != off / 4096) bad = true;
        if (i % 500 == 0 && t == 0) c.invalidate(3);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_FALSE(bad);
  EXPECT_LE(c.bytes(), c.budget());
  auto const s = c.stats();
  EXPECT_EQ(s.hits + s.misses + s.joined, 8u * 2000u);
  EXPECT_EQ(static_cast<uint64_t>(loads), s.misses);
  if (fits) {
    EXPECT_GT(s.hits, 0u);
  }
}

TEST(chunk_cache, concurrent_readers_share_one_load) {
  hammer(1 << 20, true);
  hammer(64 << 10, false);
}

TEST(chunk_cache, a_reservation_is_run_once_by_whoever_comes_first) {
  chunk_cache c(1 << 20);
  // Taken over by a reader: its load runs, the reservation's does not.
  auto r = c.reserve({1, 1, 0});
  ASSERT_TRUE(r);
  EXPECT_TRUE(c.present({1, 1, 0}));
  EXPECT_FALSE(c.reserve({1, 1, 0}));  // one reservation per chunk
  EXPECT_EQ(c.get_or_load({1, 1, 0}, [] { return make(8, 1); })->data()[0], 1);
  bool ran = false;
  r->run([&] { return ran = true, make(8, 2); });
  EXPECT_FALSE(ran);
  r.reset();
  EXPECT_EQ(c.find({1, 1, 0})->data()[0], 1);
  EXPECT_FALSE(c.reserve({1, 1, 0}));  // cached
  // Run: a later reader finds it cached.
  r = c.reserve({1, 1, 8});
  r->run([] { return make(8, 3); });
  r.reset();
  int loads = 0;
  EXPECT_EQ(
      c.get_or_load({1, 1, 8}, [&] { return ++loads, make(8, 4); })->data()[0],
      3);
  EXPECT_EQ(loads, 0);
  // Withdrawn: nothing is left behind, and a reader loads it.
  r = c.reserve({1, 1, 16});
  r.reset();
  EXPECT_FALSE(c.present({1, 1, 16}));
  EXPECT_EQ(c.get_or_load({1, 1, 16}, [] { return make(8, 5); })->data()[0], 5);
  EXPECT_EQ(c.stats().misses, 3u);  // one load per chunk
  // A failed reserved load reaches a reader waiting for it; nothing is kept.
  r = c.reserve({1, 1, 24});
  std::atomic<bool> started{false}, fail{false};
  std::thread job([&] {
    try {
      r->run([&]() -> chunk_cache::chunk {
        started = true;
        while (!fail) std::this_thread::yield();
        throw std::runtime_error("bad chunk");
      });
    } catch (std::runtime_error const&) {
    }
  });
  while (!started) std::this_thread::yield();
  std::thread waiter([&] {
    EXPECT_THROW(c.get_or_load({1, 1, 24}, [] { return make(8, 6); }),
                 std::runtime_error);
  });
  while (c.stats().joined == 0) std::this_thread::yield();  // it waits
  fail = true;
  job.join();
  waiter.join();
  EXPECT_FALSE(c.present({1, 1, 24}));
}

// Readers and prefetch jobs race over reserved chunks, some of which are
// withdrawn (the jobs stop): every reader gets the right bytes, and each
// chunk is loaded once.
TEST(chunk_cache, reserved_chunks_race_with_readers) {
  for (int round = 0; round < 20; ++round) {
    chunk_cache c(1 << 20, 4);
    std::atomic<int> loads{0};
    std::atomic<bool> bad{false};
    auto load = [&](uint64_t i) {
      ++loads;
      std::this_thread::yield();
      return make(256, static_cast<uint8_t>(i));
    };
    {
      background_jobs jobs(2, 1000);
      for (uint64_t i = 0; i < 64; ++i) {
        auto r = c.reserve({7, 1, i});
        ASSERT_TRUE(r);
        jobs.offer([r, i, &load] { r->run([&] { return load(i); }); });
      }
      std::vector<std::thread> readers;
      for (int t = 0; t < 4; ++t) {
        readers.emplace_back([&, t] {
          for (uint64_t k = 0; k < 64; ++k) {
            uint64_t const i = (k * 5 + static_cast<uint64_t>(t) * 16) % 64;
            auto got = c.get_or_load({7, 1, i}, [&] { return load(i); });
            if (got->size() != 256 || (*got)[255] != i) bad = true;
          }
        });
      }
      if (round % 2) jobs.stop();  // withdraws the jobs not yet run
      for (auto& th : readers) th.join();
    }
    EXPECT_FALSE(bad);
    EXPECT_EQ(loads, 64);
    EXPECT_EQ(c.entries(), 64u);
    EXPECT_EQ(c.stats().misses, 64u);
  }
}

TEST(decode_slots, never_more_decodes_than_slots_and_a_readers) {
  decode_slots slots(2);
  EXPECT_EQ(slots.size(), 2u);
  std::atomic<int> inside{0};
  std::atomic<int> most{0};
  std::atomic<int> background{0};
  std::atomic<int> most_background{0};
  auto note_most = [](std::atomic<int>& m, int now) {
    int seen = m;
    while (now > seen && !m.compare_exchange_weak(seen, now)) {
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        bool const reader = (t + i) % 2 == 0;
        decode_slots::slot const s(slots, reader);
        note_most(most, ++inside);
        if (!reader) note_most(most_background, ++background);
        std::this_thread::yield();
        if (!reader) --background;
        --inside;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(most, 3);  // the background's two and the reader's one
  EXPECT_GE(most, 1);
  EXPECT_LE(most_background, 2);
  EXPECT_LE(slots.peak(), 3u);
  EXPECT_GE(decode_slots(0).size(), 1u);  // one per core
}

// With every background slot held (the prefetcher decoding on each core),
// a reader still gets a slot at once; a background decode waits, and the
// reader's slot let go does not let it in.
TEST(decode_slots, a_reader_has_a_slot_beyond_the_background_decodes) {
  decode_slots slots(2);
  auto a = std::make_unique<decode_slots::slot>(slots, false);
  auto b = std::make_unique<decode_slots::slot>(slots, false);
  std::atomic<bool> third_in{false};
  std::thread third([&] {
    decode_slots::slot const s(slots, false);
    third_in = true;
  });
  auto const waits = [&](size_t n) {
    auto const deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (slots.waiting() < n && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    return slots.waiting() >= n;
  };
  if (!waits(1)) {
    ADD_FAILURE() << "a third background decode did not wait";
    b.reset();
    third.join();
    a.reset();
    return;
  }
  for (int round = 0; round < 2; ++round) {
    std::atomic<bool> read{false};
    std::thread reader([&] {
      decode_slots::slot const s(slots, true);
      read = true;
    });
    auto const deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!read && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    EXPECT_TRUE(read) << "the reader waited behind the background decodes";
    if (!read) b.reset();  // let it in, so the test ends
    reader.join();
  }
  EXPECT_EQ(slots.peak(), 3u);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(third_in);
  EXPECT_EQ(slots.waiting(), 1u);
  // Let go in the order taken back (each slot's scratch scope nests on
  // this thread).
  b.reset();
  third.join();
  EXPECT_TRUE(third_in);
  a.reset();
}

// A slot lends its decode a scratch pool: what one decode gives back, the
// next decode in that slot takes, whichever thread runs it; two slots held
// at once lend two pools.
TEST(decode_slots, slots_lend_their_scratch_pools) {
  decode_slots one(1);
  uint8_t const* given = nullptr;
  // The first thread lives on (its own pool with it) until the second has
  // taken its buffer: were the pool the thread's own, the buffer would
  // still be held there, not freed for the allocator to hand out again.
  std::atomic<bool> taken{false};
  std::atomic<bool> released{false};
  std::thread first_thread([&] {
    {
      decode_slots::slot const s(one, true);
      codec::bytes b = codec::scratch::take(888888);
      given = b.data();
      codec::scratch::give(std::move(b));
    }
    released = true;
    while (!taken) std::this_thread::yield();
  });
  while (!released) std::this_thread::yield();
  std::thread([&] {
    decode_slots::slot const s(one, false);
    codec::bytes b = codec::scratch::take(800000);
    EXPECT_EQ(b.data(), given);
    taken = true;
    codec::scratch::give(std::move(b));
  }).join();
  first_thread.join();
  codec::bytes outside = codec::scratch::take(800000);  // this thread's own
  EXPECT_NE(outside.data(), given);
  codec::scratch::give(std::move(outside));

  decode_slots two(2);
  decode_slots::slot const a(two, true);
  codec::bytes first = codec::scratch::take(999999);
  uint8_t const* const p = first.data();
  codec::scratch::give(std::move(first));
  std::thread([&] {
    decode_slots::slot const b(two, true);  // the other slot's pool
    codec::bytes other = codec::scratch::take(900000);
    EXPECT_NE(other.data(), p);
    codec::scratch::give(std::move(other));
  }).join();
}

// A slot let go wakes one waiter, a reader first. Every slot let go at
// once while a reader and a background decode wait: the reader takes one,
// and another reaches the background decode, which the waiting reader held
// back when they were let go (a lost wake-up leaves a waiter to its 100 ms
// re-check: slower, not hung).
TEST(decode_slots, slots_let_go_together_reach_every_waiter) {
  for (int round = 0; round < 50; ++round) {
    decode_slots slots(2);
    // Every slot held, the reader's too.
    auto a = std::make_unique<decode_slots::slot>(slots, true);
    auto b = std::make_unique<decode_slots::slot>(slots, false);
    auto c = std::make_unique<decode_slots::slot>(slots, true);
    std::atomic<int> done{0};
    std::thread reader([&] {
      decode_slots::slot const s(slots, true);
      ++done;
    });
    while (slots.waiting() < 1) std::this_thread::yield();
    std::thread background([&] {
      decode_slots::slot const s(slots, false);
      ++done;
    });
    while (slots.waiting() < 2) std::this_thread::yield();
    c.reset();  // newest first: their scratch scopes nest on this thread
    b.reset();
    a.reset();
    reader.join();
    background.join();
    EXPECT_EQ(done, 2);
    EXPECT_EQ(slots.waiting(), 0u);
  }
  // Many waiters of both kinds behind one slot (and the reader's): all get
  // through.
  decode_slots one(1);
  auto held = std::make_unique<decode_slots::slot>(one, false);
  auto held_reader = std::make_unique<decode_slots::slot>(one, true);
  std::atomic<int> done{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      decode_slots::slot const s(one, t % 2 == 0);
      ++done;
    });
  }
  while (one.waiting() < 8) std::this_thread::yield();
  held_reader.reset();
  held.reset();
  for (auto& th : threads) th.join();
  EXPECT_EQ(done, 8);
  EXPECT_EQ(one.peak(), 2u);
}

TEST(background_jobs, runs_drops_when_full_and_stops) {
  std::atomic<int> ran{0};
  {
    background_jobs jobs(2, 1000);
    for (int i = 0; i < 100; ++i) EXPECT_TRUE(jobs.offer([&] { ++ran; }));
    jobs.drain();
    EXPECT_EQ(ran, 100);
    jobs.stop();
    EXPECT_FALSE(jobs.offer([&] { ++ran; }));
  }
  background_jobs none(0, 4);
  EXPECT_FALSE(none.offer([] {}));
  // A full queue drops the offer rather than blocking the reader.
  background_jobs one(1, 1);
  std::atomic<bool> release{false};
  one.offer([&] {
    while (!release) std::this_thread::yield();
  });
  int taken = 0;
  for (int i = 0; i < 5; ++i) taken += one.offer([] {});
  EXPECT_LE(taken, 2);
  release = true;
  one.drain();
}

TEST(chunk_buffers, reused_after_the_last_reference_and_bounded) {
  auto pool = chunk_buffers::make(3000);
  uint8_t const* first = nullptr;
  {
    std::shared_ptr<chunk_bytes> a = pool->take(1024);
    ASSERT_EQ(a->size(), 1024u);
    first = a->data();
    chunk_cache c(1 << 20);
    c.insert({1, 1, 0}, a);  // the cache shares it
    a.reset();
    EXPECT_EQ(pool->idle_bytes(), 0u);
    c.erase({1, 1, 0});  // the last reference: back to the pool
    EXPECT_EQ(pool->idle_bytes(), 1024u);
  }
  // Not for a much smaller chunk: the cache would not see the rest.
  std::shared_ptr<chunk_bytes> small = pool->take(128);
  EXPECT_NE(small->data(), first);
  EXPECT_EQ(pool->reused(), 0u);
  std::shared_ptr<chunk_bytes> b = pool->take(600);  // within twice
  EXPECT_EQ(b->data(), first);
  EXPECT_EQ(b->size(), 600u);
  EXPECT_EQ(pool->reused(), 1u);
  small.reset();  // kept: 128 + 1024 (in use) within 3000
  EXPECT_EQ(pool->idle_bytes(), 128u);
  // Nothing idle fits: a new one, too large to keep once it comes back.
  std::shared_ptr<chunk_bytes> c = pool->take(5000);
  EXPECT_EQ(c->size(), 5000u);
  EXPECT_EQ(pool->reused(), 1u);
  c.reset();
  EXPECT_EQ(pool->idle_bytes(), 128u);
  b.reset();
  EXPECT_EQ(pool->idle_bytes(), 1152u);
  // A fresh buffer's capacity is its size's class (a quarter octave wide),
  // which the cache counts.
  std::shared_ptr<chunk_bytes> e = pool->take(3000);
  EXPECT_EQ(e->capacity(), 3072u);
  chunk_cache counted(1 << 20);
  counted.insert({1, 1, 0}, e);
  EXPECT_EQ(counted.bytes(), 3072u);
  counted.erase({1, 1, 0});
  e.reset();
  // A buffer outliving its pool is freed (ASan would see a leak or worse).
  std::shared_ptr<chunk_bytes> d = pool->take(100);
  pool.reset();
  d.reset();
}

TEST(chunk_buffers, capacity_classes_are_a_quarter_octave_apart) {
  EXPECT_EQ(chunk_buffers::capacity_class(1), 64u);
  EXPECT_EQ(chunk_buffers::capacity_class(64), 64u);
  EXPECT_EQ(chunk_buffers::capacity_class(65), 80u);
  EXPECT_EQ(chunk_buffers::capacity_class(4096), 4096u);
  EXPECT_EQ(chunk_buffers::capacity_class(4097), 5120u);
  EXPECT_EQ(chunk_buffers::capacity_class(1u << 20), 1u << 20);
  EXPECT_EQ(chunk_buffers::capacity_class(887808), 917504u);  // 7/8 MiB
  for (size_t size = 1; size < (3u << 20); size = size * 9 / 8 + 1) {
    size_t const c = chunk_buffers::capacity_class(size);
    EXPECT_GE(c, size);
    EXPECT_LE(c, std::max<size_t>(64, size + size / 4)) << size;
    // A class is its own class: a buffer is reused for its own size.
    EXPECT_EQ(chunk_buffers::capacity_class(c), c);
  }
}

TEST(chunk_buffers, over_the_bound_the_longest_idle_go) {
  auto pool = chunk_buffers::make(4096);
  std::shared_ptr<chunk_bytes> a = pool->take(1024), b = pool->take(1024),
                               c = pool->take(2048), d = pool->take(2048);
  uint8_t const* const b_data = b->data();
  uint8_t const* const c_data = c->data();
  uint8_t const* const d_data = d->data();
  a.reset();
  b.reset();
  c.reset();
  EXPECT_EQ(pool->idle_bytes(), 4096u);
  d.reset();  // 6144 idle: a, then b go (idle longest)
  EXPECT_EQ(pool->idle_bytes(), 4096u);
  std::shared_ptr<chunk_bytes> e = pool->take(1500);
  std::shared_ptr<chunk_bytes> f = pool->take(1500);
  EXPECT_TRUE((e->data() == c_data && f->data() == d_data) ||
              (e->data() == d_data && f->data() == c_data));
  EXPECT_EQ(pool->idle_bytes(), 0u);
  std::shared_ptr<chunk_bytes> g = pool->take(1000);  // b went: fresh
  EXPECT_EQ(pool->reused(), 2u);
  (void)b_data;
  // A reused buffer keeps what was written; growing within it fills
  // nothing (its size follows the chunk, its capacity stays).
  g->data()[0] = 42;
  uint8_t const* const g_data = g->data();
  g.reset();
  std::shared_ptr<chunk_bytes> h = pool->take(1024);
  ASSERT_EQ(h->data(), g_data);
  EXPECT_EQ(h->size(), 1024u);
  EXPECT_EQ(h->capacity(), 1024u);
  EXPECT_EQ((*h)[0], 42);
}

}  // namespace
}  // namespace brevis::fs
