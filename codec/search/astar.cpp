// The search engine.
//
// Costs. A complete program costs its description length under the prior
// (-log2 P(production | context) per decision, plus parameter and blob bits)
// plus the payload bits of its leaves, measured on the region's sample and
// scaled to the region (from the whole histograms, for static tables of the
// region's elements and their planes and fields: tables are estimated, not
// built, and only the winner's are built). Every cost is >= 0.
//
// States. A partial program closes some values with leaves (their costs are
// in g) and leaves others open. Every open value already knows its best
// leaf, so every state also names a complete program -- itself with each
// open value closed by its best leaf -- whose cost is an upper bound on the
// best completion of the state. The best such program seen so far is the
// answer when the budget runs out; the root state alone gives a plain leaf
// on the whole region, so there is always one.
//
// Heuristic. f = g + w * (sum of the open values' best leaf costs), w the
// heuristic weight. It is admissible only for w = 0: an operator can take a
// value below any fraction of its best leaf cost (low_zero halves an fp32
// upcast, repeat keeps one period), so for w > 0 it orders the search and
// prunes it (a state whose f is no better than the best complete program is
// dropped) without proving anything: with w = 0.2 a state is given up when
// even cutting its open values' cost by 80% would not win. With w = 0 the
// search is uniform-cost and drops only states that cannot win (costs are
// >= 0 and g only grows).
//
// Branching. A state branches on one open value only (the one whose best
// leaf costs most): close it with that leaf, or apply each production that
// fits it. Closing with any other leaf is dominated (a value's leaf cost
// does not depend on the rest of the program), and branching on one value
// per state derives every program once.

#include "codec/search/astar.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <tuple>
#include <unordered_map>

#include "codec/choose/entropy_terms.h"
#include "codec/choose/sample.h"
#include "codec/choose/work_clock.h"
#include "codec/dsl/operator.h"
#include "codec/dsl/scratch.h"
#include "codec/entropy/rans_static.h"
#include "codec/leaves/rans_static.h"
#include "codec/search/closed_form.h"
#include "codec/search/cost_model.h"
#include "codec/search/decode_speed.h"
#include "codec/search/sparse_mask.h"
#include "codec/search/whole_counts.h"

namespace brevis::codec::search {
namespace {

constexpr double infinite = std::numeric_limits<double>::infinity();

struct value {
  stream sample;
  value_stats stats;
  unsigned depth = 0;
  opcode parent = opcode::raw;
  byte_view whole;
  // Where the whole value comes from, when it is the region's elements,
  // their nonzero ones (sparse's values) or a byte plane or float field of
  // either: runs on it count the whole value's runs there.
  value_source source;
  double scale = 1;  // region bytes this value stands for per sample byte
  uint64_t hash = 0;
  context ctx;
  std::vector<uint16_t> applicable;
  // P and -log2 P of every production under the prior (0 and infinity where
  // it does not apply), computed once per value.
  std::vector<double> prob, prob_bits;
  std::shared_ptr<sparse_hist const> whole_hist;  // see value_info
  node leaf;  // the best leaf and its cost (description + payload bits)
  double leaf_bits = infinite;
  double leaf_decode_ns = 0;
  uint16_t leaf_prod = 0;

  value_info info() const {
    return {sample, stats, depth, parent, whole, whole_hist.get()};
  }
};
using value_ptr = std::shared_ptr<value const>;

struct slot {
  std::vector<uint8_t> path;
  value_ptr v;
};

struct state {
  node tree;
  std::vector<slot> open;
  double g = 0;
  double decode_ns = 0;  // ns per region byte of the closed nodes
  std::vector<decision> decisions;

  double open_bits() const {
    double b = 0;
    for (slot const& s : open) b += s.v->leaf_bits;
    return b;
  }
};

struct complete {
  node program;
  double bits = infinite;
  double decode_ns = 0;
  std::vector<decision> decisions;
};

node const* find_at(node const& root, std::vector<uint8_t> const& path) {
  node const* n = &root;
  for (uint8_t i : path) {
    if (i >= n->children.size()) return nullptr;
    n = &n->children[i];
  }
  return n;
}

node& at(node& root, std::vector<uint8_t> const& path) {
  node* n = &root;
  for (uint8_t i : path) n = &n->children[i];
  return *n;
}

double ns_per_byte(opcode op) { return 1000.0 / decode_mb_per_s(op); }

// The node's own bytes in the serialized program (opcode, counts and
// parameters; blobs are charged by the cost model): a program table entry
// costs them once, which matters for tiny regions.
double param_bits(node const& n) {
  bytes b;
  for (uint64_t p : n.params) put_varint(b, p);
  return 8.0 * static_cast<double>(2 + b.size());
}

class engine {
 public:
  engine(region_input const& in, prior const& p, search_options const& o)
      : in_(in), prior_(p), opt_(o), costs_(in) {
    unsigned const w = std::max(1u, dtype_width(in.info.type));
    // sample_floor and 1/32 of the region, as much as the sample may hold.
    // bf16 and fp16 regions need less (16 KiB and 1/64, half as much at most):
    // their elements', byte planes' and float fields' costs come from the
    // region's histogram, and the sample only decides among the rest (on
    // /tmp/qc: 0.0001% larger than 64 KiB and 1/32, a third of the
    // search's CPU saved).
    bool const float16 =
        in.info.type == dtype::bf16 || in.info.type == dtype::f16;
    bool const costed = float16 && in.root_hist != nullptr;
    size_t const want =
        costed ? std::min(o.sample_bytes / 2, (16u << 10) + in.data.size() / 64)
               : std::min(o.sample_bytes, o.sample_floor + in.data.size() / 32);
    sample_ = sample_slices(in.data, w, want);
    // Row windows (below) keep the 64 KiB floor they were tuned at.
    size_t const full =
        std::min(o.sample_bytes, (64u << 10) + in.data.size() / 32);
    window_factor_ = static_cast<double>(full) /
                     static_cast<double>(std::max<size_t>(1, want));
    budget_ = o.budget;
    // Float fields and byte planes are what wins there, and their costs
    // come from the histogram; integers need deeper programs (rows, deltas).
    if (in.root_hist != nullptr && !in.root_hist->empty() &&
        (in.info.type == dtype::bf16 || in.info.type == dtype::f16)) {
      budget_ =
          std::max<size_t>(1, static_cast<size_t>(static_cast<double>(budget_) *
                                                  o.histogram_budget));
    }
    if (in.data.size() < (64u << 10)) {
      budget_ =
          std::min(budget_, std::max(o.small_region_budget,
                                     budget_ * in.data.size() / (64u << 10)));
    }
    scale_ = sample_.empty() ? 1
                             : static_cast<double>(in.data.size()) /
                                   static_cast<double>(sample_.size());
  }

  search_result run(node const* seed, double seed_margin,
                    std::span<decision const> seed_decisions) {
    double const start = work_clock_ms();
    // The CPU clock is a system call (1.4-6 us): read only for a time limit
    // (two reads a search were 0.6% of compressing blazepose-detector.bf16.pt).
    double const cpu_start = opt_.time_ms > 0 ? thread_cpu_ms() : 0;
    // A sibling's program is the likely answer: a short search checks it.
    if (seed != nullptr) budget_ = std::max<size_t>(2, budget_ / 4);
    if (trace_) {
      std::fprintf(stderr, "search %s (%zu bytes)%s\n", in_.info.name.c_str(),
                   in_.data.size(),
                   seed ? (" seed " + program_text(*seed)).c_str() : "");
    }
    bool const may_trust =
        seed != nullptr && opt_.trust_seed && !seed_decisions.empty();
    // While a sibling's program is checked, zstd is not tried on the
    // region's bytes: the sibling's search tried it and lost, on the same
    // statistics (compressing blazepose-detector.bf16.pt, 21 trusted
    // siblings: 434.4 -> 425.4 M instructions, valgrind). Not admissible --
    // zstd could win here where it lost there -- so where the seed is not
    // trusted, the search goes on exactly as if zstd had been tried.
    skip_zstd_ = may_trust;
    state s0 = start_state();
    if (may_trust) {
      double const plain = best_.bits;
      complete s = replay(*seed, true);
      bool const same = same_decisions(s.decisions, seed_decisions);
      if (trace_) {
        std::fprintf(stderr,
                     "  seed %.0f plain %.0f best on its path %.0f, %s "
                     "statistics\n",
                     s.bits, plain, best_.bits, same ? "same" : "other");
      }
      // Kept within the margin of its path's best, as a seed is after a
      // search.
      if (same && s.bits < plain && s.bits <= best_.bits * (1 + seed_margin)) {
        return result(std::move(s), replayed_, start);
      }
      // Searched after all: the values measured so far get their zstd
      // leaves, and the search goes on as if they always had them (a leaf
      // replaces the best only when strictly cheaper, as in make_value).
      skip_zstd_ = false;
      for (auto const& v : skipped_zstd_) try_leaves(*v, leaves::zstd);
      skipped_zstd_.clear();
      best_ = {};
      best_fast_ = {};
      consider(s0);
    }

    auto worse = [](std::pair<double, size_t> const& a,
                    std::pair<double, size_t> const& b) { return a > b; };
    std::priority_queue<std::pair<double, size_t>,
                        std::vector<std::pair<double, size_t>>, decltype(worse)>
        queue(worse);
    std::vector<state> states;
    auto push = [&](state&& s) {
      double const f = s.g + opt_.heuristic_weight * s.open_bits();
      states.push_back(std::move(s));
      queue.push({f, states.size() - 1});
    };
    push(std::move(s0));
    size_t expansions = 0;
    while (!queue.empty() && expansions < budget_) {
      if (opt_.time_ms > 0 && thread_cpu_ms() - cpu_start > opt_.time_ms) {
        break;
      }
      size_t const i = queue.top().second;
      queue.pop();
      state s = std::move(states[i]);
      // f >= the best complete program: even with the heuristic's hoped-for
      // savings the state cannot win (inadmissible for w > 0, see above).
      if (s.open.empty() ||
          s.g + opt_.heuristic_weight * s.open_bits() >= best_.bits) {
        continue;
      }
      ++expansions;
      std::vector<state> next = expand(s);
      if (opt_.how == strategy::greedy) {
        // Keep only the successor whose completion is best.
        while (!queue.empty()) queue.pop();
        auto upper = [](state const& t) { return t.g + t.open_bits(); };
        auto it = std::min_element(next.begin(), next.end(),
                                   [&](state const& a, state const& b) {
                                     return upper(a) < upper(b);
                                   });
        if (it == next.end()) break;
        state keep = std::move(*it);
        next.clear();
        next.push_back(std::move(keep));
      }
      for (state& t : next) {
        if (trace_) {
          std::fprintf(stderr, "  [%zu] g %.0f upper %.0f %s\n", expansions,
                       t.g, t.g + t.open_bits(), program_text(t.tree).c_str());
        }
        consider(t);
        if (!t.open.empty() &&
            t.g + opt_.heuristic_weight * t.open_bits() < best_.bits) {
          push(std::move(t));
        }
      }
    }

    complete chosen = best_;
    // Slow programs only when they save enough over the best fast one.
    if (1000.0 / chosen.decode_ns < fast_decode_mb_per_s &&
        best_fast_.bits <= chosen.bits * (1 + opt_.slow_margin)) {
      chosen = best_fast_;
    }
    if (seed != nullptr) {
      // A seed checked before the search replays from the applications'
      // cache: its steps are counted once.
      size_t const replayed = replayed_;
      complete const s = replay(*seed);
      if (may_trust) replayed_ = replayed;
      if (trace_) {
        std::fprintf(stderr, "  seed %.0f best %.0f\n", s.bits, chosen.bits);
      }
      if (s.bits <= chosen.bits * (1 + seed_margin)) chosen = s;
    }
    return result(std::move(chosen), expansions + replayed_, start);
  }

 private:
  // CPU time of the calling thread: the time limit bounds the search's own
  // work, so a loaded machine (descheduling) does not cut it short and
  // change the archive.
  static double thread_cpu_ms() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return 1e3 * static_cast<double>(t.tv_sec) +
           1e-6 * static_cast<double>(t.tv_nsec);
  }

  static search_result result(complete chosen, size_t expansions,
                              double start) {
    search_result r;
    r.program = std::move(chosen.program);
    r.estimated_bytes = chosen.bits / 8;
    r.decode_mb_per_s = 1000.0 / std::max(chosen.decode_ns, 1e-9);
    r.decisions = std::move(chosen.decisions);
    r.expansions = expansions;
    r.ms = work_clock_ms() - start;
    return r;
  }

  // The root state (the region's bytes, open) after measuring the root
  // value; its plain leaf is the first complete program.
  state start_state() {
    // The region's byte histogram, where its 16-bit one is known: the
    // byte leaves' costs are then exact (centernet.fp16's squeeze-excite
    // weights: rans_static on the bytes estimated from the sample at
    // 93,590 B coded to 146,355 B).
    std::shared_ptr<sparse_hist const> bytes_hist;
    if (in_.root_hist != nullptr && !in_.root_hist->empty()) {
      std::array<uint64_t, 256> counts{};
      for (auto const& [sym, c] : *in_.root_hist) {
        counts[sym & 255] += c, counts[sym >> 8] += c;
      }
      if (in_.data.size() % 2 != 0) ++counts[in_.data.back()];
      auto h = std::make_shared<sparse_hist>();
      for (uint32_t b = 0; b < 256; ++b) {
        if (counts[b]) h->emplace_back(b, entry_count(counts[b]));
      }
      bytes_hist = std::move(h);
    }
    root_ = make_value(stream{sample_, bytes_type}, 0, in_.data, scale_,
                       opcode::raw, std::move(bytes_hist), {in_.data, 1});
    state s0;
    s0.tree = open_value();
    s0.open.push_back({{}, root_});
    consider(s0);
    return s0;
  }

  static double probability(value const& v, uint16_t p) { return v.prob[p]; }
  static double description_bits(value const& v, uint16_t p) {
    return v.prob_bits[p];
  }

  // Unlikely operators are not tried, nor zstd and rans1 (a trial encode,
  // an order-1 histogram); the other
  // leaves cost a histogram each, and a value's plain leaves are what every
  // program falls back on, so they are always measured.
  bool pruned(value const& v, uint16_t p) const {
    opcode const op = productions()[p].op;
    if (prior_.uniform() ||
        (is_leaf(op) && op != opcode::zstd && op != opcode::rans1)) {
      return false;
    }
    // zstd on the region's bytes: what finds repeats the operators miss.
    if (op == opcode::zstd && v.depth == 0) return false;
    if (v.depth < opt_.prune_from_depth) return false;
    return probability(v, p) < opt_.prune_below;
  }

  value_ptr make_value(stream s, unsigned depth, byte_view whole, double scale,
                       opcode parent = opcode::raw,
                       std::shared_ptr<sparse_hist const> whole_hist = nullptr,
                       value_source source = {}) {
    auto v = std::make_shared<value>();
    v->sample = std::move(s);
    v->depth = depth;
    v->parent = parent;
    v->whole = whole;
    v->source = source;
    v->scale = scale;
    // A known whole histogram gives the byte statistics, and the elements
    // under the root view have the root's bytes: the sample's bytes are not
    // counted again.
    bool const root_bytes = same_bytes_as_root(*v) && v->sample.type.width > 1;
    v->hash = value_hash(v->sample);
    v->stats =
        measured(v->sample, v->hash,
                 !root_bytes && (whole_hist == nullptr || whole_hist->empty()));
    if (root_bytes) {
      v->stats.byte_counts = root_->stats.byte_counts;
      v->stats.byte_entropy = root_->stats.byte_entropy;
    }
    if (whole_hist && !whole_hist->empty()) {
      use_whole_histogram(*whole_hist, v->sample.type.width, v->stats);
    }
    v->whole_hist = std::move(whole_hist);
    // The period is only looked for at the region's elements (repeat_fits):
    // the region's bytes match their first byte every few bytes.
    if (!whole.empty()) {
      measure_whole(whole, v->sample.type.width, v->stats,
                    depth == 1 && !elements_unrepeated(v->sample.type.width));
    }
    // Repeated words decide whether zstd may code the region's bytes or
    // elements: the same sample bytes, counted once.
    if (depth <= 1 && v->sample.data.size() >= 64 &&
        in_.info.kind == region_kind::tensor && in_.info.type != dtype::none) {
      if (same_bytes_as_root(*v)) {
        v->stats.word_repeats = root_->stats.word_repeats;
      } else {
        v->stats.word_repeats = repeated_words(v->sample.data);
      }
    }
    v->ctx = context::of(v->sample.type, depth, v->stats, in_.data.size());
    auto const prods = productions();
    value_info const vi = v->info();
    for (size_t i = 0; i < prods.size(); ++i) {
      if (prods[i].applies(vi, in_)) {
        v->applicable.push_back(static_cast<uint16_t>(i));
      }
    }
    std::vector<double> probs;
    prior_.probabilities(v->ctx, v->applicable, probs);
    v->prob.assign(prods.size(), 0);
    v->prob_bits.assign(prods.size(), infinite);
    for (size_t i = 0; i < probs.size(); ++i) {
      v->prob[v->applicable[i]] = probs[i];
      v->prob_bits[v->applicable[i]] = -std::log2(probs[i]);
    }
    // Its best leaf.
    bool const skips_zstd = skip_zstd_ && try_leaves(*v, leaves::zstd, true);
    try_leaves(*v, skips_zstd ? leaves::all_but_zstd : leaves::all);
    if (skips_zstd) skipped_zstd_.push_back(v);
    return v;
  }

  // measure() of a sample, once per search: operators reach the same
  // values by different paths (a float's mantissa planes are the low
  // planes of its elements; fields and bitfields cut the same bytes), and
  // on fp32 tensors the sample's histograms were a third of the search.
  value_stats const& measured(stream const& s, uint64_t hash, bool bytes) {
    uint64_t const key = hash ^ (bytes ? 0x9e3779b97f4a7c15 : 0);
    auto it = measured_.find(key);
    if (it == measured_.end()) {
      it = measured_.emplace(key, measure(s, bytes)).first;
    }
    return it->second;
  }

  enum class leaves : uint8_t { all, all_but_zstd, zstd };

  // Costs the value's leaves of kind `which` and keeps the best of them and
  // the leaf it had (with `dry`, only tells whether there is one to cost).
  bool try_leaves(value& v, leaves which, bool dry = false) {
    auto const prods = productions();
    value_info const vi = v.info();
    double const frac = region_fraction(v);
    std::vector<node> gen;
    bool any = false;
    for (uint16_t p : v.applicable) {
      production const& pr = prods[p];
      if (!is_leaf(pr.op) || pruned(v, p)) continue;
      bool const zstd = pr.op == opcode::zstd;
      if ((which == leaves::zstd && !zstd) ||
          (which == leaves::all_but_zstd && zstd)) {
        continue;
      }
      any = true;
      if (dry) continue;
      gen.clear();
      pr.generate(vi, in_, gen);
      for (node& n : gen) {
        double const bits =
            costs_.payload_bits(vi, v.hash, v.scale, n, pr.name) +
            costs_.blob_bits(n, pr.name) + param_bits(n) +
            description_bits(v, p);
        if (bits < v.leaf_bits) {
          v.leaf_bits = bits;
          v.leaf = std::move(n);
          v.leaf_prod = p;
          v.leaf_decode_ns = frac * ns_per_byte(pr.op);
        }
      }
    }
    return any;
  }

  // Whether `v` holds the root's sample bytes: the elements under the root
  // view (whole lanes of the same bytes), read as wider lanes.
  bool same_bytes_as_root(value const& v) const {
    return v.depth == 1 && v.parent == opcode::view && root_ != nullptr &&
           root_->sample.data.size() == v.sample.data.size();
  }

  // Whether the region's 16-bit elements cannot repeat with a period (one
  // of at most half their count): some value occurs once. Known from the
  // histogram, it spares the period's scan of weights.
  bool elements_unrepeated(unsigned width) const {
    if (width != 2 || in_.root_hist == nullptr) return false;
    return std::any_of(in_.root_hist->begin(), in_.root_hist->end(),
                       [](auto const& sc) { return sc.second == 1; });
  }

  // A tensor whose statistics drift along it has richer histograms than a
  // few slices show, and the exact costs of the region's elements must not
  // lose to such biased estimates: where the region's 16-bit histogram is
  // known, so are those of its byte planes and float fields, and their byte
  // statistics replace the sample's (scaled to the sample's size).
  static void use_whole_histogram(sparse_hist const& h, unsigned width,
                                  value_stats& st) {
    std::array<uint64_t, 256> bytes{};
    uint64_t total = 0;
    bool const wide = width == 2;
    double const sample_bytes = static_cast<double>(st.count * width);
    for (auto const& [sym, c] : h) {
      bytes[sym & 255] += c;
      if (wide) bytes[sym >> 8] += c;
      total += c * (wide ? 2 : 1);
    }
    if (total == 0) return;
    double terms = 0;
    for (size_t b = 0; b < 256; ++b) {
      double const share =
          static_cast<double>(bytes[b]) / static_cast<double>(total);
      st.byte_counts[b] =
          share > 0 ? std::max<uint32_t>(
                          1, static_cast<uint32_t>(share * sample_bytes + 0.5))
                    : 0;
      terms += c_log2_c(bytes[b]);
    }
    st.byte_entropy =
        entropy_from_terms(total, terms) / static_cast<double>(total);
    st.distinct = std::min<size_t>(257, h.size());
    st.constant = h.size() == 1;
    // The zero leaf, and sparse, by the whole value's zeros: a field zero
    // in every sampled element may not be zero everywhere (the exponents
    // of rows of +-0 where the sample missed the rows of weights; the
    // program then fell back to its chunk's plain leaf at 6.7x the
    // estimate).
    uint64_t zeros = 0, elements = 0;
    for (auto const& [sym, c] : h) elements += c, zeros += sym == 0 ? c : 0;
    st.zero_rate = static_cast<double>(zeros) / static_cast<double>(elements);
  }

  // The whole-value histograms of the children of `n` applied to a 16-bit
  // value whose whole histogram is known (the region's elements; a float
  // field of them, such as fp16's 10-bit mantissas): byte planes, float
  // fields, or none. Split once per operator and value: every state
  // applying it shares them.
  std::vector<std::shared_ptr<sparse_hist const>> const& child_histograms(
      node const& n, value const& v) {
    static std::vector<std::shared_ptr<sparse_hist const>> const none;
    if (v.sample.type.width != 2) return none;
    sparse_hist const* h = v.whole_hist.get();
    if (v.depth == 1 && !v.whole.empty()) h = in_.root_hist;
    if (h == nullptr || h->empty()) return none;
    auto const key = std::make_tuple(h, n.op, v.sample.type.kind);
    for (auto const& [k, hists] : split_cache_) {
      if (k == key) return hists;
    }
    split_cache_.push_back({key, {}});
    auto& out = split_cache_.back().second;
    if (n.op == opcode::sparse) {
      // The region's elements: the mask bytes' histogram, counted, and the
      // nonzero values', the region's without 0 (their sampled costs were
      // the estimates furthest off on the corpus: centernet.bf16's pruned
      // squeeze-excite weights estimated at 59,326 B coded to 93,969 B).
      if (h != in_.root_hist || v.whole.empty()) return none;
      auto mask = std::make_shared<sparse_hist>();
      auto const bytes = sparse_mask_histogram16(
          v.whole, std::max<size_t>(1, opt_.chunk_size / 2));
      for (uint32_t s = 0; s < bytes.size(); ++s) {
        if (bytes[s]) mask->emplace_back(s, entry_count(bytes[s]));
      }
      bool const zeros = !h->empty() && h->front().first == 0;
      out.push_back(std::move(mask));
      out.push_back(
          std::make_shared<sparse_hist>(h->begin() + zeros, h->end()));
      return out;
    }
    for (auto const& k : split_histogram(*h, n.op, v.sample.type.kind)) {
      auto kid = std::make_shared<sparse_hist>();
      for (uint32_t s = 0; s < k.size(); ++s) {
        if (k[s]) kid->emplace_back(s, entry_count(k[s]));
      }
      out.push_back(std::move(kid));
    }
    return out;
  }

  double region_fraction(value const& v) const {
    return in_.data.empty()
               ? 0
               : static_cast<double>(v.sample.data.size()) * v.scale /
                     static_cast<double>(in_.data.size());
  }

  // The complete program of a state: open values closed by their best leaf.
  void consider(state const& s) {
    double bits = s.g + s.open_bits();
    bool const better = bits < best_.bits;
    double decode_ns = s.decode_ns;
    for (slot const& o : s.open) decode_ns += o.v->leaf_decode_ns;
    bool const fast = 1000.0 / decode_ns >= fast_decode_mb_per_s;
    bool const better_fast = fast && bits < best_fast_.bits;
    if (!better && !better_fast) return;
    complete c;
    c.program = s.tree;
    c.bits = bits;
    c.decode_ns = decode_ns;
    c.decisions = s.decisions;
    for (slot const& o : s.open) {
      at(c.program, o.path) = o.v->leaf;
      c.decisions.push_back({o.v->ctx, o.v->leaf_prod});
    }
    if (better_fast) best_fast_ = c;
    if (better) best_ = std::move(c);
  }

  // What applying node `n` (production p) to a value gives, the same in
  // every state holding the value: computed once (the encode and the
  // children's statistics are most of a search's work).
  struct application {
    bool ok = false;
    double bits = 0;       // description, parameters, side data, closed kids
    double decode_ns = 0;  // per region byte
    std::vector<value_ptr> kids;  // null where n closes the child itself
  };

  application const& applied(value_ptr const& vp, uint16_t p, node const& n) {
    auto key = std::make_tuple(vp.get(), p, n.params);
    auto it = applied_.find(key);
    if (it != applied_.end()) return it->second.second;
    auto& [keep, a] = applied_[key];
    keep = vp;  // the key's address stays this value's
    value const& v = *vp;
    op_def const& op = op_for(n.op);
    try {
      op.child_types(n, v.sample.type);
    } catch (error const&) {
      return a;
    }
    // repeat keeps one period per chunk: it is measured on the region's
    // first chunk (the sample's slices are not periodic).
    stream prefix;
    stream const* input = &v.sample;
    double child_scale = v.scale;
    if (n.op == opcode::repeat) {
      unsigned const w = v.sample.type.width;
      size_t const step = std::max<size_t>(w, opt_.chunk_size / w * w);
      size_t const len = std::min(step, v.whole.size() / w * w);
      prefix.data.assign(v.whole.begin(), v.whole.begin() + len);
      prefix.type = v.sample.type;
      input = &prefix;
      child_scale = std::ceil(static_cast<double>(v.whole.size()) /
                              static_cast<double>(step));
    } else if ((n.op == opcode::xor_row || n.op == opcode::transpose) &&
               !v.whole.empty()) {
      // Row operators relate elements a row apart, which the sample's
      // slices separate: they are measured on a contiguous window of whole
      // rows from the middle of the region, as large as the full sample
      // (the histogram-costed regions' smaller samples mislead them).
      unsigned const w = v.sample.type.width;
      size_t const row = static_cast<size_t>(n.params.at(0)) * w;
      size_t const rows = std::max<size_t>(
          1, static_cast<size_t>(static_cast<double>(v.sample.data.size()) *
                                 window_factor_) /
                 row);
      size_t const len = std::min(rows * row, v.whole.size() / row * row);
      size_t const start = (v.whole.size() / row - len / row) / 2 * row;
      prefix.data.assign(v.whole.begin() + start,
                         v.whole.begin() + start + len);
      prefix.type = v.sample.type;
      input = &prefix;
      child_scale = static_cast<double>(v.whole.size()) /
                    static_cast<double>(std::max<size_t>(1, len));
    }
    std::vector<stream> kids;
    bytes side;
    try {
      op.encode(n, *input, kids, side);
    } catch (error const& e) {
      if (e.code() != errc::domain) throw;
      return a;
    }
    if (kids.size() != n.children.size()) return a;
    a.ok = true;
    a.bits = description_bits(v, p) + param_bits(n) +
             8.0 * static_cast<double>(side.size()) * child_scale;
    a.decode_ns = region_fraction(v) * ns_per_byte(n.op);
    auto const& hists = child_histograms(n, v);
    std::vector<double> const scales = kid_scales(n, v, kids, child_scale);
    for (size_t i = 0; i < kids.size(); ++i) {
      byte_view whole;
      value_source source;
      if (n.op == opcode::view && i == 0 && v.depth == 0) {
        unsigned const w = kids[i].type.width;
        whole = v.whole.first(v.whole.size() / w * w);
      }
      if (!whole.empty()) {
        source = {whole, kids[i].type.width};
      } else if (n.op == opcode::sparse && i == 1 && !v.source.skip_zeros &&
                 v.source.bits == 0) {
        source = v.source;
        source.skip_zeros = true;
      } else if (v.source.bits == 0) {
        source = field_source(n, i, v);
      }
      if (n.children[i].op == hole) {
        a.kids.push_back(
            make_value(std::move(kids[i]), v.depth + 1, whole, scales[i], n.op,
                       i < hists.size() ? hists[i] : nullptr, source));
      } else {
        node const& leaf = n.children[i];
        value_stats const st = measure(kids[i]);
        value_info const vi{kids[i], st, v.depth + 1, n.op, {}};
        a.bits += costs_.payload_bits(vi, value_hash(kids[i]), scales[i], leaf,
                                      opcode_name(leaf.op));
        a.kids.push_back(nullptr);
      }
    }
    return a;
  }

  // The region bytes per sample byte of the children `kids` of node `n`
  // applied to the sample of `v`: `scale`, the parent's, unless the whole
  // value's count of sparse's nonzero elements (from the region's
  // histogram) or of runs (whole_counts.h) is known: the sample's share of
  // them may be far from the region's.
  std::vector<double> kid_scales(node const& n, value const& v,
                                 std::vector<stream> const& kids,
                                 double scale) const {
    std::vector<double> out(kids.size(), scale);
    unsigned const w = v.sample.type.width;
    auto ratio = [](size_t whole, size_t sampled) {
      return static_cast<double>(whole) /
             static_cast<double>(std::max<size_t>(1, sampled));
    };
    // Only where the nonzero values' costs are exact too (their histogram
    // is the region's without 0): fp32's, sampled, are biased low as the
    // alternatives' are, and their count alone took centernet.fp32's
    // winners from sparse programs that coded smaller (+0.25%).
    if (n.op == opcode::sparse && kids.size() == 2 && !v.whole.empty() &&
        w == 2 && v.depth == 1 && in_.root_hist != nullptr &&
        !in_.root_hist->empty()) {
      size_t nonzero = 0;
      for (auto const& [sym, c] : *in_.root_hist) nonzero += sym != 0 ? c : 0;
      out[1] = ratio(nonzero, kids[1].count());
    } else if (n.op == opcode::runs && kids.size() == 2) {
      if (v.source.elements.empty()) return out;
      // 0: a source count_runs does not handle (the sample's share then).
      size_t const whole = count_runs(v.source);
      if (whole > 0) out[0] = out[1] = ratio(whole, kids[1].count());
    }
    return out;
  }

  // The source of child i of planes or fields applied to `v`, whose
  // source is whole elements: a field of them (none for other operators).
  static value_source field_source(node const& n, size_t i, value const& v) {
    value_source s = v.source;
    unsigned const w = v.sample.type.width;
    if (n.op == opcode::planes && i < w) {
      s.shift = 8 * static_cast<unsigned>(i), s.bits = 8;
      return s;
    }
    unsigned const m = meaning_width(v.sample.type.kind) == w
                           ? float_mantissa_bits(v.sample.type.kind)
                           : 0;
    if (n.op != opcode::fields || m == 0 || i > 2) return {};
    unsigned const e = 8 * w - 1 - m;  // sign, exponent, mantissa
    unsigned const shifts[3] = {e + m, m, 0}, bits[3] = {1, e, m};
    s.shift = shifts[i], s.bits = bits[i];
    return s;
  }

  // Applies node `n` (production p) to the open value in slot k of s.
  bool apply(state const& s, size_t k, uint16_t p, node const& n, state& out) {
    value_ptr const vp = s.open[k].v;
    application const& a = applied(vp, p, n);
    if (!a.ok) return false;
    out = s;
    slot const taken = out.open[k];
    out.open.erase(out.open.begin() + static_cast<ptrdiff_t>(k));
    out.g += a.bits;
    out.decode_ns += a.decode_ns;
    out.decisions.push_back({vp->ctx, p});
    at(out.tree, taken.path) = n;
    for (size_t i = 0; i < a.kids.size(); ++i) {
      if (a.kids[i] == nullptr) continue;
      std::vector<uint8_t> path = taken.path;
      path.push_back(static_cast<uint8_t>(i));
      out.open.push_back({std::move(path), a.kids[i]});
    }
    return true;
  }

  std::vector<state> expand(state const& s) {
    size_t k = 0;
    for (size_t i = 1; i < s.open.size(); ++i) {
      if (s.open[i].v->leaf_bits > s.open[k].v->leaf_bits) k = i;
    }
    value const& v = *s.open[k].v;
    std::vector<state> out;
    {  // close it with its best leaf
      state c = s;
      at(c.tree, s.open[k].path) = v.leaf;
      c.g += v.leaf_bits;
      c.decode_ns += v.leaf_decode_ns;
      c.decisions.push_back({v.ctx, v.leaf_prod});
      c.open.erase(c.open.begin() + static_cast<ptrdiff_t>(k));
      out.push_back(std::move(c));
    }
    // Operators, the likeliest first.
    auto const prods = productions();
    std::vector<std::pair<double, uint16_t>> ops;
    for (uint16_t p : v.applicable) {
      if (is_leaf(prods[p].op) || pruned(v, p)) continue;
      ops.push_back({-probability(v, p), p});
    }
    std::sort(ops.begin(), ops.end());
    std::vector<node> gen;
    for (auto const& [negp, p] : ops) {
      gen.clear();
      prods[p].generate(v.info(), in_, gen);
      for (node const& n : gen) {
        state t;
        if (apply(s, k, p, n, t)) out.push_back(std::move(t));
      }
    }
    return out;
  }

  // The cost of a sibling's program on this region: its decisions replayed
  // (tables refitted), or no program when it does not fit.
  //
  // With `on_path`, every state the replay passes through is considered
  // (its open values closed by their best leaves): a seed is then trusted
  // only where no program on its own path beats it (centernet.bf16's
  // expanded_conv_4 weights replayed a sibling's fields program at 2,226 B
  // where the elements' own table, one step up, coded them in 1,937 B).
  complete replay(node const& seed, bool on_path = false) {
    state s;
    s.tree = open_value();
    s.open.push_back({{}, root_});
    auto const prods = productions();
    while (!s.open.empty()) {
      if (on_path) consider(s);
      slot const o = s.open.front();
      node const* found = find_at(seed, o.path);
      if (found == nullptr) return {};
      node const& want = *found;
      value const& v = *o.v;
      if (is_leaf(want.op)) {
        // Its best leaf when that is the seed's kind, else the seed's.
        if (v.leaf.op != want.op) return {};
        at(s.tree, o.path) = v.leaf;
        s.g += v.leaf_bits;
        s.decode_ns += v.leaf_decode_ns;
        s.decisions.push_back({v.ctx, v.leaf_prod});
        s.open.erase(s.open.begin());
        continue;
      }
      bool done = false;
      std::vector<node> gen;
      for (uint16_t p : v.applicable) {
        if (prods[p].op != want.op) continue;
        gen.clear();
        prods[p].generate(v.info(), in_, gen);
        for (node const& n : gen) {
          if (n.params != want.params) continue;
          state t;
          if (apply(s, 0, p, n, t)) {
            s = std::move(t);
            done = true;
            ++replayed_;
          }
          break;
        }
        if (done) break;
      }
      if (!done) return {};
    }
    complete c;
    c.program = s.tree;
    c.bits = s.g;
    c.decode_ns = s.decode_ns;
    c.decisions = s.decisions;
    return c;
  }

  region_input const& in_;
  prior const& prior_;
  search_options const& opt_;
  cost_model costs_;
  bytes sample_;
  double scale_ = 1;
  double window_factor_ = 1;  // row windows: the full sample over ours
  size_t budget_ = 0;
  bool trace_ = std::getenv("BREVIS_SEARCH_TRACE") != nullptr;
  complete best_;
  complete best_fast_;
  size_t replayed_ = 0;     // a seed's operators applied (as expansions)
  bool skip_zstd_ = false;  // while a seed is checked (run())
  std::vector<std::shared_ptr<value>> skipped_zstd_;  // their values
  value_ptr root_;  // the region's bytes, shared by the search and replay
  // (value hash, bytes counted) -> its statistics (measured())
  std::unordered_map<uint64_t, value_stats> measured_;
  // (value, production, parameters) -> what applying it gives; the value
  // is held so that its address keys nothing else
  std::map<std::tuple<value const*, uint16_t, std::vector<uint64_t>>,
           std::pair<value_ptr, application>>
      applied_;
  // (histogram, operator, meaning) -> the histogram split by it
  std::deque<std::pair<std::tuple<sparse_hist const*, opcode, meaning>,
                       std::vector<std::shared_ptr<sparse_hist const>>>>
      split_cache_;
};

// Adds the symbols of `in` (width 1 or 2, else errc::domain, as
// rans_static::histogram) to `acc`, a dense histogram sized on first use:
// counted in place, with no per-chunk histogram of 2^16 entries to zero and
// add (for 16-bit leaves, fresh 512 KiB a chunk: with the chunk's copy, a
// fifth of fit_static_tables on blazepose-detector.fp32).
void add_histogram(byte_view in, unsigned width, std::vector<uint64_t>& acc) {
  fail_if(width != 1 && width != 2, errc::domain,
          "rans_static: symbols are 8 or 16 bits");
  if (acc.empty()) acc.assign(size_t{1} << (8 * width), 0);
  size_t const n = in.size() / width;
  uint8_t const* const p = in.data();
  if (width == 2) {
    for (size_t i = 0; i < n; ++i) ++acc[load_le<uint16_t>(p + 2 * i)];
    return;
  }
  // Four sub-histograms hide the store-to-load latency of repeated bytes
  // (u32 counts: a chunk holds far fewer than 2^32 bytes).
  uint32_t sub[4][256] = {};
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    ++sub[0][p[i]], ++sub[1][p[i + 1]], ++sub[2][p[i + 2]], ++sub[3][p[i + 3]];
  }
  for (; i < n; ++i) ++sub[0][p[i]];
  for (size_t s = 0; s < 256; ++s) {
    acc[s] += uint64_t{sub[0][s]} + sub[1][s] + sub[2][s] + sub[3][s];
  }
}

// Adds the histograms of the empty-table rans_static leaves under `n` (in
// pre-order) for one chunk's value `in` of type `type`, read in place as
// the archive's encoder reads it (encode_node_view): concatenating
// operators hand their children slices, others read their input once, and
// the children's buffers go back to the thread's scratch.
void collect(node const& n, byte_view in, value_type type,
             std::vector<std::vector<uint64_t>>& hists, size_t& next) {
  if (is_leaf(n.op)) {
    if (n.op != opcode::rans_static || !n.blob.empty()) return;
    add_histogram(in, type.width, hists[next++]);
    return;
  }
  op_def const& op = op_for(n.op);
  if (op.concatenates()) {
    std::vector<child_slice> const kids =
        concatenated_children(op, n, in, type);
    for (size_t i = 0; i < kids.size(); ++i) {
      collect(n.children[i], kids[i].data, kids[i].type, hists, next);
    }
    return;
  }
  std::vector<stream> kids;
  bytes side;
  op.encode_view(n, in, type, kids, side);
  for (size_t i = 0; i < kids.size(); ++i) {
    try {
      collect(n.children[i], kids[i].data, kids[i].type, hists, next);
    } catch (...) {
      for (size_t j = i; j < kids.size(); ++j) {
        scratch::give(std::move(kids[j].data));
      }
      throw;
    }
    scratch::give(std::move(kids[i].data));
  }
}

size_t count_empty_tables(node const& n) {
  size_t c = n.op == opcode::rans_static && n.blob.empty();
  for (node const& k : n.children) c += count_empty_tables(k);
  return c;
}

void assign_tables(node& n, std::vector<std::vector<uint64_t>>& hists,
                   size_t& next) {
  if (n.op == opcode::rans_static && n.blob.empty()) {
    std::vector<uint64_t>& h = hists[next++];
    uint64_t total = 0;
    for (uint64_t c : h) total += c;
    if (total == 0) {
      n = make_leaf(opcode::rans0);
    } else {
      n.blob = choose_rans_static(h).blob;
    }
    return;
  }
  for (node& k : n.children) assign_tables(k, hists, next);
}

// Fits the empty tables under `elements`, a node on 16-bit elements whose
// histogram (over the whole region) is `h`, where the histograms of the
// values they see follow from h: the elements themselves, their byte
// planes or float fields (meaning `m`, when `m_known`), and sparse's
// nonzero values (h without 0: the union of every chunk's). The chunks'
// histograms add up to these, so the tables are those fit_static_tables
// would build, without its pass over the region (on the .pt files, whose
// pruned weights are coded by sparse, that pass was 12% of compress CPU).
//
// `data` (may be empty) holds the elements, coded in chunks of
// `chunk_elements`: sparse's mask gets its table from their mask bytes,
// counted without the operator's encode (whose values copy was the rest of
// that pass).
void fit_elements(node& elements, sparse_hist const& h, meaning m, bool m_known,
                  byte_view data, size_t chunk_elements,
                  double small_table_margin, double& extra) {
  if (elements.op == opcode::rans_static) {
    // The elements' own table: smaller under the store's margin.
    if (elements.blob.empty() && !h.empty()) {
      double more = 0;
      elements.blob =
          own_table_blob(h, smaller_table_scale(h, small_table_margin, &more));
      extra += more;
    }
    return;
  }
  if (elements.op == opcode::sparse && elements.children.size() == 2) {
    node& mask = elements.children[0];
    if (mask.op == opcode::rans_static && mask.blob.empty() && !data.empty()) {
      std::array<uint64_t, 256> const bytes =
          sparse_mask_histogram16(data, chunk_elements);
      mask.blob = choose_rans_static(bytes).blob;
    }
    if (h.empty() || h.front().first != 0) {
      fit_elements(elements.children[1], h, m, m_known, {}, 0, 0, extra);
      return;
    }
    sparse_hist const nonzero(h.begin() + 1, h.end());
    if (!nonzero.empty()) {
      fit_elements(elements.children[1], nonzero, m, m_known, {}, 0, 0, extra);
    }
    return;
  }
  if (!m_known) return;
  auto const split = split_histogram(h, elements.op, m);
  if (split.size() != elements.children.size()) return;
  for (size_t i = 0; i < split.size(); ++i) {
    node& leaf = elements.children[i];
    if (leaf.op != opcode::rans_static || !leaf.blob.empty()) continue;
    std::vector<uint32_t> symbols;
    std::vector<uint64_t> counts;
    for (uint32_t s = 0; s < split[i].size(); ++s) {
      if (split[i][s]) symbols.push_back(s), counts.push_back(split[i][s]);
    }
    if (symbols.empty()) continue;
    leaf.blob = choose_rans_static(symbols, counts).blob;
  }
}

}  // namespace

double fit_tables_from_histogram(node& program, sparse_hist const& h, meaning m,
                                 byte_view data, uint32_t chunk_size,
                                 double small_table_margin) {
  if (program.op != opcode::view || program.params.size() < 2 ||
      program.params[0] != 2 || program.children.empty()) {
    return 0;
  }
  double extra = 0;
  fit_elements(program.children[0], h, m,
               program.params[1] == static_cast<uint64_t>(m), data,
               std::max<size_t>(1, chunk_size / 2), small_table_margin, extra);
  return extra;
}

search_result find_program(region_input const& in, prior const& p,
                           search_options const& opt, node const* seed,
                           double seed_margin,
                           std::span<decision const> seed_decisions) {
  engine e(in, p, opt);
  search_result r = e.run(seed, seed_margin, seed_decisions);
  // The CPU clock is a system call here (1.4 us): read only where needed.
  bool const tables = count_empty_tables(r.program) > 0;
  double const table_start = tables ? thread_cpu_ms() : 0;
  if (in.root_hist != nullptr && !in.root_hist->empty()) {
    r.estimated_bytes += fit_tables_from_histogram(
        r.program, *in.root_hist, meaning_of(in.info.type), in.data,
        opt.chunk_size, in.small_table_margin);
  }
  fit_static_tables(r.program, in.data, opt.chunk_size);
  if (tables) r.table_ms = thread_cpu_ms() - table_start;
  return r;
}

void fit_static_tables(node& program, byte_view data, uint32_t chunk_size) {
  size_t const n = count_empty_tables(program);
  if (n == 0) return;
  // The archive cuts chunks at whole elements of the root view.
  unsigned w = 1;
  if (program.op == opcode::view && !program.params.empty()) {
    w = static_cast<unsigned>(program.params[0]);
  }
  size_t const step = std::max<size_t>(w, chunk_size / w * w);
  std::vector<std::vector<uint64_t>> hists(n);
  try {
    for (size_t off = 0; off < data.size(); off += step) {
      size_t const len = std::min(step, data.size() - off);
      size_t next = 0;
      collect(program, data.subspan(off, len), bytes_type, hists, next);
    }
  } catch (error const&) {
    // Some chunk is outside an operator's domain: it will fall back; the
    // tables still fit the chunks that encode.
  }
  size_t next = 0;
  assign_tables(program, hists, next);
}

}  // namespace brevis::codec::search
