#include "codec/entropy/rans_static.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <queue>
#include <string>
#include <utility>

#include "codec/core/error.h"
#include "codec/entropy/rans_static_simd.h"

namespace brevis::codec::rans_static {
namespace {

using simd::state_low;

// log2((f + 1) / f): normalize needs it for every symbol, most often at
// small f, so those come from a table (the same expression, so the same
// bits) instead of ~10^5 log2 calls for a large table.
constexpr uint32_t tabled_steps = 4096;

double log2_step(uint32_t f) {
  static std::vector<double> const steps = [] {
    std::vector<double> v(tabled_steps);
    for (uint32_t k = 1; k < tabled_steps; ++k) {
      double const x = k;
      v[k] = std::log2((x + 1) / x);
    }
    return v;
  }();
  if (f < tabled_steps) return steps[f];
  double const x = f;
  return std::log2((x + 1) / x);
}

// Where the one slot every symbol gets at least overshoots the precision by
// more than this, normalize starts from proportional_start: each unit of
// overshoot costs a move on its heaps (log k work), and a 16-bit table of
// tens of thousands of rare symbols overshoots by thousands (12,500 moves,
// 14 M instructions, on one of centernet.fp16's shared tables). Below it
// the start (and so the table) is the plain proportional one.
constexpr uint64_t floor_overshoot = 256;

// Frequencies max(1, round(a c_i)), the factor a chosen so that they sum
// near `total` although the symbols held at 1 take more than their share:
// the continuous optimum (f_i proportional to c_i above the floor), a few
// units from the integer one, for counts `c` summing to `n`. Writes them
// to `freqs`; returns their sum.
uint64_t proportional_start(std::vector<double> const& c, double n,
                            uint32_t total, std::vector<uint32_t>& freqs) {
  size_t const k = c.size();
  double const most = total;  // a frequency's bound: keeps f in 32 bits
  auto const share = [&](double a, size_t i) {
    return static_cast<int32_t>(std::min(a * c[i] + 0.5, most));
  };
  // The sum at factor a and its symbols at the floor.
  auto const sums = [&](double a, uint64_t& floors) {
    uint64_t sum = 0;
    floors = 0;
    for (size_t i = 0; i < k; ++i) {
      int32_t const f = share(a, i);
      floors += f < 1;
      sum += static_cast<uint64_t>(f < 1 ? 1 : f);
    }
    return sum;
  };
  double a = total / n;
  double best_a = a;
  uint64_t floors = 0;
  uint64_t sum = sums(a, floors);
  uint64_t best_miss = sum > total ? sum - total : total - sum;
  // The symbols above the floor share what it leaves: a scaled by the
  // ratio of their share to their sum (the floor grows as a shrinks, so a
  // few rounds settle it), until the heaps' moves can finish it cheaply.
  for (int round = 0; round < 8 && best_miss > floor_overshoot / 4; ++round) {
    if (sum <= floors || floors >= total) break;
    a *=
        static_cast<double>(total - floors) / static_cast<double>(sum - floors);
    sum = sums(a, floors);
    uint64_t const miss = sum > total ? sum - total : total - sum;
    if (miss >= best_miss) break;
    best_miss = miss, best_a = a;
  }
  sum = 0;
  for (size_t i = 0; i < k; ++i) {
    int32_t const f = share(best_a, i);
    freqs[i] = static_cast<uint32_t>(f < 1 ? 1 : f);
    sum += freqs[i];
  }
  return sum;
}

inline uint32_t divide(uint32_t x, uint64_t rcp) {
  // floor(x / f) with rcp = ceil(2^63 / f): exact because x * f < 2^63.
  return static_cast<uint32_t>((static_cast<unsigned __int128>(x) * rcp) >> 63);
}

}  // namespace

void validate(table const& t, unsigned symbol_bits) {
  fail_if(t.scale < 1 || t.scale > max_scale, errc::corrupt,
          "rans_static: table precision out of range");
  fail_if(t.symbols.empty() || t.symbols.size() != t.freqs.size(),
          errc::corrupt, "rans_static: table is empty or ragged");
  uint64_t const alphabet = uint64_t{1} << symbol_bits;
  {
    // One pass without branches for the valid tables decoders parse (a
    // 16-bit one has up to 2^16 symbols; the checks below were 8% of
    // decoding faceres-deep.fp32); the messages come from the pass below.
    size_t const k = t.symbols.size();
    uint32_t const* const sym = t.symbols.data();
    uint32_t const* const freq = t.freqs.data();
    bool bad = sym[k - 1] >= alphabet;
    uint32_t zero = freq[0] == 0;
    uint32_t unordered = 0;
    uint64_t total = freq[0];
    for (size_t i = 1; i < k; ++i) {
      unordered |= sym[i] <= sym[i - 1];
      zero |= freq[i] == 0;
      total += freq[i];
    }
    bad |= unordered != 0 || zero != 0;
    if (!bad && total == (uint64_t{1} << t.scale)) return;
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < t.symbols.size(); ++i) {
    fail_if(t.symbols[i] >= alphabet, errc::corrupt,
            "rans_static: table symbol out of range");
    fail_if(i > 0 && t.symbols[i] <= t.symbols[i - 1], errc::corrupt,
            "rans_static: table symbols not strictly increasing");
    fail_if(t.freqs[i] == 0, errc::corrupt, "rans_static: zero frequency");
    sum += t.freqs[i];
    fail_if(sum > (uint64_t{1} << t.scale), errc::corrupt,
            "rans_static: frequencies exceed the precision");
  }
  fail_if(sum != (uint64_t{1} << t.scale), errc::corrupt,
          "rans_static: frequencies do not sum to the precision");
}

void histogram(byte_view data, unsigned width, std::vector<uint64_t>& hist) {
  fail_if(width != 1 && width != 2, errc::domain,
          "rans_static: symbols are 8 or 16 bits");
  hist.assign(size_t{1} << (8 * width), 0);
  size_t const n = data.size() / width;
  if (width == 1) {
    // Eight sub-histograms hide the store-to-load latency of repeated
    // symbols; eight bytes come in one load.
    uint32_t sub[8][256] = {};
    uint8_t const* const p = data.data();
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t const w = load_le<uint64_t>(p + i);
      for (unsigned k = 0; k < 8; ++k) ++sub[k][(w >> (8 * k)) & 255];
      if ((i & 0xfffffff) == 0xfffffff - 7) {  // keep u32 counters exact
        for (auto& h : sub) {
          for (size_t s = 0; s < 256; ++s) hist[s] += h[s], h[s] = 0;
        }
      }
    }
    for (; i < n; ++i) ++hist[p[i]];
    for (auto const& h : sub) {
      for (size_t s = 0; s < 256; ++s) hist[s] += h[s];
    }
  } else {
    for (size_t i = 0; i < n; ++i) ++hist[load_le<uint16_t>(&data[2 * i])];
  }
}

table normalize(std::span<uint64_t const> hist, unsigned scale) {
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
  for (size_t s = 0; s < hist.size(); ++s) {
    if (hist[s] == 0) continue;
    symbols.push_back(static_cast<uint32_t>(s));
    counts.push_back(hist[s]);
  }
  return normalize(symbols, counts, scale);
}

namespace {

// A table's frequencies on their way to summing to 2^scale, with the counts
// as doubles (the marginals' weights).
struct draft {
  table t;
  std::vector<double> c;
  uint64_t sum = 0;
};

// The start: every frequency its nearest proportional share, at least 1
// (where the floor overshoots, proportional_start's share).
draft start_of(std::span<uint32_t const> symbols,
               std::span<uint64_t const> counts, unsigned scale) {
  fail_if(scale < 1 || scale > max_scale, errc::domain,
          "rans_static: precision out of range");
  uint32_t const total = 1u << scale;
  draft d;
  table& t = d.t;
  t.scale = scale;
  t.symbols.assign(symbols.begin(), symbols.end());
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  fail_if(t.symbols.empty() || n == 0, errc::domain,
          "rans_static: empty histogram");
  fail_if(t.symbols.size() > total, errc::domain,
          "rans_static: more symbols than the precision allows");
  size_t const k = t.symbols.size();
  std::vector<double>& c = d.c;
  c.resize(k);
  t.freqs.resize(k);
  uint64_t& sum = d.sum;
  // Rounded in floating point: a 128-bit division a symbol was half of the
  // start's time on fp16 tables (the nearest share is a start, so a tie
  // rounded the other way only moves a unit). By adding a half and
  // truncating, as std::lround does for these shares (>= 0), but inline:
  // the libm call was a third of the start.
  double const per_count = total / static_cast<double>(n);
  for (size_t i = 0; i < k; ++i) {
    c[i] = static_cast<double>(counts[i]);
    // Nearest, not floor: the start is then a few units off the optimum
    // instead of up to k, and each unit costs work. (<= total: fits.) The
    // one share lround would round otherwise, the double just below 0.5,
    // goes to 1 here, as the floor below takes it anyway.
    // NOLINTNEXTLINE(bugprone-incorrect-roundings)
    auto const f = static_cast<uint32_t>(c[i] * per_count + 0.5);
    t.freqs[i] = f < 1 ? 1 : f;
    sum += t.freqs[i];
  }
  if (sum > total + floor_overshoot) {
    sum = proportional_start(c, static_cast<double>(n), total, t.freqs);
  }
  return d;
}

// Moves units one at a time, each where it gains most (or costs least),
// until the frequencies sum to 2^scale; with `refine`, then moves units
// between symbols while that saves bits: the optimum.
void settle_with_heaps(draft& d, bool refine) {
  table& t = d.t;
  std::vector<double> const& c = d.c;
  uint64_t& sum = d.sum;
  size_t const k = t.symbols.size();
  uint32_t const total = 1u << t.scale;
  // The cost sum_i c_i * -log2(f_i / total) is separable and convex in each
  // f_i, so moving one unit from the symbol where it is cheapest to remove to
  // the symbol where it gains most, until no move gains, reaches the optimum.
  // Heaps hold (marginal, index, freq when pushed); stale entries are skipped.
  struct item {
    double v;
    uint32_t i;
    uint32_t f;
  };
  auto less_v = [](item const& a, item const& b) { return a.v < b.v; };
  auto more_v = [](item const& a, item const& b) { return a.v > b.v; };
  std::priority_queue<item, std::vector<item>, decltype(less_v)> inc(less_v);
  std::priority_queue<item, std::vector<item>, decltype(more_v)> dec(more_v);
  auto gain = [&](size_t i) {  // bits saved by f_i + 1
    return c[i] * log2_step(t.freqs[i]);
  };
  auto cost = [&](size_t i) {  // bits lost by f_i - 1
    return t.freqs[i] <= 1 ? std::numeric_limits<double>::infinity()
                           : c[i] * log2_step(t.freqs[i] - 1);
  };
  auto push = [&](size_t i) {
    inc.push({gain(i), static_cast<uint32_t>(i), t.freqs[i]});
    if (t.freqs[i] > 1)
      dec.push({cost(i), static_cast<uint32_t>(i), t.freqs[i]});
  };
  auto top_inc = [&]() -> item {
    while (inc.top().f != t.freqs[inc.top().i]) inc.pop();
    return inc.top();
  };
  auto top_dec = [&]() -> item {
    while (!dec.empty() && dec.top().f != t.freqs[dec.top().i]) dec.pop();
    return dec.empty() ? item{std::numeric_limits<double>::infinity(), 0, 0}
                       : dec.top();
  };
  {  // heapify all at once: linear, not k log k
    std::vector<item> up, down;
    up.reserve(k), down.reserve(k);
    for (size_t i = 0; i < k; ++i) {
      auto const ii = static_cast<uint32_t>(i);
      up.push_back({gain(i), ii, t.freqs[i]});
      if (t.freqs[i] > 1) down.push_back({cost(i), ii, t.freqs[i]});
    }
    inc = decltype(inc)(less_v, std::move(up));
    dec = decltype(dec)(more_v, std::move(down));
  }
  while (sum < total) {
    item const b = top_inc();
    ++t.freqs[b.i];
    ++sum;
    push(b.i);
  }
  while (sum > total) {
    item const w = top_dec();  // exists: k <= total
    --t.freqs[w.i];
    --sum;
    push(w.i);
  }
  if (!refine) return;
  // Each symbol rarely moves more than a unit or two from its proportional
  // start; bound the moves so table building stays linear in the alphabet.
  for (size_t iter = 0; iter < 2 * k; ++iter) {
    item const b = top_inc();
    item const w = top_dec();
    if (!(b.v > w.v * (1 + 1e-12) + 1e-9) || b.i == w.i) break;
    ++t.freqs[b.i];
    --t.freqs[w.i];
    push(b.i);
    push(w.i);
  }
}

// The least `need` of the distinct keys key(i), i < k, where key(i) has one
// (all of them where fewer do), into keys[0, m); returns m.
template <typename key_of>
size_t least_keys(size_t k, uint64_t need, key_of key,
                  std::vector<uint64_t>& keys) {
  keys.clear();
  if (need <= k / 16) {
    // Few (the usual case): the least so far kept in a max-heap as they
    // come. Most keys lose to its top, a branch that predicts well, where
    // nth_element's partitions mispredict half their comparisons.
    for (size_t i = 0; i < k; ++i) {
      std::optional<uint64_t> const v = key(i);
      if (!v) continue;
      if (keys.size() < need) {
        keys.push_back(*v);
        if (keys.size() == need) std::make_heap(keys.begin(), keys.end());
      } else if (*v < keys.front()) {
        std::pop_heap(keys.begin(), keys.end());
        keys.back() = *v;
        std::push_heap(keys.begin(), keys.end());
      }
    }
    return keys.size();
  }
  for (size_t i = 0; i < k; ++i) {
    if (std::optional<uint64_t> const v = key(i)) keys.push_back(*v);
  }
  size_t const m = std::min<uint64_t>(keys.size(), need);
  if (m > 0) {
    std::nth_element(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(m - 1),
                     keys.end());
  }
  return m;
}

// Moves units in passes: with m units missing (or in excess), a pass gives
// one unit to (takes one from) each of the m symbols where that gains most
// (costs least), at most one a symbol: near the optimum, in linear time a
// pass. A few passes; returns whether the frequencies then sum to 2^scale.
bool settle_in_passes(draft& d) {
  table& t = d.t;
  size_t const k = t.symbols.size();
  uint64_t const total = uint64_t{1} << t.scale;
  // Keys that order by marginal, the symbol's index in their low 16 bits
  // (k <= 2^max_scale): integers compare faster than pairs. The marginals
  // are >= 0, whose IEEE bits order as they do; the index replaces their
  // 16 lowest mantissa bits, so marginals within ~2^-36 of each other tie
  // and go by index. The keys are distinct, so the m chosen are one set.
  static_assert(max_scale <= 16, "symbol indexes fill the keys' low 16 bits");
  constexpr uint64_t index_bits = 0xffff;
  std::vector<uint64_t> keys;
  for (int pass = 0; pass < 8 && d.sum != total; ++pass) {
    bool const add = d.sum < total;
    uint64_t const need = add ? total - d.sum : d.sum - total;
    auto key = [&](size_t i) -> std::optional<uint64_t> {
      uint32_t const f = t.freqs[i];
      if (!add && f <= 1) return std::nullopt;  // held at 1
      double const marginal = d.c[i] * log2_step(add ? f : f - 1);
      auto const bits = std::bit_cast<uint64_t>(marginal);
      return ((add ? ~bits : bits) & ~index_bits) | i;
    };
    size_t const m = least_keys(k, need, key, keys);
    if (m == 0) break;
    for (size_t j = 0; j < m; ++j) {
      uint32_t& f = t.freqs[keys[j] & index_bits];
      add ? ++f : --f;
    }
    d.sum = add ? d.sum + m : d.sum - m;
  }
  return d.sum == total;
}

}  // namespace

table normalize(std::span<uint32_t const> symbols,
                std::span<uint64_t const> counts, unsigned scale) {
  draft d = start_of(symbols, counts, scale);
  settle_with_heaps(d, true);
  return std::move(d.t);
}

table normalize_near(std::span<uint32_t const> symbols,
                     std::span<uint64_t const> counts, unsigned scale) {
  draft d = start_of(symbols, counts, scale);
  if (!settle_in_passes(d)) settle_with_heaps(d, false);
  return std::move(d.t);
}

double coded_bits(std::span<uint64_t const> hist, table const& t) {
  std::vector<uint64_t> counts(t.symbols.size());
  for (size_t i = 0; i < t.symbols.size(); ++i) {
    counts[i] = t.symbols[i] < hist.size() ? hist[t.symbols[i]] : 0;
  }
  return coded_bits_of_counts(counts, t);
}

double coded_bits_of_counts(std::span<uint64_t const> counts, table const& t) {
  double bits = 0;
  uint64_t n = 0;
  for (size_t i = 0; i < t.symbols.size() && i < counts.size(); ++i) {
    n += counts[i];
    bits += static_cast<double>(counts[i]) *
            (t.scale - std::log2(static_cast<double>(t.freqs[i])));
  }
  if (n == 0 || t.symbols.size() == 1) return 0;
  return bits + 32.0 * lanes_for(n);
}

double entropy_bits(std::span<uint64_t const> hist) {
  uint64_t n = 0;
  for (uint64_t c : hist) n += c;
  if (n == 0) return 0;
  double bits = 0;
  double const dn = static_cast<double>(n);
  for (uint64_t c : hist) {
    if (c) bits -= static_cast<double>(c) * std::log2(c / dn);
  }
  return bits;
}

coder::coder(table t, unsigned width)
    : table_(std::move(t)),
      width_(width),
      scale_(table_.scale),
      single_(table_.symbols.size() == 1),
      compact_(compact_layout(table_, width)),
      packed_bits_(!compact_ && simd::avx2() && !simd::avx512()
                       ? packed_field_bits(table_)
                       : 0) {
  fail_if(width != 1 && width != 2, errc::bad_program,
          "rans_static: symbols are 8 or 16 bits");
  if (single_) single_symbol_ = table_.symbols[0];
}

namespace {

// Symbol -> index arrays of finished coders, for the next ones on this
// thread (large ones, 2^16 entries, would each page in fresh memory), all
// ~0: a coder clears its symbols' entries as it returns one, instead of the
// next coder filling all 256 KiB again.
constexpr size_t pooled_indexes = 4;
constexpr size_t pooled_index_from = 4096;

// Checked by coders destroyed after the pool at thread exit.
thread_local bool index_pool_alive = false;

struct index_pool {
  index_pool() { index_pool_alive = true; }
  ~index_pool() { index_pool_alive = false; }
  std::vector<std::vector<uint32_t>> free;
};

std::vector<std::vector<uint32_t>>& index_pool_of_thread() {
  thread_local index_pool pool;
  return pool.free;
}

// An index of `size` entries, all ~0 (from the pool: possibly longer).
std::vector<uint32_t> absent_index(size_t size) {
  std::vector<uint32_t> v;
  if (size >= pooled_index_from) {
    std::vector<std::vector<uint32_t>>& pool = index_pool_of_thread();
    if (!pool.empty()) {
      v = std::move(pool.back());
      pool.pop_back();
    }
    size = std::max<size_t>(size, 65536);  // reusable by any 16-bit table
  }
  if (v.size() < size) v.resize(size, ~uint32_t{0});
  return v;
}

}  // namespace

unsigned coder::packed_field_bits(table const& t) {
  if (t.scale > packed_max_scale || t.symbols.size() < 2) return 0;
  uint32_t const largest = *std::max_element(t.freqs.begin(), t.freqs.end());
  auto const b = static_cast<unsigned>(std::bit_width(largest));
  auto const symbol_bits =
      static_cast<unsigned>(std::bit_width(t.symbols.back()));
  return 2 * b + symbol_bits <= 32 ? b : 0;
}

void coder::build_encoder() const {
  uint32_t const total = 1u << scale_;
  // Up to the largest symbol (symbols past it are absent): bf16's sign and
  // exponent need 512 entries, not 2^16 (a fresh 256 KiB a coder, zeroed
  // and paged in, was 5% of compressing blazepose-heavy bf16). Larger ones
  // come from the thread's pool.
  enc_index_ = absent_index(size_t{table_.symbols.back()} + 1);
  enc_.resize(table_.symbols.size());
  uint32_t start = 0;
  for (size_t i = 0; i < table_.symbols.size(); ++i) {
    uint32_t const f = table_.freqs[i];
    enc_index_[table_.symbols[i]] = static_cast<uint32_t>(i);
    enc_entry& e = enc_[i];
    e.rcp = ((uint64_t{1} << 63) + f - 1) / f;
    e.x_max = f << (32 - scale_);  // f < 2^scale: fits
    e.bias = static_cast<uint16_t>(start);
    e.cmpl = static_cast<uint16_t>(total - f);
    start += f;
  }
  // 16-bit symbols of a small range (bf16's sign and exponent: below 512)
  // are indexed by the symbol too, which saves the vector code a gather.
  enc_direct_end_ = width_ == 2 && table_.symbols.back() < direct16_end
                        ? table_.symbols.back() + 1
                        : 0;
  // 8-bit symbols are always by the symbol, in a table of all 256 (the
  // AVX2 encoder's; AVX-512's has keyed tables, build_keyed_tables).
  {
    bool const direct = width_ == 1 || enc_direct_end_ > 0;
    enc_bias_cmpl_.assign(width_ == 1 ? 256
                          : direct    ? enc_direct_end_
                                      : enc_.size(),
                          0);
    for (size_t i = 0; i < enc_.size(); ++i) {
      size_t const at = direct ? table_.symbols[i] : i;
      enc_bias_cmpl_[at] = enc_[i].bias | uint32_t{enc_[i].cmpl} << 16;
    }
  }
  build_keyed_tables();
}

void coder::build_keyed_tables() const {
  uint32_t const last = table_.symbols.back();
  keyed k;
  if (last < 256) {  // keys are the symbols
    k.blocks = last / 64 + 1;
  } else if (enc_direct_end_ > 0 && last < 512) {
    // bf16's sign and exponent: per sign, the window of 128 exponents that
    // holds the most frequency; the symbols outside it (zeros, infinities)
    // must be rare, they take a slower path.
    uint32_t freq[512] = {};
    for (size_t i = 0; i < table_.symbols.size(); ++i)
      freq[table_.symbols[i]] = table_.freqs[i];
    uint32_t covered = 0, reach = 0;
    for (unsigned h = 0; h < 2; ++h) {
      uint32_t const* const f = freq + 256 * h;
      uint32_t sum = 0, best = 0, best_low = 0;
      for (uint32_t e = 0; e < 256; ++e) {
        sum += f[e];
        if (e >= 128) sum -= f[e - 128];
        uint32_t const low = e >= 127 ? e - 127 : 0;
        if (sum > best) best = sum, best_low = low;
      }
      // Moved up to the window's first symbol, so that a narrower fold may
      // do.
      while (best > 0 && f[best_low] == 0) ++best_low;
      for (uint32_t e = best_low; e < best_low + 128 && e < 256; ++e) {
        if (f[e]) reach = std::max(reach, e - best_low + 1);
      }
      covered += best;
      k.low[h] = static_cast<uint16_t>(best_low);
    }
    uint32_t const total = 1u << scale_;
    if (total - covered > total / 256) return;
    k.fold = reach <= 64 ? 64 : 128;
    k.blocks = 2 * k.fold / 64;
  } else {
    return;
  }
  enc_key_bias_.fill(0);
  enc_key_freq_.fill(0);
  for (size_t i = 0; i < table_.symbols.size(); ++i) {
    uint32_t const s = table_.symbols[i];
    uint32_t key = s;
    if (k.fold) {
      uint32_t const offset = (s & 255) - k.low[s >> 8];
      if (offset >= k.fold) continue;  // escapes
      key = offset + k.fold * (s >> 8);
    }
    enc_key_bias_[key] = enc_[i].bias;
    enc_key_freq_[key] = static_cast<uint16_t>(table_.freqs[i]);
  }
  enc_keyed_ = k;
}

namespace {

// The encoder's words, written backwards: a per-thread buffer reused across
// calls, so that each call does not zero-fill (and page in) a fresh one.
uint8_t* encode_buffer(size_t size) {
  thread_local std::unique_ptr<uint8_t[]> buffer;
  thread_local size_t capacity = 0;
  if (capacity < size) {
    // At least 1 MiB, then doubling: pages are only faulted in as they are
    // first written, and each reallocation faults in the new buffer again.
    buffer.reset();
    capacity = std::bit_ceil(std::max<size_t>(size, size_t{1} << 20));
    buffer = std::make_unique_for_overwrite<uint8_t[]>(capacity);
  }
  return buffer.get();
}

// Slot tables of finished coders, for the next ones. Process-wide and
// bounded in bytes: a fresh table at 2^16 slots (384 KiB) costs a page fault
// every 4 KiB, ~1.4 ms on a paravirtualized guest, against ~25 us to refill
// a warm one. Never destroyed: coders in static caches may die after it.
struct decode_arrays {
  std::unique_ptr<uint32_t[]> step;
  std::unique_ptr<uint16_t[]> symbol;
  uint32_t slots = 0;
};

size_t slot_bytes(uint32_t slots) {
  return slots * (sizeof(uint32_t) + sizeof(uint16_t));
}

class table_pool {
 public:
  // Four tables at 2^16 slots: a coder cache's evictions keep them busy.
  static constexpr size_t max_bytes = size_t{3} << 19;

  // The smallest pooled table of `slots` to 4 `slots` slots, if any: a
  // small table taking a large one would leave the next large table to
  // fresh memory (measured on blazepose-heavy.bf16: 2^13-slot tables took
  // the 2^16-slot ones, and fill_slots faulted on ~1 MiB).
  decode_arrays take(uint32_t slots) {
    std::lock_guard lk(mu_);
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it) {
      if (it->slots >= slots && it->slots / 4 <= slots &&
          (best == free_.end() || it->slots < best->slots))
        best = it;
    }
    if (best == free_.end()) return {};
    decode_arrays a = std::move(*best);
    free_.erase(best);
    bytes_ -= slot_bytes(a.slots);
    return a;
  }
  // Keeps `a` unless the pool is full, then frees its smallest table (or
  // `a` itself): large tables are the expensive ones to page in.
  void give(decode_arrays&& a) {
    decode_arrays dropped;  // freed unlocked
    std::lock_guard lk(mu_);
    free_.push_back(std::move(a));
    bytes_ += slot_bytes(free_.back().slots);
    while (bytes_ > max_bytes) {
      auto smallest = std::min_element(
          free_.begin(), free_.end(),
          [](auto const& x, auto const& y) { return x.slots < y.slots; });
      bytes_ -= slot_bytes(smallest->slots);
      dropped = std::move(*smallest);
      free_.erase(smallest);
    }
  }

 private:
  std::mutex mu_;
  std::vector<decode_arrays> free_;
  size_t bytes_ = 0;
};

table_pool& pool() {
  static table_pool* const p = new table_pool;
  return *p;
}

}  // namespace

size_t coder::decode_table_bytes() const {
  if (single_) return 0;
  size_t const slots = size_t{1} << scale_;
  if (packed()) return slots * sizeof(uint32_t);
  return compact_ ? slots + 3 : slot_bytes(static_cast<uint32_t>(slots) + 1);
}

size_t coder::encode_table_bytes() const {
  if (!enc_once_.done()) return 0;
  return enc_index_.capacity() * sizeof(uint32_t) +
         enc_.capacity() * sizeof(enc_entry) +
         enc_bias_cmpl_.capacity() * sizeof(uint32_t);
}

coder::~coder() {
  if (enc_index_.size() >= pooled_index_from && index_pool_alive) {
    try {
      std::vector<std::vector<uint32_t>>& pool = index_pool_of_thread();
      if (pool.size() < pooled_indexes) {
        for (uint32_t sym : table_.symbols) enc_index_[sym] = ~uint32_t{0};
        pool.push_back(std::move(enc_index_));
      }
    } catch (...) {  // no room to pool it: it is simply freed
    }
  }
  if (!dec_step_) return;
  try {
    pool().give({std::move(dec_step_), std::move(dec_symbol_), dec_slots_});
  } catch (...) {  // no room to pool them: they are simply freed
  }
}

void coder::build_decoder() const {
  uint32_t const total = 1u << scale_;
  if (compact_) {
    dec_symbol8_ = std::make_unique_for_overwrite<uint8_t[]>(total + 3);
    std::memset(dec_symbol8_.get() + total, 0, 3);
    uint32_t start = 0;
    for (size_t i = 0; i < table_.symbols.size(); ++i) {
      uint32_t const f = table_.freqs[i];
      auto const key =
          static_cast<uint8_t>(width_ == 1 ? table_.symbols[i] : i);
      std::memset(dec_symbol8_.get() + start, key, f);
      dec_freq_start_[key] = f | start << 16;
      if (width_ == 2) dec_symbol16_[key] = table_.symbols[i];
      start += f;
    }
    dec_symbol_end_ = width_ == 1
                          ? table_.symbols.back() + 1
                          : static_cast<unsigned>(table_.symbols.size());
    return;
  }
  if (packed()) {  // at most 2^13 slots: small, not pooled
    dec_packed_ = std::make_unique_for_overwrite<uint32_t[]>(total);
    unsigned const b = packed_bits_;
    uint32_t start = 0;
    for (size_t i = 0; i < table_.symbols.size(); ++i) {
      uint32_t const f = table_.freqs[i];
      uint32_t const high = f | table_.symbols[i] << 2 * b;
      uint32_t* const slot = dec_packed_.get() + start;
      for (uint32_t k = 0; k < f; ++k) slot[k] = high | k << b;
      start += f;
    }
    return;
  }
  if (decode_arrays a = pool().take(total); a.step) {
    dec_step_ = std::move(a.step);
    dec_symbol_ = std::move(a.symbol);
    dec_slots_ = a.slots;
  } else {
    dec_step_ = std::make_unique_for_overwrite<uint32_t[]>(total);
    dec_symbol_ = std::make_unique_for_overwrite<uint16_t[]>(total + 1);
    dec_slots_ = total;
  }
  dec_symbol_[total] = 0;
  if (simd::avx512_bw_vl()) {
    simd::fill_slots_avx512(table_, dec_step_.get(), dec_symbol_.get());
    return;
  }
  if (simd::avx2()) {
    simd::fill_slots_avx2(table_, dec_step_.get(), dec_symbol_.get());
    return;
  }
  uint32_t start = 0;
  for (size_t i = 0; i < table_.symbols.size(); ++i) {
    uint32_t const f = table_.freqs[i];
    auto const s = static_cast<uint16_t>(table_.symbols[i]);
    uint32_t* const step = dec_step_.get() + start;
    uint16_t* const symbol = dec_symbol_.get() + start;
    for (uint32_t k = 0; k < f; ++k) step[k] = f | k << 16;
    std::fill(symbol, symbol + f, s);
    start += f;
  }
}

template <typename sym, unsigned n_lanes>
void coder::encode_impl(uint8_t const* in, size_t count, bytes& out) const {
  size_t const head = 4 * n_lanes;
  // At most one word per symbol. The AVX2 rounds also store up to 16 bytes
  // below their words, which this leaves room for: the states' head, or
  // words of symbols still to come.
  size_t const room = head + 2 * count;
  uint8_t* const words_end = encode_buffer(room) + room;
  uint8_t* p = words_end;
  uint32_t x[n_lanes];
  for (uint32_t& s : x) s = state_low;
  uint32_t const* const index = enc_index_.data();
  size_t const index_end = enc_index_.size();
  enc_entry const* const tab = enc_.data();
  bool absent = false;

  auto step = [&](uint32_t& st, size_t sym_value) {
    uint32_t const idx =
        sym_value < index_end ? index[sym_value] : ~uint32_t{0};
    absent |= idx == ~uint32_t{0};
    enc_entry const& e = tab[idx == ~uint32_t{0} ? 0 : idx];
    uint32_t s = st;
    // Arithmetic, not a branch (GCC emits one for ?:): renormalization is
    // unpredictable.
    uint32_t const r = s >= e.x_max;
    store_le<uint16_t>(p - 2, static_cast<uint16_t>(s));
    p -= r << 1;
    s >>= r << 4;
    uint32_t const q = divide(s, e.rcp);
    st = s + e.bias + q * e.cmpl;
  };

  size_t i = count;
  // The tail that does not fill a round of lanes goes first (encoding runs
  // backwards), then whole rounds.
  while (i % n_lanes != 0) {
    --i;
    step(x[i % n_lanes], load_le<sym>(in + i * sizeof(sym)));
  }
  // The vector encoder divides in float, exact after its correction only
  // while quotients (below 2^(32 - scale)) stay below 2^22: at smaller
  // precisions it wrote payloads that decoded to other symbols.
  bool const avx512 = n_lanes == wide_lanes && simd::avx512_bw_vl();
  if (i > 0 && scale_ >= 10 && avx512) {
    if (enc_keyed_.blocks > 0) {
      simd::keyed_tables const keyed{enc_key_bias_.data(),
                                     enc_key_freq_.data(),
                                     enc_keyed_.blocks,
                                     enc_keyed_.fold,
                                     {enc_keyed_.low[0], enc_keyed_.low[1]},
                                     enc_bias_cmpl_.data(),
                                     enc_direct_end_};
      absent |= simd::encode_rounds_keyed_avx512(sizeof(sym), x, p, in, i,
                                                 1u << scale_, keyed);
      i = 0;
    } else if constexpr (sizeof(sym) == 2) {  // 8-bit: always keyed
      absent |= simd::encode_rounds_avx512(
          x, p, in, i, 1u << scale_, enc_index_.data(),
          static_cast<uint32_t>(enc_index_.size()), enc_bias_cmpl_.data(),
          enc_direct_end_);
      i = 0;
    }
  } else if (i > 0 && scale_ >= 10 &&
             (n_lanes == wide_lanes ? simd::avx2()
                                    : simd::narrow_encode_rounds())) {
    // Wide rounds without AVX-512, and narrow ones where measured faster
    // (the AVX-512 kernels take wide ones only): narrow rounds are one
    // vector of 8 states, bound by its chain's latency, and still 2x faster
    // than the scalar loop on Zen 2.
    absent |= simd::encode_rounds_avx2(sizeof(sym), n_lanes, x, p, in, i,
                                       1u << scale_, enc_index_.data(),
                                       static_cast<uint32_t>(enc_index_.size()),
                                       enc_bias_cmpl_.data(), enc_direct_end_);
    i = 0;
  }
  while (i > 0) {
    i -= n_lanes;
    uint8_t const* blk = in + i * sizeof(sym);
    for (int j = n_lanes - 1; j >= 0; --j) {
      step(x[j], load_le<sym>(blk + j * sizeof(sym)));
    }
  }
  if (absent) fail(errc::domain, "rans_static: symbol absent from the table");
  uint8_t* const states = p - head;
  for (unsigned j = 0; j < n_lanes; ++j) {
    store_le<uint32_t>(states + 4 * j, x[j]);
  }
  out.insert(out.end(), states, words_end);
}

void limit_simd(unsigned level) { simd::set_cap(level); }

void tune_for(tuning kind) { simd::set_tuning(kind); }

template <typename sym, unsigned n_lanes, unsigned fixed_scale,
          coder::slot_layout layout>
void coder::decode_impl(byte_view payload, size_t count, uint8_t* out,
                        resume_point const* from) const {
  size_t const head = 4 * n_lanes;
  fail_if(payload.size() < head, errc::truncated,
          "rans_static: payload shorter than its states");
  fail_if((payload.size() - head) % 2 != 0, errc::corrupt,
          "rans_static: odd payload length");
  uint32_t x[n_lanes];
  for (unsigned j = 0; j < n_lanes; ++j) {
    x[j] = from ? from->x[j] : load_le<uint32_t>(payload.data() + 4 * j);
    fail_if(x[j] < state_low, errc::corrupt, "rans_static: bad state");
  }
  uint8_t const* p = from ? from->p : payload.data() + head;
  uint8_t const* const end = payload.data() + payload.size();
  size_t const done = from ? from->i : 0;
  // A compile-time precision turns the shifts into immediates.
  unsigned const scale = fixed_scale ? fixed_scale : scale_;
  uint32_t const mask = (1u << scale) - 1;
  uint32_t const* const step_tab = dec_step_.get();
  uint16_t const* const symbol_tab = dec_symbol_.get();
  uint8_t const* const symbol8_tab = dec_symbol8_.get();
  uint32_t const* const freq_start = dec_freq_start_.data();
  uint32_t const* const symbol16 =
      sizeof(sym) == 2 ? dec_symbol16_.data() : nullptr;
  uint32_t const* const packed_tab = dec_packed_.get();
  unsigned const field_bits = packed_bits_;
  uint32_t const field_mask = (1u << field_bits) - 1;
  // The symbol of a slot, and its state's step: freq and slot - start.
  auto lookup = [&](uint32_t slot, uint32_t& freq, uint32_t& bias) -> sym {
    if constexpr (layout == slot_layout::packed) {
      uint32_t const v = packed_tab[slot];
      freq = v & field_mask;
      bias = v >> field_bits & field_mask;
      return static_cast<sym>(v >> 2 * field_bits);
    } else if constexpr (layout == slot_layout::compact) {
      uint8_t const v = symbol8_tab[slot];
      uint32_t const fs = freq_start[v];
      freq = fs & 0xffff;
      bias = slot - (fs >> 16);
      if constexpr (sizeof(sym) == 2) return static_cast<sym>(symbol16[v]);
      return v;
    } else {
      uint32_t const e = step_tab[slot];
      freq = e & 0xffff;
      bias = e >> 16;
      return static_cast<sym>(symbol_tab[slot]);
    }
  };

  // The kernels decode from `done` on (a whole number of rounds).
  size_t const rest = count - done;
  uint8_t* const rest_out = out + done * sizeof(sym);
  size_t i = 0;
  if constexpr (layout == slot_layout::packed) {
    if (n_lanes == wide_lanes && simd::avx2()) {
      i = simd::decode_packed_rounds_avx2(sizeof(sym), x, p, end, rest, scale,
                                          packed_tab, field_bits, rest_out);
    } else if (n_lanes == lanes) {
      // One vector of 8 states, bound by its chain's latency, still beats
      // the scalar loop from packed slots (one lookup, in L1) on Zen 2:
      // ns a symbol, 8-bit at 2^10 2.14 -> 1.84, 16-bit at 2^13 2.30 ->
      // 2.10 (brevis_rans_static_bench, blazepose-heavy.bf16, 30000).
      i = simd::decode_narrow_packed_rounds_avx2(sizeof(sym), x, p, end, rest,
                                                 scale, packed_tab, field_bits,
                                                 rest_out);
    }
  } else if constexpr (layout == slot_layout::compact) {
    if (n_lanes == wide_lanes && simd::avx512()) {
      i = simd::decode_rounds8_avx512(x, p, end, rest, scale, symbol8_tab,
                                      freq_start, symbol16, dec_symbol_end_,
                                      rest_out);
    } else if (n_lanes == wide_lanes && simd::avx2()) {
      i = simd::decode_rounds8_avx2(x, p, end, rest, scale, symbol8_tab,
                                    freq_start, symbol16, rest_out);
    }
  } else {
    // Narrow payloads stay scalar: AVX2 rounds of their 8 states measured
    // twice as slow on movenet-multipose's (10.5% of its decompress CPU
    // against 5.0%), their gathers waiting on a 2^16-slot table in L2, and
    // slower on blazepose-full.bf16's 2^13-slot ones too (22.6 against 21.4
    // ms); two of them paired (decode_pair) are faster.
    if (n_lanes == wide_lanes && simd::avx512()) {
      i = simd::decode_rounds_avx512(sizeof(sym), x, p, end, rest, scale,
                                     step_tab, symbol_tab, rest_out);
    } else if (n_lanes == wide_lanes && simd::avx2()) {
      i = simd::decode_rounds_avx2(sizeof(sym), x, p, end, rest, scale,
                                   step_tab, symbol_tab, rest_out);
    }
  }
  i += done;
  // Fast rounds: enough words remain for every lane to renormalize once.
  while (count - i >= n_lanes && static_cast<size_t>(end - p) >= 2 * n_lanes) {
    for (unsigned j = 0; j < n_lanes; ++j) {
      uint32_t s = x[j];
      uint32_t const slot = s & mask;
      uint32_t freq, bias;
      store_le<sym>(out + (i + j) * sizeof(sym), lookup(slot, freq, bias));
      s = freq * (s >> scale) + bias;
      // Arithmetic, not a branch (GCC emits one for ?:): renormalization is
      // unpredictable.
      uint32_t const r = s < state_low;
      uint32_t const w = load_le<uint16_t>(p);
      s = (s << (r << 4)) | (w & (0u - r));
      p += r << 1;
      x[j] = s;
    }
    i += n_lanes;
  }
  for (; i < count; ++i) {
    uint32_t& s = x[i % n_lanes];
    uint32_t const slot = s & mask;
    uint32_t freq, bias;
    store_le<sym>(out + i * sizeof(sym), lookup(slot, freq, bias));
    s = freq * (s >> scale) + bias;
    if (s < state_low) {
      fail_if(end - p < 2, errc::truncated, "rans_static: payload too short");
      s = (s << 16) | load_le<uint16_t>(p);
      p += 2;
    }
  }
  fail_if(p != end, errc::corrupt, "rans_static: trailing payload words");
  for (uint32_t s : x) {
    fail_if(s != state_low, errc::corrupt, "rans_static: final state mismatch");
  }
}

template <typename sym, unsigned n_lanes>
void coder::dispatch_decode(byte_view payload, size_t count, uint8_t* out,
                            resume_point const* from) const {
  if (compact_) {  // at 2^14 to 2^16 slots
    switch (scale_) {
      case 16:
        return decode_impl<sym, n_lanes, 16, slot_layout::compact>(
            payload, count, out, from);
      case 15:
        return decode_impl<sym, n_lanes, 15, slot_layout::compact>(
            payload, count, out, from);
      default:
        return decode_impl<sym, n_lanes, 14, slot_layout::compact>(
            payload, count, out, from);
    }
  }
  if (packed()) {  // at most 2^13 slots
    switch (scale_) {
      case 13:
        return decode_impl<sym, n_lanes, 13, slot_layout::packed>(
            payload, count, out, from);
      case 12:
        return decode_impl<sym, n_lanes, 12, slot_layout::packed>(
            payload, count, out, from);
      case 11:
        return decode_impl<sym, n_lanes, 11, slot_layout::packed>(
            payload, count, out, from);
      case 10:
        return decode_impl<sym, n_lanes, 10, slot_layout::packed>(
            payload, count, out, from);
      default:
        return decode_impl<sym, n_lanes, 0, slot_layout::packed>(payload, count,
                                                                 out, from);
    }
  }
  switch (scale_) {  // the precisions rans_static_scale_for picks
    case 16:
      return decode_impl<sym, n_lanes, 16, slot_layout::slots>(payload, count,
                                                               out, from);
    case 15:
      return decode_impl<sym, n_lanes, 15, slot_layout::slots>(payload, count,
                                                               out, from);
    case 14:
      return decode_impl<sym, n_lanes, 14, slot_layout::slots>(payload, count,
                                                               out, from);
    case 13:
      return decode_impl<sym, n_lanes, 13, slot_layout::slots>(payload, count,
                                                               out, from);
    case 12:
      return decode_impl<sym, n_lanes, 12, slot_layout::slots>(payload, count,
                                                               out, from);
    case 11:
      return decode_impl<sym, n_lanes, 11, slot_layout::slots>(payload, count,
                                                               out, from);
    case 10:
      return decode_impl<sym, n_lanes, 10, slot_layout::slots>(payload, count,
                                                               out, from);
    default:
      return decode_impl<sym, n_lanes, 0, slot_layout::slots>(payload, count,
                                                              out, from);
  }
}

void coder::encode(byte_view data, bytes& out, uint64_t wide_at) const {
  size_t const count = data.size() / width_;
  if (count == 0) return;
  if (single_) {
    // Every symbol must be the table's only one; it costs no bits.
    if (width_ == 1) {
      for (uint8_t b : data) {
        fail_if(b != single_symbol_, errc::domain,
                "rans_static: symbol absent from the table");
      }
    } else {
      for (size_t i = 0; i < count; ++i) {
        fail_if(load_le<uint16_t>(&data[2 * i]) != single_symbol_, errc::domain,
                "rans_static: symbol absent from the table");
      }
    }
    return;
  }
  enc_once_([this] { build_encoder(); });
  bool const wide = lanes_for(count, wide_at) == wide_lanes;
  if (width_ == 1) {
    wide ? encode_impl<uint8_t, wide_lanes>(data.data(), count, out)
         : encode_impl<uint8_t, lanes>(data.data(), count, out);
  } else {
    wide ? encode_impl<uint16_t, wide_lanes>(data.data(), count, out)
         : encode_impl<uint16_t, lanes>(data.data(), count, out);
  }
}

void coder::decode(byte_view payload, size_t count, uint8_t* out,
                   uint64_t wide_at) const {
  if (count == 0 || single_) {
    fail_if(!payload.empty(), errc::corrupt,
            "rans_static: payload where none is expected");
    for (size_t i = 0; i < count; ++i) {
      if (width_ == 1) {
        out[i] = static_cast<uint8_t>(single_symbol_);
      } else {
        store_le<uint16_t>(out + 2 * i, static_cast<uint16_t>(single_symbol_));
      }
    }
    return;
  }
  dec_once_([this] { build_decoder(); });
  bool const wide = lanes_for(count, wide_at) == wide_lanes;
  if (width_ == 1) {
    wide ? dispatch_decode<uint8_t, wide_lanes>(payload, count, out)
         : dispatch_decode<uint8_t, lanes>(payload, count, out);
  } else {
    wide ? dispatch_decode<uint16_t, wide_lanes>(payload, count, out)
         : dispatch_decode<uint16_t, lanes>(payload, count, out);
  }
}

bool coder::pairs_slot_rounds(decode_job const& j, bool wide) const {
  // A malformed payload decodes alone (and throws there).
  byte_view const payload = j.payload;
  size_t const count = j.count;
  unsigned const n_lanes = wide ? wide_lanes : lanes;
  bool const fits = wide ? count >= j.wide_at : count > 0 && count < j.wide_at;
  // Packed slots pair only narrow (the AVX-512 pair has no packed kernel).
  return fits && !single_ && !compact_ && !(wide && packed()) &&
         payload.size() >= size_t{4} * n_lanes && payload.size() % 2 == 0 &&
         (wide ? simd::pair_rounds() : simd::narrow_pair_rounds());
}

void coder::decode_pair(decode_job const& a, decode_job const& b) {
  for (bool const wide : {true, false}) {
    if (a.c->pairs_slot_rounds(a, wide) && b.c->pairs_slot_rounds(b, wide)) {
      return wide ? decode_slot_pair<wide_lanes>(a, b)
                  : decode_slot_pair<lanes>(a, b);
    }
  }
  a.c->decode(a.payload, a.count, a.out, a.wide_at);
  b.c->decode(b.payload, b.count, b.out, b.wide_at);
}

void coder::decode_siblings(std::span<decode_job const> jobs) {
  if (jobs.size() == 1) {  // a chunk's one stream, the store's usual node
    decode_job const& j = jobs.front();
    j.c->decode(j.payload, j.count, j.out, j.wide_at);
    return;
  }
  // The pairable jobs of each kind, the longest first; the rest alone.
  std::vector<decode_job const*> kinds[2];
  for (decode_job const& j : jobs) {
    if (j.c->pairs_slot_rounds(j, true)) {
      kinds[0].push_back(&j);
    } else if (j.c->pairs_slot_rounds(j, false)) {
      kinds[1].push_back(&j);
    } else {
      j.c->decode(j.payload, j.count, j.out, j.wide_at);
    }
  }
  for (std::vector<decode_job const*>& kind : kinds) {
    std::stable_sort(kind.begin(), kind.end(),
                     [](decode_job const* a, decode_job const* b) {
                       return a->count > b->count;
                     });
    size_t k = 0;
    for (; k + 1 < kind.size(); k += 2) decode_pair(*kind[k], *kind[k + 1]);
    if (k < kind.size()) {
      kind[k]->c->decode(kind[k]->payload, kind[k]->count, kind[k]->out,
                         kind[k]->wide_at);
    }
  }
}

template <unsigned n_lanes>
void coder::decode_slot_pair(decode_job const& a, decode_job const& b) {
  uint32_t xa[n_lanes], xb[n_lanes];
  auto const stream = [](decode_job const& j, uint32_t* x) {
    j.c->dec_once_([&j] { j.c->build_decoder(); });
    for (unsigned k = 0; k < n_lanes; ++k) {
      x[k] = load_le<uint32_t>(j.payload.data() + 4 * k);
    }
    return simd::slot_stream{j.c->width_,
                             x,
                             j.payload.data() + 4 * n_lanes,
                             j.payload.data() + j.payload.size(),
                             j.count,
                             j.c->scale_,
                             j.c->dec_step_.get(),
                             j.c->dec_symbol_.get(),
                             j.out,
                             j.c->dec_packed_.get(),
                             j.c->packed_bits_};
  };
  simd::slot_stream sa = stream(a, xa);
  simd::slot_stream sb = stream(b, xb);
  // Bad states would renormalize wrongly: such payloads decode alone.
  bool const states_ok =
      std::all_of(xa, xa + n_lanes,
                  [](uint32_t v) { return v >= state_low; }) &&
      std::all_of(xb, xb + n_lanes, [](uint32_t v) { return v >= state_low; });
  size_t done = 0;
  if (states_ok) {
    done = n_lanes == wide_lanes ? simd::decode_pair_rounds_avx512(sa, sb)
                                 : simd::decode_narrow_pair_rounds_avx2(sa, sb);
  }
  resume_point const ra{done, xa, sa.p}, rb{done, xb, sb.p};
  auto const finish = [done](decode_job const& j, resume_point const& r) {
    resume_point const* const from = done ? &r : nullptr;
    j.c->width_ == 1 ? j.c->dispatch_decode<uint8_t, n_lanes>(
                           j.payload, j.count, j.out, from)
                     : j.c->dispatch_decode<uint16_t, n_lanes>(
                           j.payload, j.count, j.out, from);
  };
  finish(a, ra);
  finish(b, rb);
}

}  // namespace brevis::codec::rans_static
