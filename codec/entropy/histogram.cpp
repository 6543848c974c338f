#include "codec/entropy/histogram.h"

#include <algorithm>
#include <bit>
#include <limits>
#include <memory>
#include <utility>

#include "codec/entropy/rans_static.h"

namespace brevis::codec {
namespace {

constexpr size_t symbols = 65536;
constexpr size_t block = 16;  // symbols per "touched" flag
// Below this many lanes, sorting the symbols seen beats scanning the
// counters of the blocks they touch (on fp16 weights, whose alphabets are
// dense, a block rarely holds two symbols); measured on the corpus.
constexpr size_t sort_below = 8192;
// Zeros of sparse tensors are counted apart, in this many counters past the
// symbols' (see zero_slot).
constexpr size_t zero_lanes = 4;

// Per-thread counters, all zero between calls: only the entries a call
// touches are cleared, so small inputs cost their size rather than 2^16.
// One set of 32-bit counters (256 KiB): two sets by lane parity, to overlap
// the increments of repeated values, measured slower on bf16 and fp16
// weights (17 -> 11 ms on blazepose-heavy's fp16 tensors of 64Ki lanes or
// more, 9 -> 7.5 on its bf16 ones): their cache footprint costs more than
// the repeats. Callers check the count fits.
struct counters {
  std::vector<uint32_t> count = std::vector<uint32_t>(symbols + zero_lanes, 0);
  std::vector<uint8_t> touched = std::vector<uint8_t>(symbols / block, 0);
  // The smallest inputs' distinct symbols, and their sorted copy.
  std::unique_ptr<uint16_t[]> seen = std::make_unique<uint16_t[]>(sort_below);
  std::unique_ptr<uint16_t[]> sorted = std::make_unique<uint16_t[]>(sort_below);
  // The large inputs' histogram, in one scan of the counters, before it is
  // copied out at its size (reused: no fresh pages to fault in).
  sparse_histogram16 scratch = sparse_histogram16(symbols);
};

counters& local() {
  thread_local counters c;
  return c;
}

// Writes the counters of the block starting at `first` at dst[k...],
// advancing k past the nonzero ones (the others are overwritten next), and
// clears them: no branch a symbol.
size_t drain_block(uint32_t* count, uint32_t first,
                   std::pair<uint32_t, uint32_t>* dst, size_t k) {
  for (uint32_t s = first; s < first + block; ++s) {
    dst[k] = {s, count[s]};
    k += count[s] != 0;
    count[s] = 0;
  }
  return k;
}

// Drains the blocks flagged in c.touched into c.scratch, in symbol order,
// and clears their flags; returns how many entries it wrote. Eight flags at
// a time: tiny inputs touch few of the 4096 blocks.
size_t drain_touched(counters& c) {
  uint32_t* const count = c.count.data();
  uint8_t* const touched = c.touched.data();
  auto* const dst = c.scratch.data();
  size_t k = 0;
  for (uint32_t t = 0; t < symbols / block; t += 8) {
    if (load_le<uint64_t>(touched + t) == 0) continue;
    for (uint32_t u = t; u < t + 8; ++u) {
      if (touched[u]) touched[u] = 0, k = drain_block(count, u * block, dst, k);
    }
  }
  return k;
}

// Lanes counted plainly first, whose zeros pick the loop for the rest (a
// sixteenth or more: spread_zeros). Judged from lanes spread over the whole
// input instead, the guess missed the cache (and the TLB) at every lane: 45%
// of histogram16's time on centernet.fp16's tensors. It only picks a loop;
// both count alike.
constexpr size_t probe_lanes = 1024;

bool many_zeros(uint32_t const* count, size_t probed) {
  return probed == probe_lanes && count[0] >= probe_lanes / 16;
}

// The counter of symbol `s` in lane k (of zero_lanes): with `spread_zeros`,
// a zero counts at count[symbols + k] instead of count[0], so that a run of
// zeros does not wait on one counter's increment after another (sparse
// handlandmark fp16: 2.2 ns a lane, against 0.5 on dense weights).
// fold_zeros adds them back.
template <bool spread_zeros>
uint32_t zero_slot(uint32_t s, uint32_t k) {
  // Arithmetic, not ?: (which GCC compiled to a branch, mispredicted on
  // every other lane of pruned weights: 37% zeros, 37% -0).
  if constexpr (spread_zeros)
    return s + static_cast<uint32_t>(s == 0) * (symbols + k);
  return s;
}

template <bool spread_zeros>
void fold_zeros(uint32_t* count) {
  if constexpr (spread_zeros) {
    for (size_t k = 0; k < zero_lanes; ++k) {
      count[0] += count[symbols + k];
      count[symbols + k] = 0;
    }
  }
}

// Counts the lanes of large inputs into count[], a cache line at a time,
// fetching the line `ahead` bytes on: the input is usually a file's mapped
// pages, 4 KiB apart in memory, where the hardware prefetcher stops at every
// page's end.
template <bool spread_zeros>
void count_large(uint8_t const* p, size_t n, uint32_t* count) {
  auto const slot = zero_slot<spread_zeros>;
  constexpr size_t ahead = 2048;
  size_t i = 0;
  for (; 2 * i + 64 + ahead <= 2 * n; i += 32) {
    __builtin_prefetch(p + 2 * i + ahead);
    // Four lanes a 64-bit load.
    for (size_t j = i; j < i + 32; j += 4) {
      auto const w = load_le<uint64_t>(p + 2 * j);
      ++count[slot(w & 0xFFFF, 0)];
      ++count[slot((w >> 16) & 0xFFFF, 1)];
      ++count[slot((w >> 32) & 0xFFFF, 2)];
      ++count[slot(static_cast<uint32_t>(w >> 48), 3)];
    }
  }
  for (; i < n; ++i) ++count[load_le<uint16_t>(p + 2 * i)];
  fold_zeros<spread_zeros>(count);
}

// Counts the lanes of mid-sized inputs into count[], flagging the blocks of
// symbols they touch; zeros as in count_large.
template <bool spread_zeros>
void count_marked(uint8_t const* p, size_t n, uint32_t* count,
                  uint8_t* touched) {
  for (size_t i = 0; i < n; ++i) {
    uint32_t const a = load_le<uint16_t>(p + 2 * i);
    ++count[zero_slot<spread_zeros>(a, i % zero_lanes)];
    touched[a / block] = 1;
  }
  fold_zeros<spread_zeros>(count);
}

}  // namespace

sparse_histogram16 histogram16(byte_view data) {
  size_t const n = data.size() / 2;
  sparse_histogram16 out;
  if (n > std::numeric_limits<uint32_t>::max()) {  // past u32 counters
    std::vector<uint64_t> hist;
    rans_static::histogram(data, 2, hist);
    for (uint32_t s = 0; s < symbols; ++s) {
      if (hist[s]) out.emplace_back(s, entry_count(hist[s]));
    }
    return out;
  }
  counters& c = local();
  uint8_t const* const p = data.data();
  uint32_t* const count = c.count.data();
  if (n >= symbols) {
    // Large inputs: scanning the counters (skipping empty blocks a vector
    // at a time) costs less than marking the symbols seen.
    count_large<false>(p, probe_lanes, count);
    uint8_t const* const rest = p + 2 * probe_lanes;
    if (many_zeros(count, probe_lanes)) {
      count_large<true>(rest, n - probe_lanes, count);
    } else {
      count_large<false>(rest, n - probe_lanes, count);
    }
    // Filled without a branch a symbol (fp16 weights' alphabets are dense
    // and irregular): every counter of a nonempty block is written at the
    // next entry, which only a nonzero count keeps. Then copied out at its
    // size: growing the output by doubling would copy it and page in fresh
    // memory at every step (a bf16 tensor has tens of thousands of symbols,
    // so its histogram is hundreds of KiB).
    auto* const dst = c.scratch.data();
    size_t k = 0;
    for (uint32_t b = 0; b < symbols; b += block) {
      uint32_t any = 0;  // a branch-free OR, which compilers vectorize
      for (uint32_t s = b; s < b + block; ++s) any |= count[s];
      if (any != 0) k = drain_block(count, b, dst, k);  // n fits 32 bits
    }
    return sparse_histogram16(dst, dst + k);
  }
  if (n < sort_below) {
    // The symbols seen, put in order by a two-pass radix sort. Every lane
    // is written at the next entry, which only a first sight keeps: with a
    // branch there instead (taken about every other lane on small tensors,
    // whose values are mostly distinct, and mispredicted) ckpt-300m's bf16
    // tensors of fewer than sort_below lanes (4.6 M lanes in all) took 4.5
    // ns a lane, not 1.8.
    uint16_t* seen = c.seen.get();
    uint16_t* sorted = c.sorted.get();
    size_t distinct = 0;
    for (size_t i = 0; i < n; ++i) {
      auto const w = load_le<uint16_t>(p + 2 * i);
      seen[distinct] = w;
      distinct += count[w]++ == 0;
    }
    for (unsigned shift : {0u, 8u}) {
      size_t at[257] = {};
      for (size_t k = 0; k < distinct; ++k) {
        ++at[((seen[k] >> shift) & 255) + 1];
      }
      for (size_t k = 1; k < 257; ++k) at[k] += at[k - 1];
      for (size_t k = 0; k < distinct; ++k) {
        sorted[at[(seen[k] >> shift) & 255]++] = seen[k];
      }
      std::swap(seen, sorted);
    }
    // Into the scratch first, the counters cleared, then copied out: an
    // allocation that throws leaves them zero for the next call.
    auto* const dst = c.scratch.data();
    for (size_t k = 0; k < distinct; ++k) {
      dst[k] = {seen[k], count[seen[k]]};
      count[seen[k]] = 0;
    }
    // (Braces would read as a list of two entries.)
    // NOLINTNEXTLINE(modernize-return-braced-init-list)
    return sparse_histogram16(dst, dst + distinct);
  }
  // Mid-sized inputs: a flag per block of symbols (a plain store, no read), so
  // the output comes out in order without sorting or a full scan.
  size_t const head = std::min(n, probe_lanes);
  count_marked<false>(p, head, count, c.touched.data());
  uint8_t const* const rest = p + 2 * head;
  if (many_zeros(count, head)) {
    count_marked<true>(rest, n - head, count, c.touched.data());
  } else {
    count_marked<false>(rest, n - head, count, c.touched.data());
  }
  size_t const k = drain_touched(c);
  return sparse_histogram16(c.scratch.data(), c.scratch.data() + k);
}

void sum_histograms16(std::span<sparse_histogram16 const* const> parts,
                      sparse_histogram16& out) {
  out.clear();
  uint64_t total = 0;
  for (sparse_histogram16 const* h : parts) {
    for (auto const& e : *h) total += e.second;
  }
  if (total > std::numeric_limits<uint32_t>::max()) {  // past u32 counters
    std::vector<uint64_t> sum(symbols, 0);
    for (sparse_histogram16 const* h : parts) {
      for (auto const& [s, c] : *h) sum[s] += c;
    }
    for (uint32_t s = 0; s < symbols; ++s) {
      if (sum[s]) out.emplace_back(s, entry_count(sum[s]));
    }
    return;
  }
  counters& c = local();
  uint32_t* const count = c.count.data();
  uint8_t* const touched = c.touched.data();
  for (sparse_histogram16 const* h : parts) {
    for (auto const& [s, n] : *h) {
      count[s] += n;
      touched[s / block] = 1;
    }
  }
  size_t const k = drain_touched(c);
  out.assign(c.scratch.data(), c.scratch.data() + k);
}

size_t distinct32_up_to(byte_view data, size_t limit) {
  size_t const n = data.size() / 4;
  // Open addressing at most a quarter full: a lookup is a multiply and a
  // probe or two (std::unordered_set divides and chases a node per lane).
  size_t const slots = std::bit_ceil(std::max<size_t>(64, 4 * (limit + 1)));
  unsigned const shift = 64 - static_cast<unsigned>(std::countr_zero(slots));
  std::vector<uint32_t> keys(slots);
  std::vector<uint8_t> used(slots, 0);
  size_t distinct = 0;
  uint32_t last = 0;
  for (size_t i = 0; i < n; ++i) {
    auto const v = load_le<uint32_t>(data.data() + 4 * i);
    if (distinct > 0 && v == last) continue;  // runs are common
    last = v;
    auto h = static_cast<size_t>((v * 0x9e3779b97f4a7c15ull) >> shift);
    while (used[h] && keys[h] != v) h = (h + 1) & (slots - 1);
    if (used[h]) continue;
    used[h] = 1;
    keys[h] = v;
    if (++distinct > limit) break;
  }
  return distinct;
}

}  // namespace brevis::codec
