#include "codec/search/closed_form.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "codec/choose/entropy_terms.h"
#include "codec/choose/work_clock.h"
#include "codec/core/bytes.h"
#include "codec/entropy/htscodecs_rans.h"
#include "codec/leaves/rans_static.h"
#include "codec/search/sparse_mask.h"
#include "codec/search/value_stats.h"

namespace brevis::codec::search {
namespace {

constexpr double infinite = std::numeric_limits<double>::infinity();

// A node's own bytes in the serialized program (opcode and counts), as the
// search charges them (astar.cpp's param_bits).
constexpr double node_bytes = 2;

// The gate's thresholds: those of the productions they stand for
// (production.cpp), measured here on a few windows of the region rather
// than on the search's sample.
constexpr double runs_rate = 0.05;      // runs_fits
constexpr double word_rate = 0.02;      // zstd_fits
constexpr double sparse_rate = 0.1;     // sparse_fits
constexpr double row_rate = 0.05;       // xor_row: rows equal above
constexpr size_t palette_values = 256;  // palette_fits
// How many more equal neighbours (or rows) than chance, on top of
// runs_rate (row_rate), send a region of many zeros to the search (gate).
constexpr double zeros_order_margin = 0.3;
// The share of the best order-0 program's bytes by which sparse must beat
// it (closed_form_decide): search_chooser.cpp's sparse_gain_margin.
constexpr double sparse_win_margin = 0.003;
// Below this many elements a palette's dictionary (two bytes a value)
// costs about what it saves against a static table: not worth a search.
constexpr size_t palette_min_elements = 4096;
// Bytes a static table of its own costs above the entropy, per value, at
// least: its frequency codes and their rounding (0.31 the least measured,
// on bf16 and fp16 corpus weights of 3,000 to 30,000 values).
constexpr double own_table_floor = 0.25;

sparse_hist sparse_of(std::span<uint64_t const> counts) {
  sparse_hist h;
  for (size_t s = 0; s < counts.size(); ++s) {
    if (counts[s])
      h.emplace_back(static_cast<uint32_t>(s), entry_count(counts[s]));
  }
  return h;
}

// rans_static's 32 states in each of `chunks` chunks, where the estimates
// count 8 in one (wide_framing_bytes).
double wide_static_framing_bytes(double chunks) {
  // Each chunk codes its own framing; the estimates count it once.
  return 72 * std::max(1.0, chunks) + 32 * (std::max(1.0, chunks) - 1);
}

// The framing the estimates above leave out: chunks of many symbols code
// with 32 interleaved states (rans0: of at least htscodecs_rans'
// x32_threshold bytes; rans_static: of at least wide_from symbols) where
// the estimates count fewer, once. Measured on bf16 weights: rans0 codes
// 88 bytes more a chunk, rans_static 72 (its 24 more states' 96 bytes,
// less what they hold of the last symbols). Without them, fields' two rans0
// leaves look cheaper than bitfields' one static leaf.
double wide_framing_bytes(opcode leaf, uint64_t symbols, double chunks) {
  double const per_chunk = static_cast<double>(symbols) / std::max(1.0, chunks);
  if (leaf == opcode::rans0 &&
      per_chunk >= static_cast<double>(htscodecs_rans::x32_threshold)) {
    return 88 * std::max(1.0, chunks);
  }
  if (leaf == opcode::rans_static &&
      per_chunk >= static_cast<double>(rans_static::wide_from)) {
    return wide_static_framing_bytes(chunks);
  }
  return 0;
}

// rANS with 32-bit states and 16-bit words codes a symbol in about
// 0.0047 * 4^(scale - 16) bits more than its frequency says: the states'
// precision against the table's (measured on bf16 fields and 16-bit
// elements: 0.0047 bits at 2^16, 0.0012 at 2^15, 0.0002 at 2^14).
double state_loss_bytes(uint64_t symbols, unsigned scale) {
  return 0.0047 / 8 * static_cast<double>(symbols) *
         std::ldexp(1.0, 2 * (static_cast<int>(scale) - 16));
}

// Alphabets up to this many symbols get the precision that codes them
// smallest rather than rans_static_scale_for's (2^16 for large values).
constexpr size_t small_alphabet = 1024;

struct static_cost {
  double bytes = infinite;
  unsigned scale = 0;
};

// A static table of h's own (n symbols) at precision 2^scale: its blob and
// payload, and the states' loss (its framing left out).
double table_bytes(sparse_hist const& h, uint64_t n, unsigned scale) {
  double payload_bits = 0;
  double const blob =
      estimate_rans_static_blob_bytes(h, n, scale, &payload_bits);
  return blob + payload_bits / 8 + state_loss_bytes(n, scale);
}

// A static table of h's own (n symbols of `width` bytes): its bytes, blob
// and framing included, at the precision that codes it smallest among those
// that decode fast (small alphabets), else rans_static_scale_for's. Tables
// of 2^12 slots or fewer stay in L1; above, 8-bit symbols decode faster
// from the compact tables of 2^15 and 2^16 slots, and 16-bit ones slow
// down with every doubling (measured on bf16 and fp16 weights, ns a symbol:
// 8-bit 0.59 at 2^12, 0.80 at 2^14, 0.78 at 2^15; 16-bit 0.58 at 2^12,
// 0.68 at 2^13, 0.81 at 2^14). So 8-bit tables try 2^15 and 2^12 down,
// 16-bit ones 2^13 down, each downward until the cost grows (the states'
// loss falls and the frequencies' rounding grows as the table shrinks).
static_cost static_leaf(sparse_hist const& h, uint64_t n, unsigned width,
                        double chunks) {
  static_cost best;
  if (h.size() < 2) return best;
  auto cost = [&](unsigned scale) { return table_bytes(h, n, scale); };
  unsigned const standard = rans_static_scale_for(h.size(), n);
  if (h.size() > small_alphabet || standard <= 10) {
    best = {cost(standard), standard};
  } else {
    unsigned lo = 10;
    while ((size_t{1} << lo) < 4 * h.size()) ++lo;
    if (width == 1 && standard >= 15) best = {cost(15), 15};
    unsigned const top = std::min(standard, width == 1 ? 12u : 13u);
    static_cost down;
    for (unsigned scale = std::max(lo, top); scale >= lo; --scale) {
      double const bytes = cost(scale);
      if (bytes > down.bytes) break;
      down = {bytes, scale};
    }
    if (down.bytes <= best.bytes) best = down;
  }
  best.bytes += wide_framing_bytes(opcode::rans_static, n, chunks);
  return best;
}

// rANS order 0 on lanes whose bytes' histogram is `bytes`: htscodecs order
// 0, a table per chunk, as the cost model estimates it (cost_model.cpp).
double rans0_bytes(std::array<uint64_t, 256> const& bytes, double chunks) {
  uint64_t total = 0;
  double terms = 0, present = 0;
  for (uint64_t c : bytes) {
    total += c, terms += c_log2_c(c), present += c > 0;
  }
  // Its frequencies' coarse precision costs about 5e-5 bits a byte per
  // distinct byte (measured on bf16 fields: 0.006 bits a byte with 128
  // distinct, 0.0013 with 23).
  return entropy_from_terms(total, terms) / 8 +
         (1.25 * present + 12) * std::max(1.0, chunks) +
         5e-5 / 8 * present * static_cast<double>(total) +
         wide_framing_bytes(opcode::rans0, total, chunks);
}

// leaf_bytes_from_counts on the present values alone.
double leaf_bytes(opcode leaf, sparse_hist const& h, uint64_t n, unsigned width,
                  double chunks) {
  switch (leaf) {
    case opcode::raw:
      return static_cast<double>(n * width);
    case opcode::zero:
      return h.size() == 1 && h.front().first == 0 ? 0 : infinite;
    case opcode::constant:
      return h.size() == 1 ? width * chunks : infinite;
    case opcode::rans0: {
      if (n == 0) return infinite;
      std::array<uint64_t, 256> bytes{};
      for (auto const& [s, c] : h) {
        bytes[s & 255] += c;
        if (width == 2) bytes[s >> 8] += c;
      }
      return rans0_bytes(bytes, chunks);
    }
    case opcode::rans_static:
      return static_leaf(h, n, width, chunks).bytes;
    default:
      return infinite;
  }
}

struct leaf_cost {
  opcode op = opcode::raw;
  double bytes = infinite;
  unsigned scale = 0;  // rans_static's precision
  // The smallest leaf's bytes: `bytes` unless the wide preference took
  // rans_static over rans0 (best_split weighs splits on both).
  double least = infinite;
};

// region_input's leaning to rans_static over rans0 (from 0: none).
struct wide_preference {
  uint64_t from = 0;
  double margin = 0;
};

wide_preference wide_preference_of(region_input const& in) {
  return {in.wide_static_from, in.wide_static_margin};
}

// The best leaf for a value of `width`-byte lanes whose whole histogram is
// `counts` (dense, indexed by value), among those the search would try on
// it. Called for each byte plane and float field of every region, so it
// makes no sparse copy (leaf_bytes' costs, from the same sums in the same
// order); only the static table's estimate reads the present values, from a
// reused buffer.
leaf_cost best_leaf(std::span<uint64_t const> counts, unsigned width,
                    double chunks, bool static_allowed,
                    wide_preference wide = {}) {
  uint64_t n = 0;
  size_t present = 0;
  uint32_t first = 0;
  std::array<uint64_t, 256> bytes{};
  // By blocks of 256 values: a 16-bit value's high byte is the block's,
  // summed in a register (an increment a value of one counter would wait
  // on the previous one).
  for (size_t b = 0; b < counts.size(); b += 256) {
    uint64_t high = 0;
    for (size_t s = b; s < std::min(counts.size(), b + 256); ++s) {
      if (counts[s] == 0) continue;
      uint64_t const c = entry_count(counts[s]);  // as sparse_of holds it
      if (present++ == 0) first = static_cast<uint32_t>(s);
      n += c;
      bytes[s & 255] += c;
      high += c;
    }
    if (width == 2) bytes[b >> 8] += high;
  }
  leaf_cost best;
  auto consider = [&](opcode op, double b) {
    if (b + node_bytes < best.bytes) best = {op, b + node_bytes, 0};
  };
  consider(opcode::raw, static_cast<double>(n * width));
  consider(opcode::zero, present == 1 && first == 0 ? 0 : infinite);
  consider(opcode::constant, present == 1 ? width * chunks : infinite);
  consider(opcode::rans0, n == 0 ? infinite : rans0_bytes(bytes, chunks));
  static_cost st;
  if (static_allowed) {
    if (present >= 2) {
      thread_local sparse_hist h;
      h.clear();
      for (size_t s = 0; s < counts.size(); ++s) {
        if (counts[s])
          h.emplace_back(static_cast<uint32_t>(s), entry_count(counts[s]));
      }
      st = static_leaf(h, n, width, chunks);
    }
    if (st.bytes + node_bytes < best.bytes) {
      best = {opcode::rans_static, st.bytes + node_bytes, st.scale};
    }
  }
  best.least = best.bytes;
  // Where rans0 decodes with its 4 states (below x32_threshold bytes a
  // chunk; above, htscodecs' 32-way code decodes as fast as rans_static).
  double const per_chunk = static_cast<double>(n) / std::max(1.0, chunks);
  if (best.op == opcode::rans0 && wide.from != 0 &&
      per_chunk >= static_cast<double>(wide.from) &&
      per_chunk * width < static_cast<double>(htscodecs_rans::x32_threshold)) {
    // Its 32 states, where the estimate counted 8 (below
    // rans_static::wide_from symbols a chunk, so always here).
    double const bytes =
        st.bytes + node_bytes + wide_static_framing_bytes(chunks);
    if (bytes <= best.least * (1 + wide.margin)) {
      best = {opcode::rans_static, bytes, st.scale, best.least};
    }
  }
  return best;
}

// The fp16 mantissa (10 bits in 16-bit lanes) as byte planes: their
// histograms.
std::array<std::vector<uint64_t>, 2> mantissa_planes(
    std::span<uint64_t const> m) {
  std::array<std::vector<uint64_t>, 2> out{std::vector<uint64_t>(256, 0),
                                           std::vector<uint64_t>(256, 0)};
  // The high byte's counts summed in a register: an increment a value of
  // the same counter would wait on the previous one.
  for (size_t b = 0; b < m.size(); b += 256) {
    uint64_t high = 0;
    for (size_t s = b; s < std::min(m.size(), b + 256); ++s) {
      out[0][s & 255] += m[s];
      high += m[s];
    }
    out[1][b >> 8] += high;
  }
  return out;
}

// A static table for the dense histogram `counts` at precision 2^scale
// (0: rans_static_scale_for's), into `leaf` (a rans_static leaf whose table
// is still empty).
void fill_table(node& leaf, std::span<uint64_t const> counts, unsigned scale) {
  if (leaf.op != opcode::rans_static || !leaf.blob.empty()) return;
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> present;
  for (size_t s = 0; s < counts.size(); ++s) {
    if (counts[s])
      symbols.push_back(static_cast<uint32_t>(s)), present.push_back(counts[s]);
  }
  leaf.blob = scale == 0
                  ? choose_rans_static(symbols, present).blob
                  : serialize_rans_static_table(
                        quantized_rans_static_table(symbols, present, scale));
}

struct window_stats {
  double runs = 0;   // neighbours equal
  double rows = 0;   // equal to the element a row above
  double words = 0;  // repeated 8-byte words
};

// Order statistics on up to four windows of 512 elements, evenly spread
// (the whole region when it is smaller): the rates of the worst window.
// (The thresholds are 2-5%: tens of hits a window where they hold.)
window_stats order_stats(byte_view data, uint64_t cols, bool zero_runs) {
  size_t const n = data.size() / 2;
  constexpr size_t window = 512;
  size_t const windows = n <= 4 * window ? 1 : 4;
  size_t const len = windows == 1 ? n : window;
  window_stats s;
  for (size_t k = 0; k < windows; ++k) {
    size_t const start = windows == 1 ? 0 : k * (n - len) / (windows - 1);
    uint8_t const* d = data.data() + 2 * start;
    size_t equal = 0, above = 0, above_n = 0;
    for (size_t i = 1; i < len; ++i) {
      uint16_t const x = load_le<uint16_t>(d + 2 * i);
      equal += x == load_le<uint16_t>(d + 2 * i - 2) && (zero_runs || x != 0);
    }
    if (cols > 0 && cols < n) {
      for (size_t i = 0; i < len; ++i) {
        size_t const at = start + i;
        if (at < cols) continue;
        ++above_n;
        uint16_t const x = load_le<uint16_t>(data.data() + 2 * at);
        above += x == load_le<uint16_t>(data.data() + 2 * (at - cols)) &&
                 (zero_runs || x != 0);
      }
    }
    double const pairs = static_cast<double>(std::max<size_t>(1, len - 1));
    s.runs = std::max(s.runs, static_cast<double>(equal) / pairs);
    if (above_n > 0) {
      s.rows = std::max(
          s.rows, static_cast<double>(above) / static_cast<double>(above_n));
    }
    s.words = std::max(s.words, repeated_words(byte_view(d, 2 * len)));
  }
  return s;
}

// The histograms of the children of `op` (planes, fields or bitfields as
// the closed form writes it) over 16-bit floats of marginals `mg`; none for
// other operators.
std::vector<std::vector<uint64_t> const*> split_counts(
    float16_marginals const& mg, opcode op) {
  switch (op) {
    case opcode::planes:
      return {&mg.planes[0], &mg.planes[1]};
    case opcode::fields:
      return {&mg.fields[0], &mg.fields[1], &mg.fields[2]};
    case opcode::bitfields:
      return {&mg.fields[2], &mg.sign_exponent};
    default:
      return {};
  }
}

// The region's marginals: the file's, or computed into `own`.
float16_marginals const& marginals(region_input const& in,
                                   float16_marginals& own) {
  if (in.marginals != nullptr) return *in.marginals;
  own = float16_marginals_of(*in.root_hist, meaning_of(in.info.type));
  return own;
}

bool float16_region(region_input const& in) {
  return in.info.kind == region_kind::tensor &&
         (in.info.type == dtype::bf16 || in.info.type == dtype::f16) &&
         in.root_hist != nullptr && !in.root_hist->empty() &&
         in.data.size() == in.info.length && in.data.size() % 2 == 0;
}

}  // namespace

double leaf_bytes_from_counts(opcode leaf, std::span<uint64_t const> counts,
                              unsigned width, double chunks) {
  uint64_t n = 0;
  for (uint64_t c : counts) n += c;
  return leaf_bytes(leaf, sparse_of(counts), n, width, chunks);
}

std::string_view gate_reason_name(gate_reason g) {
  switch (g) {
    case gate_reason::none:
      return "none";
    case gate_reason::not_float16:
      return "not_float16";
    case gate_reason::few_values:
      return "few_values";
    case gate_reason::zeros:
      return "zeros";
    case gate_reason::low_zero:
      return "low_zero";
    case gate_reason::no_singleton:
      return "no_singleton";
    case gate_reason::runs:
      return "runs";
    case gate_reason::rows:
      return "rows";
    case gate_reason::words:
      return "words";
  }
  return "?";
}

namespace {

// closed_form_gate; without `alphabet`, leaving out the checks of the
// elements' alphabet (few_values, zeros) and, where the values are few,
// no_singleton (every value then repeats, periodic or not).
gate_reason gate(region_input const& in, bool alphabet) {
  if (!float16_region(in)) return gate_reason::not_float16;
  sparse_hist const& h = *in.root_hist;
  float16_marginals own;
  float16_marginals const& mg = marginals(in, own);
  uint64_t const n = mg.count, zeros = mg.zeros;
  uint32_t const ored = mg.ored;
  bool const singleton = mg.singleton;
  bool const few = h.size() <= palette_values && n >= palette_min_elements;
  if (alphabet && few) return gate_reason::few_values;
  if (alphabet &&
      static_cast<double>(zeros) >= sparse_rate * static_cast<double>(n)) {
    return gate_reason::zeros;
  }
  if ((ored & 1) == 0) return gate_reason::low_zero;
  // A period of at most half the elements repeats every value.
  if (!singleton && (alphabet || !few)) return gate_reason::no_singleton;
  auto const& shape = in.info.shape;
  uint64_t const cols =
      shape.size() >= 2 && shape.back() > 1 ? shape.back() : 0;
  // Without the alphabet's checks, runs of zeros (and zeros below zeros)
  // are sparse's mask's (its bytes' entropy, order0_floor_bytes), not the
  // runs' or rows' gates'; so are words of zeros (rvm.bf16's pruned weights
  // repeat 8-byte words 11% to 59% of the time, none of them with a
  // nonzero), and the words' gate is left out (below).
  bool const many_zeros =
      static_cast<double>(zeros) >= sparse_rate * static_cast<double>(n);
  bool const zero_runs = alphabet || !many_zeros;
  window_stats const w = order_stats(in.data, cols, zero_runs);
  // Values are often equal to their neighbours by chance, as often as two
  // elements drawn at random (the sum of their squared frequencies): an
  // order-0 coder already has that. Only more is order to exploit. (Few
  // values, or weights of a peaked histogram: handlandmark-full.bf16's
  // pruned filters have nonzero neighbours equal 7% to 13% of the time,
  // 6% to 10% by chance.)
  double chance = 0;
  if (!alphabet) {
    double const total = static_cast<double>(n);
    for (auto const& [sym, c] : h) {
      if (sym == 0 && !zero_runs) continue;
      double const p = static_cast<double>(c) / total;
      chance += p * p;
    }
  }
  // Many zeros: the order left for the search must beat sparse's mask and
  // the nonzero values' tables (the closed form's sparse candidate), not
  // the elements' alone; repeated words are mostly of zeros and of the
  // equal neighbours counted here. The search chose order-0 programs for
  // 18 of the 20 pruned tensors of centernet and handlandmark-full (bf16)
  // it saw, with up to 0.24 more equal neighbours and 0.32 more equal rows
  // than chance and words repeating up to 85% of the time (the other two:
  // rans1, which the classes' program then replaced, and zstd on 4.6 KB).
  double const margin = zero_runs ? 0 : zeros_order_margin;
  if (w.runs > runs_rate + chance + margin) return gate_reason::runs;
  if (w.rows > row_rate + chance + margin) return gate_reason::rows;
  if (zero_runs && w.words > word_rate) return gate_reason::words;
  return gate_reason::none;
}

}  // namespace

gate_reason closed_form_gate(region_input const& in) { return gate(in, true); }

gate_reason closed_form_order_gate(region_input const& in) {
  return gate(in, false);
}

order0_floor order0_floor_bytes(region_input const& in,
                                float16_marginals const& mg) {
  uint64_t const n = mg.count;
  order0_floor f;
  f.elements = f.sparse = entropy_from_terms(n, mg.terms) / 8;
  if (mg.zeros == 0 || mg.zeros == n) return f;
  uint64_t const nonzero = n - mg.zeros;
  double const values =
      entropy_from_terms(nonzero, mg.terms - c_log2_c(mg.zeros)) / 8;
  auto const mask =
      sparse_mask_histogram16(in.data, std::max<size_t>(1, in.chunk_size / 2));
  uint64_t mask_n = 0;
  double mask_terms = 0;
  for (uint64_t c : mask) mask_n += c, mask_terms += c_log2_c(c);
  f.sparse = values + entropy_from_terms(mask_n, mask_terms) / 8;
  return f;
}

namespace {

// The view and its (empty) tail, above the elements' program.
constexpr double view_bytes = 2 * node_bytes + 2;

struct split_choice {
  node split;  // planes, fields or bitfields, closed by their leaves
  double bytes = infinite;       // as weighed without the wide preference
  double extra = 0;              // what the chosen split costs beyond `bytes`
  std::vector<unsigned> scales;  // of its rans_static children
  unsigned streams = 0;          // entropy-coded leaves (rANS, zstd)
};

// rans0 leaves under `n`.
unsigned count_rans0(node const& n) {
  unsigned k = n.op == opcode::rans0;
  for (node const& c : n.children) k += count_rans0(c);
  return k;
}

// Entropy-coded leaves under `n`.
unsigned entropy_streams(node const& n) {
  if (n.op == opcode::rans0 || n.op == opcode::rans1 ||
      n.op == opcode::rans_static || n.op == opcode::zstd) {
    return 1;
  }
  unsigned k = 0;
  for (node const& c : n.children) k += entropy_streams(c);
  return k;
}

// The best split of 16-bit floats of marginals `mg` (meaning `m`) into byte
// planes, float fields or bit fields, each child closed by its best leaf;
// its bytes counted from `base` (what the program spends above it).
split_choice best_split(float16_marginals const& mg, meaning m, double chunks,
                        bool statics, double base, wide_preference wide) {
  // Byte planes (low, high), float fields (sign, exponent, mantissa) and
  // bit fields (mantissa, sign and exponent together: a symbol fewer per
  // element than fields, and never more entropy).
  unsigned const mbits = m == meaning::bf16 ? 7 : 10;
  // The mantissa is a child of both fields and bitfields: its leaf once.
  std::array<std::pair<std::vector<uint64_t> const*, leaf_cost>, 7> costed{};
  size_t costed_n = 0;
  auto leaf_of = [&](std::vector<uint64_t> const* counts, unsigned width) {
    for (size_t i = 0; i < costed_n; ++i) {
      if (costed[i].first == counts) return costed[i].second;
    }
    leaf_cost const l = best_leaf(*counts, width, chunks, statics, wide);
    costed[costed_n++] = {counts, l};
    return l;
  };
  // Every leaf codes a child in its entropy at least (a static table's
  // payload is a cross-entropy), so an operator whose children's entropies
  // (and node bytes) already cost more than the best so far cannot win: its
  // static tables' estimates (a few precisions a child) are skipped.
  // Bitfields' children have the least entropy (a joint symbol for the sign
  // and exponent), so they go first. On blazepose-heavy.bf16 this took the
  // closed form's costs from 52.9 to 49.0 M instructions (callgrind), with
  // the same programs on all 164 corpus files.
  auto entropy_bytes = [](std::vector<uint64_t> const& counts) {
    uint64_t n = 0;
    double terms = 0;
    for (uint64_t c : counts) n += c, terms += c_log2_c(c);
    return entropy_from_terms(n, terms) / 8;
  };
  // (Small regions, with no static table, have little to prune: in order.
  // Restricting those under 4 KiB to the byte planes cost 9 KB on the
  // corpus, mostly fp16 files, where fields win them.)
  std::array<opcode, 3> const order =
      statics ? std::array{opcode::bitfields, opcode::fields, opcode::planes}
              : std::array{opcode::planes, opcode::fields, opcode::bitfields};
  // The search's order (planes, fields, bitfields) breaks exact ties.
  auto rank = [](opcode op) {
    return op == opcode::planes ? 0u : op == opcode::fields ? 1u : 2u;
  };
  // Every candidate not pruned, and the least bytes among them.
  std::vector<std::pair<split_choice, opcode>> candidates;
  // (Of the preferred costs (below), which are never less: a candidate
  // pruned against them could win neither pick.)
  double smallest = infinite;
  for (opcode op : order) {
    double bytes = base + node_bytes;
    if (op == opcode::bitfields) bytes += 2;  // its two width parameters
    auto const kids = split_counts(mg, op);
    if (statics && smallest < infinite) {
      double bound = bytes;
      for (std::vector<uint64_t> const* counts : kids) {
        bound += node_bytes + entropy_bytes(*counts);
      }
      // (A byte of margin against the sums' rounding.)
      if (bound - 1 > smallest * (1 + split_stream_margin)) continue;
    }
    std::vector<node> leaves;
    std::vector<unsigned> scales;
    double extra = 0;
    for (std::vector<uint64_t> const* counts : kids) {
      unsigned const width = counts->size() > 256 ? 2 : 1;
      leaf_cost const l = leaf_of(counts, width);
      node kid = make_leaf(l.op);
      double kid_bytes = l.least;
      double kid_extra = l.bytes - l.least;
      if (width == 2 && op != opcode::bitfields) {
        // fp16's mantissa: also its byte planes, order 0 each (not under
        // bitfields, whose point is a symbol fewer per element).
        auto const planes = mantissa_planes(*counts);
        leaf_cost const lo = best_leaf(planes[0], 1, chunks, false);
        leaf_cost const hi = best_leaf(planes[1], 1, chunks, false);
        if (node_bytes + lo.bytes + hi.bytes < kid_bytes) {
          kid_bytes = node_bytes + lo.bytes + hi.bytes;
          kid_extra = 0;
          kid =
              make_op(opcode::planes, {}, {make_leaf(lo.op), make_leaf(hi.op)});
        }
      }
      bytes += kid_bytes;
      extra += kid_extra;
      scales.push_back(kid.op == opcode::rans_static ? l.scale : 0);
      leaves.push_back(std::move(kid));
    }
    std::vector<uint64_t> params;
    if (op == opcode::bitfields) params = {mbits, 16 - mbits};
    split_choice c;
    c.split = make_op(op, std::move(params), std::move(leaves));
    c.bytes = bytes;
    c.extra = extra;
    c.scales = std::move(scales);
    c.streams = entropy_streams(c.split);
    smallest = std::min(smallest, bytes + extra);
    candidates.emplace_back(std::move(c), op);
  }
  // Picked on the leaves' least bytes, and with what the wide preference
  // adds: that one unless it has more rans0 leaves (the preference's
  // point is fewer). Weighed with it, a split may change (ckpt-300m's
  // decode: 1.6-4% less CPU than none, where only swapping leaves took 3%
  // more); weighed with it alone, some small fp16 tensors took a split of
  // three rans0 leaves for one of one. The split's `bytes` stay the least
  // pick's, so that the operators above weigh it as without the
  // preference; `extra` takes the rest of the chosen one's cost.
  std::vector<split_candidate> least;
  std::vector<split_candidate> preferred;
  least.reserve(candidates.size());
  preferred.reserve(candidates.size());
  for (auto const& [c, op] : candidates) {
    least.push_back({c.bytes, c.streams, rank(op)});
    preferred.push_back({c.bytes + c.extra, c.streams, rank(op)});
  }
  size_t const plain = pick_split(least);
  if (plain == candidates.size()) return split_choice{};
  size_t pick = plain;
  size_t const with = pick_split(preferred);
  if (with < candidates.size() &&
      count_rans0(candidates[with].first.split) <=
          count_rans0(candidates[plain].first.split)) {
    pick = with;
  }
  double const weighed = candidates[plain].first.bytes;
  split_choice out = std::move(candidates[pick].first);
  out.extra += out.bytes - weighed;  // may be negative
  out.bytes = weighed;
  return out;
}

// The bytes of a varint holding `v`.
double varint_bytes(uint64_t v) {
  double b = 1;
  while (v >= 128) v >>= 7, ++b;
  return b;
}

// sparse's candidate (closed_form_parts::sparse): its mask's bytes by
// their histogram (counted, as the search counts them), its nonzero values
// by the elements' histogram without 0 and its marginals. The values get
// the candidates the elements get, the file's shared table aside (fit to
// the elements, zeros included).
void add_sparse(region_input const& in, double chunks, bool statics,
                closed_form_parts& parts) {
  sparse_hist const& h = *in.root_hist;
  if (h.size() < 2 || h.front().first != 0) return;
  meaning const m = meaning_of(in.info.type);
  sparse_hist const values(h.begin() + 1, h.end());
  uint64_t nonzero = 0;
  for (auto const& [s, c] : values) nonzero += c;
  float16_marginals const vm = float16_marginals_of(values, m);
  // The mask's bytes as the coder sees them: each chunk's mask starts on a
  // byte of its own.
  auto const mask =
      sparse_mask_histogram16(in.data, std::max<size_t>(1, in.chunk_size / 2));
  leaf_cost const mask_leaf =
      best_leaf(mask, 1, chunks, statics, wide_preference_of(in));
  // The operator's node and, per chunk, its count of nonzero values.
  double const above = view_bytes + node_bytes +
                       chunks * varint_bytes(static_cast<uint64_t>(
                                    static_cast<double>(nonzero) / chunks)) +
                       mask_leaf.least;
  double kid_extra = 0;
  uint64_t const value_bytes = 2 * nonzero;
  node kid = make_leaf(opcode::raw);
  double kid_bytes = node_bytes + static_cast<double>(value_bytes);
  std::vector<unsigned> scales;
  if (values.size() == 1 && node_bytes + 2 * chunks < kid_bytes) {
    kid = make_leaf(opcode::constant);
    kid_bytes = node_bytes + 2 * chunks;
  }
  {
    sparse_hist bytes;  // rANS order 0 sees the values' bytes
    for (uint32_t b = 0; b < 256; ++b) {
      uint64_t const c = vm.planes[0][b] + vm.planes[1][b];
      if (c) bytes.emplace_back(b, entry_count(c));
    }
    double const b =
        node_bytes + leaf_bytes(opcode::rans0, bytes, value_bytes, 1, chunks);
    if (b < kid_bytes) kid = make_leaf(opcode::rans0), kid_bytes = b;
  }
  split_choice sp =
      best_split(vm, m, chunks, statics, 0, wide_preference_of(in));
  if (sp.bytes < kid_bytes) {
    kid = std::move(sp.split);
    kid_bytes = sp.bytes;
    kid_extra = sp.extra;
    scales = std::move(sp.scales);
  }
  // The values' own table, where it may win (as closed_form_decide's).
  if (statics && values.size() >= 2 &&
      node_bytes + entropy_from_terms(nonzero, vm.terms) / 8 +
              own_table_floor * static_cast<double>(values.size()) <
          kid_bytes) {
    double const b = node_bytes + estimate_table_bytes(values) +
                     state_loss_bytes(nonzero, rans_static_scale_for(
                                                   values.size(), nonzero)) +
                     wide_framing_bytes(opcode::rans_static, nonzero, chunks);
    if (b < kid_bytes) {
      kid = make_leaf(opcode::rans_static);
      kid_bytes = b;
      kid_extra = 0;
      scales.clear();
    }
  }
  parts.sparse = make_op(
      opcode::view, {2, static_cast<uint64_t>(m)},
      {make_op(opcode::sparse, {}, {make_leaf(mask_leaf.op), std::move(kid)}),
       make_leaf(opcode::raw)});
  parts.sparse_bytes = above + kid_bytes;
  parts.sparse_extra = mask_leaf.bytes - mask_leaf.least + kid_extra;
  parts.sparse_scales = std::move(scales);
  parts.mask_counts.assign(mask.begin(), mask.end());
  parts.mask_scale = mask_leaf.op == opcode::rans_static ? mask_leaf.scale : 0;
}

}  // namespace

size_t pick_split(std::span<split_candidate const> c) {
  double smallest = std::numeric_limits<double>::infinity();
  for (split_candidate const& x : c) smallest = std::min(smallest, x.bytes);
  size_t pick = c.size();
  for (size_t i = 0; i < c.size(); ++i) {
    split_candidate const& x = c[i];
    if (x.bytes > smallest * (1 + split_stream_margin)) continue;
    if (pick == c.size()) {
      pick = i;
      continue;
    }
    split_candidate const& p = c[pick];
    if (x.streams != p.streams ? x.streams < p.streams
        : x.bytes != p.bytes   ? x.bytes < p.bytes
                               : x.rank < p.rank) {
      pick = i;
    }
  }
  return pick;
}

closed_form_parts closed_form_costs(region_input const& in,
                                    float16_marginals const& mg) {
  sparse_hist const& h = *in.root_hist;
  meaning const m = meaning_of(in.info.type);
  double const chunks = in.chunks();
  bool const statics = in.data.size() >= min_static_table_region;
  auto const m_param = static_cast<uint64_t>(m);
  auto view_of = [&](node elements) {
    return make_op(opcode::view, {2, m_param},
                   {std::move(elements), make_leaf(opcode::raw)});
  };

  closed_form_parts parts;
  parts.terms = mg.terms;
  // The elements closed by a leaf (their own static table last, in
  // closed_form_decide). rANS order 0 sees their bytes: the byte planes'
  // histograms added (not a pass over the elements' histogram, whose high
  // bytes repeat and would serialize the counting).
  parts.elements = make_leaf(opcode::raw);
  parts.elements_bytes = static_cast<double>(in.data.size()) + node_bytes;
  {
    auto const& planes = mg.planes;
    sparse_hist bytes;
    for (uint32_t b = 0; b < 256; ++b) {
      uint64_t const c = planes[0][b] + planes[1][b];
      if (c) bytes.emplace_back(b, entry_count(c));
    }
    uint64_t const n = h.size() == 1 ? h.front().second : 0;
    for (opcode op :
         {opcode::raw, opcode::zero, opcode::constant, opcode::rans0}) {
      double const b = op == opcode::rans0
                           ? leaf_bytes(op, bytes, in.data.size(), 1, chunks)
                       : op == opcode::raw ? static_cast<double>(in.data.size())
                                           : leaf_bytes(op, h, n, 2, chunks);
      double const total = view_bytes + node_bytes + b;
      if (total < parts.elements_bytes) {
        parts.elements = view_of(make_leaf(op));
        parts.elements_bytes = total;
      }
    }
  }
  split_choice sp =
      best_split(mg, m, chunks, statics, view_bytes, wide_preference_of(in));
  parts.split = view_of(std::move(sp.split));
  parts.split_bytes = sp.bytes;
  parts.split_extra = sp.extra;
  parts.split_scales = std::move(sp.scales);
  if (static_cast<double>(mg.zeros) >=
          sparse_rate * static_cast<double>(mg.count) &&
      mg.zeros < mg.count) {
    add_sparse(in, chunks, statics, parts);
  }
  return parts;
}

namespace {

// The symbols of a histogram and their counts, as the tables take them.
struct present_values {
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
};

present_values present_of(sparse_hist const& h) {
  present_values v;
  v.symbols.reserve(h.size()), v.counts.reserve(h.size());
  for (auto const& [s, c] : h) v.symbols.push_back(s), v.counts.push_back(c);
  return v;
}

}  // namespace

unsigned smaller_table_scale(sparse_hist const& h, double margin,
                             double* extra) {
  if (extra != nullptr) *extra = 0;
  if (h.size() < 2 || margin <= 0) return 0;
  uint64_t n = 0;
  for (auto const& [s, c] : h) n += c;
  unsigned const standard = rans_static_scale_for(h.size(), n);
  auto const fits = [&](unsigned scale) {
    return scale >= smallest_table_scale &&
           (size_t{1} << scale) >= 2 * h.size();
  };
  if (!fits(standard - 1)) return 0;
  // Alphabets of up to fast_table_symbols that choose_rans_static gives a
  // table of 2^12 slots (in L1: faster still) keep it.
  if (h.size() <= fast_table_symbols) {
    present_values const v = present_of(h);
    if (choose_rans_static(v.symbols, v.counts).table.scale < standard) {
      return 0;
    }
  }
  double const at_standard = table_bytes(h, n, standard);
  unsigned best = 0;
  for (unsigned scale = standard - 1; fits(scale); --scale) {
    double const bytes = table_bytes(h, n, scale);
    if (bytes > at_standard * (1 + margin)) break;
    best = scale;
    if (extra != nullptr) *extra = bytes - at_standard;
  }
  return best;
}

bytes own_table_blob(sparse_hist const& h, unsigned scale) {
  present_values const v = present_of(h);
  return scale == 0 ? choose_rans_static(v.symbols, v.counts).blob
                    : serialize_rans_static_table(quantized_rans_static_table(
                          v.symbols, v.counts, scale));
}

closed_form_choice closed_form_decide(region_input const& in,
                                      closed_form_parts parts) {
  sparse_hist const& h = *in.root_hist;
  double const chunks = in.chunks();
  bool const statics = in.data.size() >= min_static_table_region;
  // The candidates in the order the search would offer them, the first of
  // the least cost winning: the elements' leaves, the file's shared table,
  // the planes and fields, the elements' own table; then sparse.
  // Weighed on the least bytes (leaf_cost); the winner's estimate then
  // gets what the wide preference adds to it.
  closed_form_choice best;
  best.program = std::move(parts.elements);
  best.estimated_bytes = parts.elements_bytes;
  double extra = 0;
  if (in.tables != nullptr) {
    if (auto const use = in.tables->table_for(in.info.offset)) {
      // Its estimate leaves out the wide framing and the states' loss.
      uint64_t const n = in.data.size() / 2;
      unsigned const scale =
          use->leaf->blob.empty() ? rans_static::max_scale : use->leaf->blob[0];
      double const bytes = view_bytes + node_bytes + use->payload_bytes +
                           use->blob_share + state_loss_bytes(n, scale) +
                           wide_framing_bytes(opcode::rans_static, n, chunks);
      if (bytes < best.estimated_bytes) {
        best.program = make_op(
            opcode::view, {2, static_cast<uint64_t>(meaning_of(in.info.type))},
            {*use->leaf, make_leaf(opcode::raw)});
        best.estimated_bytes = bytes;
        extra = 0;
      }
    }
  }
  if (parts.split_bytes < best.estimated_bytes) {
    best.program = std::move(parts.split);
    best.estimated_bytes = parts.split_bytes;
    extra = parts.split_extra;
    best.scales = std::move(parts.split_scales);
  }
  // The elements' own table: its estimate costs O(distinct values) with a
  // large constant (fp16 weights have tens of thousands), so only where it
  // may win: its payload is at least the entropy, and its blob holds a
  // frequency code per value (own_table_floor).
  if (statics && h.size() >= 2) {
    double const floor =
        entropy_from_terms(in.data.size() / 2, parts.terms) / 8 +
        own_table_floor * static_cast<double>(h.size());
    if (view_bytes + node_bytes + floor < best.estimated_bytes) {
      uint64_t const n = in.data.size() / 2;
      double const tb =
          estimate_table_bytes(h) +
          state_loss_bytes(n, rans_static_scale_for(h.size(), n)) +
          wide_framing_bytes(opcode::rans_static, n, chunks);
      double const bytes = view_bytes + node_bytes + tb;
      if (bytes < best.estimated_bytes) {
        best.program = make_op(
            opcode::view, {2, static_cast<uint64_t>(meaning_of(in.info.type))},
            {make_leaf(opcode::rans_static), make_leaf(opcode::raw)});
        best.estimated_bytes = bytes;
        extra = 0;
        best.scales.clear();
        // Weighed on the standard's bytes, as the wide preference's extra.
        best.element_scale =
            smaller_table_scale(h, in.small_table_margin, &extra);
      }
    }
  }
  // Sparse by a margin: a program of the elements' tables is what the
  // classes extend (classes_candidate.h), and they gain more over it than
  // a fraction of a percent (faceres.bf16's feats/kernel, 12% zeros: sparse
  // 43 B smaller alone, its classes 1.8 KB larger).
  if (parts.sparse_bytes < (1 - sparse_win_margin) * best.estimated_bytes) {
    best.program = std::move(parts.sparse);
    best.estimated_bytes = parts.sparse_bytes;
    extra = parts.sparse_extra;
    best.scales = std::move(parts.sparse_scales);
    best.element_scale = 0;
    best.mask_counts = std::move(parts.mask_counts);
    best.mask_scale = parts.mask_scale;
  }
  best.estimated_bytes += extra;
  return best;
}

namespace {

// The empty tables of `e`, a program of 16-bit elements of histogram `h`
// (meaning `m`): their own table (at precision `own_scale`, 0: the
// standard), or their split's children's at precisions `scales`.
void build_element_tables(node& e, sparse_hist const& h, meaning m,
                          std::span<unsigned const> scales,
                          unsigned own_scale = 0) {
  if (e.op == opcode::rans_static && e.blob.empty()) {
    e.blob = own_table_blob(h, own_scale);
    return;
  }
  auto uses_table = [](node const& n) {
    return n.op == opcode::rans_static && n.blob.empty();
  };
  if (std::none_of(e.children.begin(), e.children.end(), uses_table)) return;
  // The children's histograms, as the marginals held them.
  std::vector<std::vector<uint64_t>> kids;
  if (e.op == opcode::bitfields) {
    unsigned const mbits = m == meaning::bf16 ? 7 : 10;
    kids.emplace_back(size_t{1} << mbits, 0);
    kids.emplace_back(size_t{1} << (16 - mbits), 0);
    for (auto const& [sym, c] : h) {
      kids[0][sym & ((1u << mbits) - 1)] += c;
      kids[1][sym >> mbits] += c;
    }
  } else {
    kids = split_histogram(h, e.op, m);
  }
  for (size_t i = 0; i < kids.size() && i < e.children.size(); ++i) {
    fill_table(e.children[i], kids[i], i < scales.size() ? scales[i] : 0);
  }
}

}  // namespace

void build_closed_form_tables(closed_form_choice& choice, sparse_hist const& h,
                              meaning m) {
  node& p = choice.program;
  if (p.op != opcode::view || p.children.empty()) return;
  node& e = p.children[0];
  if (e.op == opcode::sparse && e.children.size() == 2) {
    fill_table(e.children[0], choice.mask_counts, choice.mask_scale);
    if (h.size() < 2 || h.front().first != 0) return;
    sparse_hist const values(h.begin() + 1, h.end());
    build_element_tables(e.children[1], values, m, choice.scales);
    return;
  }
  build_element_tables(e, h, m, choice.scales, choice.element_scale);
}

std::optional<closed_form_choice> closed_form_program(region_input const& in,
                                                      bool gated) {
  if (!gated && closed_form_gate(in) != gate_reason::none) return std::nullopt;
  float16_marginals own;
  closed_form_choice best =
      closed_form_decide(in, closed_form_costs(in, marginals(in, own)));
  // The winner's tables, from the same histogram.
  double const build_start = work_clock_ms();
  build_closed_form_tables(best, *in.root_hist, meaning_of(in.info.type));
  best.table_ms = work_clock_ms() - build_start;
  return best;
}

}  // namespace brevis::codec::search
