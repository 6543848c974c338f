#include "fs/cache/chunk_cache.h"

#include <algorithm>

#include "codec/core/thread_name.h"

namespace brevis::fs {
namespace {

// What a chunk holds of the budget: its buffer's capacity (a reused buffer
// may be larger than the chunk).
size_t footprint(chunk_bytes const& b) { return b.capacity(); }

}  // namespace

chunk_cache::chunk_cache(size_t budget, unsigned shards) : budget_(budget) {
  if (shards == 0) {
    shards = static_cast<unsigned>(
        std::clamp<size_t>(budget / (16u << 20), size_t{1}, size_t{16}));
  }
  shards = std::clamp(shards, 1u, 64u);
  shard_budget_ = budget / shards;
  for (unsigned i = 0; i < shards; ++i) {
    shards_.push_back(std::make_unique<shard>());
  }
}

chunk_cache::shard& chunk_cache::shard_of(chunk_id const& id) {
  return *shards_[hasher{}(id) % shards_.size()];
}

chunk_cache::chunk chunk_cache::find(chunk_id const& id) {
  shard& s = shard_of(id);
  std::lock_guard lk(s.mu);
  auto it = s.map.find(id);
  if (it == s.map.end()) {
    ++s.stats.misses;
    return nullptr;
  }
  ++s.stats.hits;
  s.lru.splice(s.lru.begin(), s.lru, it->second);
  return it->second->data;
}

bool chunk_cache::present(chunk_id const& id) {
  shard& s = shard_of(id);
  std::lock_guard lk(s.mu);
  return s.map.count(id) != 0 || s.loading.count(id) != 0;
}

chunk_cache::chunk chunk_cache::get_or_load(chunk_id const& id,
                                            loader const& load) {
  shard& s = shard_of(id);
  for (;;) {
    std::shared_ptr<load_state> st;
    {
      std::unique_lock lk(s.mu);
      if (auto it = s.map.find(id); it != s.map.end()) {
        ++s.stats.hits;
        s.lru.splice(s.lru.begin(), s.lru, it->second);
        return it->second->data;
      }
      if (auto it = s.loading.find(id); it != s.loading.end()) {
        st = it->second;
        if (!st->taken) {
          // Reserved but not started: this reader needs it now.
          st->taken = true;
          ++s.stats.misses;
          lk.unlock();
          return run_load(s, id, st, load);
        }
        ++s.stats.joined;
        lk.unlock();
        if (chunk c = st->future.get()) return c;
        continue;  // withdrawn: look again
      }
      ++s.stats.misses;
      st = std::make_shared<load_state>();
      st->taken = true;
      s.loading.emplace(id, st);
    }
    return run_load(s, id, st, load);
  }
}

chunk_cache::chunk chunk_cache::run_load(shard& s, chunk_id const& id,
                                         std::shared_ptr<load_state> const& st,
                                         loader const& load) {
  auto forget = [&] {
    auto it = s.loading.find(id);
    if (it != s.loading.end() && it->second == st) s.loading.erase(it);
  };
  chunk c;
  try {
    c = load();
  } catch (...) {
    {
      std::lock_guard lk(s.mu);
      forget();
    }
    st->promise.set_exception(std::current_exception());
    throw;
  }
  {
    std::lock_guard lk(s.mu);
    forget();
    if (c) insert_locked(s, id, c);
  }
  st->promise.set_value(c);
  return c;
}

std::shared_ptr<chunk_cache::reservation> chunk_cache::reserve(
    chunk_id const& id) {
  shard& s = shard_of(id);
  std::lock_guard lk(s.mu);
  if (s.map.count(id) != 0 || s.loading.count(id) != 0) return nullptr;
  auto st = std::make_shared<load_state>();
  s.loading.emplace(id, st);
  return std::make_shared<reservation>(*this, id, std::move(st));
}

chunk_cache::reservation::reservation(chunk_cache& cache, chunk_id id,
                                      std::shared_ptr<load_state> state)
    : cache_(cache), id_(id), state_(std::move(state)) {}

chunk_cache::reservation::~reservation() {
  shard& s = cache_.shard_of(id_);
  {
    std::lock_guard lk(s.mu);
    if (state_->taken) return;
    state_->taken = true;
    auto it = s.loading.find(id_);
    if (it != s.loading.end() && it->second == state_) s.loading.erase(it);
  }
  state_->promise.set_value(nullptr);
}

void chunk_cache::reservation::run(loader const& load) {
  shard& s = cache_.shard_of(id_);
  {
    std::lock_guard lk(s.mu);
    if (state_->taken) return;
    state_->taken = true;
    ++s.stats.misses;
  }
  cache_.run_load(s, id_, state_, load);
}

void chunk_cache::insert(chunk_id const& id, chunk c) {
  if (!c) return;
  shard& s = shard_of(id);
  std::lock_guard lk(s.mu);
  insert_locked(s, id, std::move(c));
}

void chunk_cache::insert_locked(shard& s, chunk_id const& id, chunk c) {
  size_t const size = footprint(*c);
  if (auto it = s.map.find(id); it != s.map.end()) {
    s.bytes -= footprint(*it->second->data);
    s.lru.erase(it->second);
    s.map.erase(it);
  }
  if (size > shard_budget_) return;
  while (s.bytes + size > shard_budget_ && !s.lru.empty()) {
    entry const& victim = s.lru.back();
    s.bytes -= footprint(*victim.data);
    s.map.erase(victim.id);
    s.lru.pop_back();
    ++s.stats.evictions;
  }
  s.lru.push_front(entry{id, std::move(c)});
  s.map.emplace(id, s.lru.begin());
  s.bytes += size;
}

void chunk_cache::invalidate(uint64_t ino) {
  for (auto& sp : shards_) {
    shard& s = *sp;
    std::lock_guard lk(s.mu);
    for (auto it = s.lru.begin(); it != s.lru.end();) {
      if (it->id.ino == ino) {
        s.bytes -= footprint(*it->data);
        s.map.erase(it->id);
        it = s.lru.erase(it);
      } else {
        ++it;
      }
    }
  }
}

void chunk_cache::erase(chunk_id const& id) {
  shard& s = shard_of(id);
  chunk dropped;  // its buffer goes back after the lock is released
  std::lock_guard lk(s.mu);
  auto it = s.map.find(id);
  if (it == s.map.end()) return;
  dropped = std::move(it->second->data);
  s.bytes -= footprint(*dropped);
  s.lru.erase(it->second);
  s.map.erase(it);
}

size_t chunk_cache::bytes() const {
  size_t n = 0;
  for (auto const& s : shards_) {
    std::lock_guard lk(s->mu);
    n += s->bytes;
  }
  return n;
}

size_t chunk_cache::entries() const {
  size_t n = 0;
  for (auto const& s : shards_) {
    std::lock_guard lk(s->mu);
    n += s->map.size();
  }
  return n;
}

chunk_cache::counters chunk_cache::stats() const {
  counters c;
  for (auto const& s : shards_) {
    std::lock_guard lk(s->mu);
    c.hits += s->stats.hits;
    c.misses += s->stats.misses;
    c.joined += s->stats.joined;
    c.evictions += s->stats.evictions;
  }
  return c;
}

// -------------------------------------------------------- background_jobs

background_jobs::background_jobs(unsigned threads, size_t max_queued)
    : max_queued_(max_queued) {
  for (unsigned i = 0; i < threads; ++i)
    threads_.emplace_back([this] {
      codec::name_this_thread("brevis-prefetch");
      run();
    });
}

background_jobs::~background_jobs() { stop(); }

bool background_jobs::offer(std::function<void()> job) {
  {
    std::lock_guard lk(mu_);
    if (stopping_ || threads_.empty() || jobs_.size() >= max_queued_) {
      return false;
    }
    jobs_.push_back(std::move(job));
  }
  cv_.notify_one();
  return true;
}

void background_jobs::stop() {
  std::deque<std::function<void()>> dropped;  // destroyed unlocked
  {
    std::lock_guard lk(mu_);
    stopping_ = true;
    dropped.swap(jobs_);
  }
  cv_.notify_all();
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
  idle_cv_.notify_all();
}

void background_jobs::drain() {
  std::unique_lock lk(mu_);
  idle_cv_.wait(lk, [&] { return jobs_.empty() && running_ == 0; });
}

void background_jobs::run() {
  std::unique_lock lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lk.unlock();
    try {
      job();
    } catch (...) {
      // A guess that failed; the read that needs the chunk will say why.
    }
    job = nullptr;  // its reservation, if any, is let go unlocked
    lk.lock();
    --running_;
    if (jobs_.empty() && running_ == 0) idle_cv_.notify_all();
  }
}

}  // namespace brevis::fs
