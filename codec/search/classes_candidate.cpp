#include "codec/search/classes_candidate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <span>
#include <vector>

#include "codec/choose/chooser_decorator.h"
#include "codec/choose/histogram.h"
#include "codec/choose/work_clock.h"
#include "codec/core/bytes.h"
#include "codec/leaves/rans_static.h"
#include "codec/ops/classes.h"
#include "codec/search/astar.h"
#include "codec/search/class_field_counts.h"
#include "codec/search/closed_form.h"
#include "codec/search/production.h"

namespace brevis::codec::search {
namespace {
// Below this many elements a class's tables and rANS states cost more than
// its narrower exponents save (the estimate found no gain under 4096).
constexpr size_t min_elements = 4096;
// Rows are classed by their index in the chunk: only where the tensor is
// one chunk of the default size.
constexpr uint64_t max_rows_region = uint64_t{1} << 20;
constexpr size_t max_rows = 65536;
// 4 classes: 8 (or the better of 4 and 8) coded blazepose-heavy.bf16 17
// KB (0.1%) smaller but cost 40% more CPU choosing.
constexpr unsigned classes = 4;
// The gain, of the tensor's bytes, below which classes are not worth their
// time: 0.02 coded the 82 bf16/fp16 safetensors of the corpus in
// 203,507,498 B, 0.03 in 204,007,143, 0 in 203,046,770 (the bound:
// 202,674,221), measured with a closed-form program a class; kept for the
// classes of the exponent field.
constexpr double min_gain = 0.02;
// Groups are told apart by their exponents alone (the sign is as random in
// every channel), the top `buckets` - 1 present ones each a bucket and the
// rest, far below, one: weights sit within a few binades of their channel's
// scale, so the counts are a few dense cells a group.
constexpr unsigned buckets = 16;
// Elements sampled per grouping, and at least per group: 2^14 instead of
// every element coded blazepose-heavy.bf16 2 KB (0.01%) larger.
constexpr size_t sample_elements = size_t{1} << 14;
constexpr size_t min_group_sample = 64;
constexpr int lloyd_rounds = 3;
// Elements whose values the classes' own tables are first costed on
// (element_tables_of), and the margin of the sample's gain, of the
// tensor's bytes, below the gain to beat where every row is counted: with
// no margin rvm.bf16 lost 1.5 KB (0.06%); with 0.01 the 164 files are
// within a few bytes a file of counting every row.
constexpr size_t table_sample_elements = size_t{1} << 15;
constexpr double table_sample_margin = 0.01;
// Row steps below this count every row instead of a sample.
constexpr size_t min_table_sample_step = 4;
// The margin, of the sparse program's bytes, by which the classes'
// entropy on the sample must miss the gain asked for to skip counting the
// whole tensor (sparse programs: the 0.03 of classes_program's check).
constexpr double sparse_sample_margin = 0.03;

double c_log2_c(double c) { return c > 0 ? c * std::log2(c) : 0; }

// c log2 c of small counts, looked up: the groups' cells are sample counts.
using c_log2_c_table = std::array<float, 4096>;
c_log2_c_table const& small_c_log2_c_table() {
  static c_log2_c_table const table = [] {
    c_log2_c_table t{};
    for (uint32_t i = 1; i < t.size(); ++i) {
      t[i] = static_cast<float>(c_log2_c(i));
    }
    return t;
  }();
  return table;
}

// (The table passed in: a function-local static's guard, checked every
// call, kept the loop from inlining it.)
inline float small_c_log2_c(c_log2_c_table const& table, uint32_t c) {
  return c < table.size() ? table[c] : static_cast<float>(c_log2_c(c));
}

// Per group (a column or a row), counts of its sampled elements' exponent
// buckets.
struct groups {
  size_t count = 0;              // groups
  std::vector<uint32_t> counts;  // count x buckets
  double scale = 1;              // elements per sampled element
};

// Estimated coded bytes of one class's exponents: entropy, a table byte per
// present value and its rANS states.
double class_cost(std::span<double const> h) {
  double n = 0;
  double terms = 0;
  size_t present = 0;
  for (double c : h) {
    n += c;
    terms += c_log2_c(c);
    present += c != 0;
  }
  if (present <= 1) return 2;
  double const bits = c_log2_c(n) - terms;
  return bits / 8 + 4.0 + static_cast<double>(present) +
         (n >= 65536 ? 128 : 32);
}

// Sum over groups of their own exponent entropy (bytes): no partition of
// the groups into classes codes them in fewer.
double grouped_entropy_bytes(groups const& g) {
  c_log2_c_table const& table = small_c_log2_c_table();
  double bits = 0;
  for (size_t j = 0; j < g.count; ++j) {
    uint32_t const* cell = &g.counts[j * buckets];
    uint32_t n = 0;
    float terms = 0;
    for (unsigned b = 0; b < buckets; ++b) {
      n += cell[b];
      terms += small_c_log2_c(table, cell[b]);
    }
    bits += small_c_log2_c(table, n) - terms;
  }
  return bits * g.scale / 8;
}

struct partition {
  std::vector<uint8_t> map;  // class of each group
  unsigned k = 1;
  double cost = 0;  // of the exponents, with the map
};

// (`map` null: every group in class 0.) The cells are summed as integers,
// then scaled: the sums of their scaled counts in doubles, exact as these
// (whole numbers far below 2^53), in a third of the instructions.
double partition_cost(groups const& g, uint8_t const* map, unsigned k) {
  static_assert(classes * buckets <= 256);
  std::array<uint64_t, 256> sums{};
  for (size_t j = 0; j < g.count; ++j) {
    uint64_t* dst = &sums[map != nullptr ? map[j] * buckets : 0];
    uint32_t const* cell = &g.counts[j * buckets];
    for (unsigned b = 0; b < buckets; ++b) dst[b] += cell[b];
  }
  std::vector<double> h(size_t{k} * buckets);
  for (size_t i = 0; i < h.size(); ++i) {
    h[i] = static_cast<double>(sums[i]) * g.scale;
  }
  double cost = static_cast<double>(g.count) * std::log2(k) / 8 + 4;
  for (unsigned c = 0; c < k; ++c) {
    cost += class_cost({&h[c * buckets], buckets});
  }
  return cost;
}

// K floats as one vector (GCC's extension; two SSE registers for 8).
template <unsigned K>
struct float_vector;
template <>
struct float_vector<4> {
  typedef float type __attribute__((vector_size(16)));
};
template <>
struct float_vector<8> {
  typedef float type __attribute__((vector_size(32)));
};

// Cuts qlo..qhi (of K - 1; cut q the pair of rank (q count + K - 1) / K)
// among the pairs order[lo, hi): the middle one selected in the range,
// then each side's within its side. The pairs are distinct (the index
// breaks ties), so a cut is the pair of its rank whatever the order of
// selection; nested ranges scan half of what selecting each cut among all
// the pairs did (the three selections were most of classifying
// blazepose-heavy.bf16's 1632 rows).
template <unsigned K>
void select_cuts(std::vector<std::pair<float, uint32_t>>& order,
                 std::array<std::pair<float, uint32_t>, K - 1>& cut,
                 unsigned qlo, unsigned qhi, size_t lo, size_t hi) {
  if (qlo > qhi) return;
  unsigned const q = (qlo + qhi) / 2;
  size_t const at = (q * order.size() + K - 1) / K;
  if (at >= lo && at < hi) {
    std::nth_element(order.begin() + static_cast<ptrdiff_t>(lo),
                     order.begin() + static_cast<ptrdiff_t>(at),
                     order.begin() + static_cast<ptrdiff_t>(hi));
  }  // else: the rank of a cut outside, already in place
  cut[q - 1] = order[at];
  select_cuts<K>(order, cut, qlo, q - 1, lo, std::min(at, hi));
  select_cuts<K>(order, cut, q + 1, qhi, std::max(at + 1, lo), hi);
}

// K classes: by quantiles of the groups' mean exponent, then refined by
// Lloyd rounds (each group to the class whose histogram codes it in the
// fewest bits). Empty classes are dropped. Dense cells and a fixed K: a
// group's K costs are a few vector operations.
template <unsigned K>
partition classify(groups const& g) {
  // The quantiles by selection, not a sort (a sort of the groups was 2% of
  // compressing blazepose-heavy.bf16): K - 1 cuts among (mean, index)
  // pairs, each group's class the number of cuts at or below its pair: the
  // class of its rank, i K / count, as the sort gave it (ties in the mean,
  // as quantized weights have, broken by the index; with ties on the cut's
  // side, antispoof.fp16 lost a class and 9 KB).
  // The cells as floats, converted once for the means and every round (the
  // same values, and products by a bucket, as converted one by one: sample
  // counts, at most 2^15 a group, far below 2^24), in a buffer the thread
  // reuses.
  static thread_local std::vector<float> cells;
  cells.resize(g.counts.size());
  for (size_t i = 0; i < cells.size(); ++i) {
    cells[i] = static_cast<float>(g.counts[i]);
  }
  using keyed = std::pair<float, uint32_t>;
  std::vector<keyed> mean(g.count);
  for (size_t j = 0; j < g.count; ++j) {
    float const* cell = &cells[j * buckets];
    float sum = 0, n = 0;
    for (unsigned b = 0; b < buckets; ++b) {
      sum += cell[b] * static_cast<float>(b);
      n += cell[b];
    }
    mean[j] = {n > 0 ? sum / n : 0, static_cast<uint32_t>(j)};
  }
  std::array<keyed, K - 1> cut;
  {
    std::vector<keyed> order(mean);
    select_cuts<K>(order, cut, 1, K - 1, 0, order.size());
  }
  std::vector<uint8_t> map(g.count);
  for (size_t j = 0; j < g.count; ++j) {
    unsigned c = 0;
    for (keyed const& x : cut) c += !(mean[j] < x);
    map[j] = static_cast<uint8_t>(c);
  }
  // A class's costs side by side: one vector operation a bucket (GCC
  // vectorized the array loop across buckets instead, with shuffles: 9% of
  // blazepose-heavy.bf16's compress).
  using costs = typename float_vector<K>::type;
  std::array<float, K * buckets> h;
  std::array<costs, buckets> bits;
  for (int round = 0; round < lloyd_rounds; ++round) {
    h.fill(0.02f);
    for (size_t j = 0; j < g.count; ++j) {
      float* dst = &h[map[j] * buckets];
      float const* cell = &cells[j * buckets];
      for (unsigned b = 0; b < buckets; ++b) dst[b] += cell[b];
    }
    for (unsigned c = 0; c < K; ++c) {
      float total = 0;
      for (unsigned b = 0; b < buckets; ++b) total += h[c * buckets + b];
      for (unsigned b = 0; b < buckets; ++b) {
        bits[b][c] = -std::log2(h[c * buckets + b] / total);
      }
    }
    bool moved = false;
    auto assign = [&](size_t j, costs const& sum) {
      unsigned arg = 0;
      for (unsigned c = 1; c < K; ++c) arg = sum[c] < sum[arg] ? c : arg;
      moved |= arg != map[j];
      map[j] = static_cast<uint8_t>(arg);
    };
    // Two groups at a time: a group's sum is a chain of `buckets` dependent
    // additions, which one group at a time left the adder waiting on each
    // (a sixth of classifying); two chains side by side, each summed in
    // the same order, give the same sums.
    size_t j = 0;
    for (; j + 2 <= g.count; j += 2) {
      float const* first = &cells[j * buckets];
      float const* second = first + buckets;
      costs a{}, b{};
      for (unsigned i = 0; i < buckets; ++i) {
        a += first[i] * bits[i];
        b += second[i] * bits[i];
      }
      assign(j, a);
      assign(j + 1, b);
    }
    if (j < g.count) {
      float const* cell = &cells[j * buckets];
      costs sum{};
      for (unsigned i = 0; i < buckets; ++i) sum += cell[i] * bits[i];
      assign(j, sum);
    }
    if (!moved) break;
  }
  // Renumber the classes in use, in order of first use.
  std::array<int, K> id;
  id.fill(-1);
  unsigned used = 0;
  for (uint8_t& c : map) {
    if (id[c] < 0) id[c] = static_cast<int>(used++);
    c = static_cast<uint8_t>(id[c]);
  }
  partition p;
  p.k = used;
  p.cost = partition_cost(g, map.data(), used);
  p.map = std::move(map);
  return p;
}

// The bucket of each element's top bits (w >> shift: sign and exponent):
// the `buckets` - 1 highest present exponents among the elements of rows
// 0, step, 2 step... (of `cols` 16-bit elements at `w`), the rest in bucket
// 0. (Flags in 32-bit words, pointers in locals: with byte flags, whose
// stores may alias anything, the loop reloaded its operands every element.
// The shift and mask constants: as arguments, the loop moved the shift to
// cl before every element and reloaded the mask from the stack.)
template <unsigned Shift, unsigned ExponentMask>
std::vector<uint8_t> bucket_of(uint8_t const* w, size_t rows, size_t cols,
                               size_t step) {
  constexpr unsigned shift = Shift;
  constexpr unsigned exponent_mask = ExponentMask;
  std::array<uint32_t, 256> seen{};
  for (size_t i = 0; i < rows; i += step) {
    uint8_t const* row = w + 2 * i * cols;
    // The next sampled row, a jump the hardware prefetcher cannot guess:
    // the sample's rows are read from memory here (by_col rereads them).
    if (step > 1 && i + step < rows) {
      uint8_t const* next = row + 2 * step * cols;
      for (size_t b = 0; b < 2 * cols; b += 64) __builtin_prefetch(next + b);
    }
    // Four elements a load: the flag stores are most of the work left.
    size_t j = 0;
    for (; j + 4 <= cols; j += 4) {
      uint64_t const x = load_le<uint64_t>(row + 2 * j);
      seen[(x >> shift) & exponent_mask] = 1;
      seen[(x >> (16 + shift)) & exponent_mask] = 1;
      seen[(x >> (32 + shift)) & exponent_mask] = 1;
      seen[(x >> (48 + shift)) & exponent_mask] = 1;
    }
    for (; j < cols; ++j) {
      seen[(load_le<uint16_t>(row + 2 * j) >> shift) & exponent_mask] = 1;
    }
  }
  std::array<uint8_t, 256> of_exponent{};
  unsigned next = buckets - 1;
  for (unsigned e = exponent_mask + 1; e-- > 0 && next > 0;) {
    if (seen[e]) of_exponent[e] = static_cast<uint8_t>(next--);
  }
  std::vector<uint8_t> out(size_t{1} << (16 - shift));
  for (size_t t = 0; t < out.size(); ++t) {
    out[t] = of_exponent[t & exponent_mask];
  }
  return out;
}

// The groups' counts of their sampled elements' buckets (bucket_of's):
// the columns' from rows 0, col_step, 2 col_step..., and where `by_rows`,
// the rows' from columns 0, row_step, 2 row_step... (for the sign and
// exponent at Shift, the exponent's mask ExponentMask: constants, as in
// bucket_of).
template <unsigned Shift, unsigned ExponentMask>
void sample_groups(uint8_t const* w, size_t rows, size_t cols, size_t col_step,
                   size_t row_step, bool by_rows, groups& by_col,
                   groups& by_row) {
  constexpr unsigned shift = Shift;
  std::vector<uint8_t> const bucket_table =
      bucket_of<Shift, ExponentMask>(w, rows, cols, col_step);
  uint8_t const* const bucket = bucket_table.data();
  by_col.count = cols;
  by_col.counts.assign(cols * buckets, 0);
  by_col.scale = static_cast<double>(col_step);
  // Four elements a load (half the instructions of one a load).
  constexpr uint64_t top = 0xFFFFu >> shift;
  for (size_t i = 0; i < rows; i += col_step) {
    uint8_t const* row = w + 2 * i * cols;
    uint32_t* cell = by_col.counts.data();
    size_t j = 0;
    for (; j + 4 <= cols; j += 4, cell += 4 * buckets) {
      uint64_t const x = load_le<uint64_t>(row + 2 * j);
      ++cell[bucket[(x >> shift) & top]];
      ++cell[buckets + bucket[(x >> (16 + shift)) & top]];
      ++cell[2 * buckets + bucket[(x >> (32 + shift)) & top]];
      ++cell[3 * buckets + bucket[x >> (48 + shift)]];
    }
    for (; j < cols; ++j, cell += buckets) {
      ++cell[bucket[load_le<uint16_t>(row + 2 * j) >> shift]];
    }
  }
  if (by_rows) {
    by_row.count = rows;
    by_row.counts.assign(rows * buckets, 0);
    by_row.scale = static_cast<double>(row_step);
    // Four rows at a time: a row's elements fall in a few buckets, and an
    // increment of the cell the previous one wrote waits for it; four rows
    // are four chains of increments side by side (one row at a time, this
    // loop was 12% of classes_program on handlandmark-full.bf16).
    size_t const line = 2 * cols;
    size_t i = 0;
    for (; i + 4 <= rows; i += 4) {
      uint8_t const* row = w + i * line;
      uint32_t* const cell = by_row.counts.data() + i * buckets;
      for (size_t j = 0; j < cols; j += row_step) {
        uint8_t const* at = row + 2 * j;
        ++cell[bucket[load_le<uint16_t>(at) >> shift]];
        ++cell[buckets + bucket[load_le<uint16_t>(at + line) >> shift]];
        ++cell[2 * buckets + bucket[load_le<uint16_t>(at + 2 * line) >> shift]];
        ++cell[3 * buckets + bucket[load_le<uint16_t>(at + 3 * line) >> shift]];
      }
    }
    for (; i < rows; ++i) {
      uint8_t const* row = w + i * line;
      uint32_t* const cell = by_row.counts.data() + i * buckets;
      for (size_t j = 0; j < cols; j += row_step) {
        ++cell[bucket[load_le<uint16_t>(row + 2 * j) >> shift]];
      }
    }
  }
}

// The sign and exponent of 16-bit floats: the field whose statistics
// follow the channels' scales. Its per-class histograms, and the
// mantissa's, are all that the classes need: one pass over the tensor
// counts them. A tensor coded by bitfields (closed_form.h's usual winner)
// keeps its program, the sign-and-exponent leaf replaced by one a class;
// any other program is replaced by bitfields whose sign and exponent are
// coded by class (a table of every value a class costs more than the
// classes save).
struct exponent_field {
  node* leaf = nullptr;  // bitfields' sign-and-exponent leaf (none: whole)
  unsigned shift = 0;    // field = (element >> shift) & mask
  unsigned mask = 0;
  unsigned width = 1;  // bytes of the field's lanes
};

// bf16: bitfields of the mantissa (7 bits) and the sign and exponent (9);
// fp16: byte planes, the high byte the sign, exponent and top 2 mantissa
// bits. (fp16's top mantissa bits follow the exponent: bitfields 10:6 with
// a mantissa table of the tensor coded blazepose-heavy.fp16 58 KB larger.)
exponent_field exponent_field_of(node& program, meaning m) {
  bool const bf16 = m == meaning::bf16;
  exponent_field f;
  f.shift = bf16 ? 7 : 8;
  f.mask = bf16 ? 0x1FF : 0xFF;
  f.width = bf16 ? 2 : 1;
  if (program.op != opcode::view || program.children.size() != 2) return f;
  node& split = program.children[0];
  bool const same = bf16 ? split.op == opcode::bitfields &&
                               split.params.size() == 2 && split.params[0] == 7
                         : split.op == opcode::planes;
  if (same && split.children.size() == 2 &&
      (split.children[1].op == opcode::rans_static ||
       split.children[1].op == opcode::rans0)) {
    f.leaf = &split.children[1];
  }
  return f;
}

// The split of exponent_field_of: `low` codes the bits below the field,
// `field` the field.
node split_of(unsigned shift, node low, node field) {
  if (shift == 8) {
    return make_op(opcode::planes, {}, {std::move(low), std::move(field)});
  }
  return make_op(opcode::bitfields, {shift, 16 - shift},
                 {std::move(low), std::move(field)});
}

// The leaf of least estimated bytes (node included) for a value of field
// counts `counts`: raw when empty, constant for one value, else rANS order
// 0, a static table or raw.
struct class_leaf {
  opcode op = opcode::raw;
  double bytes = 0;
};

class_leaf best_field_leaf(std::span<uint64_t const> counts, unsigned width,
                           double chunks) {
  size_t present = 0;
  for (uint64_t c : counts) present += c != 0;
  if (present == 0) return {opcode::raw, 2};
  if (present == 1) {
    return {opcode::constant, 2 + leaf_bytes_from_counts(
                                      opcode::constant, counts, width, chunks)};
  }
  class_leaf best{opcode::rans0, 2 + leaf_bytes_from_counts(
                                         opcode::rans0, counts, width, chunks)};
  double const st =
      2 + leaf_bytes_from_counts(opcode::rans_static, counts, width, chunks);
  if (st < best.bytes) best = {opcode::rans_static, st};
  double const raw =
      2 + leaf_bytes_from_counts(opcode::raw, counts, width, chunks);
  if (raw < best.bytes) best = {opcode::raw, raw};
  return best;
}

// A static table's precision for a value of `symbols` symbols in lanes of
// `width` bytes: closed_form.cpp's choices for small alphabets, whose
// tables stay in L1 (2^12 for bytes, 2^13 for 16-bit lanes), with 4 slots
// a symbol at least.
unsigned table_scale(size_t symbols, uint64_t n, unsigned width) {
  unsigned lo = 10;
  while ((size_t{1} << lo) < 4 * symbols) ++lo;
  unsigned const top =
      std::min(rans_static_scale_for(symbols, n), width == 1 ? 12u : 13u);
  return std::max(lo, top);
}

// A leaf `op` for the field counts `counts`, its static table built at
// precision 2^scale (0: table_scale's).
node field_leaf(opcode op, std::span<uint64_t const> counts, unsigned width,
                unsigned scale) {
  node leaf = make_leaf(op);
  if (op != opcode::rans_static) return leaf;
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> present;
  uint64_t n = 0;
  for (size_t s = 0; s < counts.size(); ++s) {
    if (counts[s]) {
      symbols.push_back(static_cast<uint32_t>(s));
      present.push_back(counts[s]);
      n += counts[s];
    }
  }
  if (scale == 0) scale = table_scale(symbols.size(), n, width);
  leaf.blob = serialize_rans_static_table(
      quantized_rans_static_table(symbols, present, scale));
  return leaf;
}

// Each class its own table of whole elements, for a tensor coded by one
// (view(rans_static, raw)) of few values: quantized weights, whose classes
// use different subsets of the values (antispoof.bf16's 3136x128 tensor:
// 241,116 B with one table, 218,635 with 4 classes of their own). The
// elements' indexes in the tensor's table are counted a class, in one
// pass: no 16-bit histogram a class.
struct element_tables {
  // The table's values and each class's count of each (k x values; kept
  // only from a pass over every row), and each class's table's estimate.
  std::vector<uint32_t> values;
  std::vector<uint32_t> counts;
  std::vector<double> bytes;
  // Elements of no value of the table (counted apart; counted, with none,
  // in the counts of each class's field too: class_fields_of).
  uint64_t absent = 0;
};

// Class c's leaf: its table built (encoding work: only for the winner).
node element_leaf(element_tables const& t, unsigned c) {
  size_t const values = t.values.size();
  std::vector<uint32_t> symbols;
  std::vector<uint64_t> counts;
  uint64_t n = 0;
  for (size_t i = 0; i < values; ++i) {
    uint32_t const v = t.counts[c * values + i];
    if (v == 0) continue;
    symbols.push_back(t.values[i]);
    counts.push_back(v);
    n += v;
  }
  if (symbols.size() < 2) {  // one value (pruned channels): no payload
    return make_leaf(symbols.size() == 1 && symbols[0] == 0 ? opcode::zero
                                                            : opcode::constant);
  }
  node leaf = make_leaf(opcode::rans_static);
  leaf.blob = serialize_rans_static_table(quantized_rans_static_table(
      symbols, counts, rans_static_scale_for(symbols.size(), n)));
  return leaf;
}

// Tables of this many values at most: the counts stay in L2.
constexpr size_t max_table_values = 16384;

// Whether `inner` codes whole elements by one static table
// (view(rans_static, raw)): element_tables_of's input.
bool codes_elements_by_table(node const& inner) {
  return inner.op == opcode::view && inner.children.size() == 2 &&
         inner.children[0].op == opcode::rans_static &&
         !inner.children[0].blob.empty();
}

// Whether `inner` codes the elements by sparse (view(sparse(...), raw)).
bool codes_elements_sparse(node const& inner) {
  return inner.op == opcode::view && inner.children.size() == 2 &&
         inner.children[0].op == opcode::sparse;
}

// Whether fewer than half the 16-bit elements of `data` are zero. The
// classes beat sparse programs from the plain table only on lightly pruned
// tensors (10% and 35% zeros on the corpus); past half, sparse's mask wins
// and the plain table's histogram and fit only cost CPU (handlandmark-
// sparse.bf16, 61-100% zeros: +33% compress CPU).
bool lightly_pruned(byte_view data) {
  size_t const n = data.size() / 2;
  size_t zeros = 0;
  for (size_t i = 0; i < n; ++i) {
    zeros += load_le<uint16_t>(data.data() + 2 * i) == 0;
  }
  return 2 * zeros < n;
}

// The table of `inner` (codes_elements_by_table), when its values are
// few enough to count a class: parsed once for both of element_tables_of's
// passes (a parse was a sixth of their time on blazepose-heavy.bf16). Its
// values are counted first, from the blob's symbol set alone: fp16 tables
// have tens of thousands, and parsing their codes for nothing was 2.6% of
// compressing centernet.fp16.
std::optional<rans_static::table> element_table_of(node const& inner) {
  if (!codes_elements_by_table(inner)) return std::nullopt;
  byte_view const blob = inner.children[0].blob;
  size_t const values = rans_static_table_symbols(blob, 2);
  if (values < 2 || values > max_table_values) return std::nullopt;
  return parse_rans_static_table(blob, 2);
}

// The classes' element tables, of the elements of `t` (element_table_of),
// counted from rows 0, row_step, 2 row_step... (1: every row, the counts
// the winner's tables are built from), the counts scaled to the whole
// tensor.
element_tables element_tables_of(rans_static::table const& t, uint8_t const* w,
                                 size_t rows, size_t cols, bool by_rows,
                                 std::vector<uint8_t> const& map, unsigned k,
                                 size_t row_step) {
  size_t const values = t.symbols.size();
  static thread_local std::vector<uint16_t> index;
  // A value's index in the table plus one, 0 for a value not in the table:
  // zero but for the table's values, which are reset after the pass (no
  // 128 KiB fill a tensor).
  index.resize(size_t{1} << 16, 0);
  for (size_t i = 0; i < values; ++i) {
    index[t.symbols[i]] = static_cast<uint16_t>(i + 1);
  }
  // Two copies of the counts, alternate elements each, summed after: a
  // value repeats, and an increment of the counter the previous one wrote
  // waits for it. A class's counts start with its elements of no table
  // value. By columns, each column's counts (its class's, in its copy) by
  // a pointer of its own, computed once: an element is its load, its
  // index's, the pointer's and an increment (with the class's offset
  // added to each, the pass was 29 M instructions of blazepose-heavy.bf16's
  // compress, 24 M so).
  size_t const stride = values + 1;
  size_t const cells = size_t{k} * stride;
  static thread_local std::vector<uint32_t> counts;
  counts.assign(2 * cells, 0);
  uint16_t const* const at = index.data();
  uint32_t* const hist = counts.data();
  if (by_rows) {
    for (size_t r = 0; r < rows; r += row_step) {
      uint8_t const* row = w + 2 * r * cols;
      uint32_t* const even = hist + size_t{map[r]} * stride;
      uint32_t* const odd = even + cells;
      size_t j = 0;
      for (; j + 2 <= cols; j += 2) {
        ++even[at[load_le<uint16_t>(row + 2 * j)]];
        ++odd[at[load_le<uint16_t>(row + 2 * j + 2)]];
      }
      if (j < cols) ++even[at[load_le<uint16_t>(row + 2 * j)]];
    }
  } else {
    static thread_local std::vector<uint32_t*> column;
    column.resize(cols);
    for (size_t j = 0; j < cols; ++j) {
      column[j] = hist + (j & 1) * cells + size_t{map[j]} * stride;
    }
    uint32_t* const* const of = column.data();
    for (size_t r = 0; r < rows; r += row_step) {
      uint8_t const* row = w + 2 * r * cols;
      size_t j = 0;
      for (; j + 4 <= cols; j += 4) {
        ++of[j][at[load_le<uint16_t>(row + 2 * j)]];
        ++of[j + 1][at[load_le<uint16_t>(row + 2 * j + 2)]];
        ++of[j + 2][at[load_le<uint16_t>(row + 2 * j + 4)]];
        ++of[j + 3][at[load_le<uint16_t>(row + 2 * j + 6)]];
      }
      for (; j < cols; ++j) ++of[j][at[load_le<uint16_t>(row + 2 * j)]];
    }
  }
  for (size_t i = 0; i < cells; ++i) hist[i] += hist[cells + i];
  for (uint32_t v : t.symbols) index[v] = 0;
  element_tables out;
  // Then the classes' counts of the table's values, k x values, in place
  // (each moves down past the counts before it).
  for (unsigned c = 0; c < k; ++c) {
    out.absent += hist[c * stride];
    std::copy(hist + c * stride + 1, hist + (c + 1) * stride,
              hist + c * values);
  }
  // A value seen in the sample stands for rows / sampled of its kind.
  double const scale = static_cast<double>(rows) /
                       static_cast<double>((rows + row_step - 1) / row_step);
  if (row_step > 1) {
    for (size_t i = 0; i < size_t{k} * values; ++i) {
      if (hist[i]) {
        hist[i] = std::max<uint32_t>(
            1, static_cast<uint32_t>(std::lround(hist[i] * scale)));
      }
    }
  }
  // Only the winner's values are listed a class again (element_leaf), from
  // the counts of every row (a sample's estimate is read alone): the
  // estimates read one list, in a buffer the thread reuses.
  if (row_step == 1) {
    out.values = t.symbols;
    out.counts.assign(hist, hist + size_t{k} * values);
  }
  static thread_local std::vector<std::pair<uint32_t, uint32_t>> h;
  for (unsigned c = 0; c < k; ++c) {
    h.clear();
    uint64_t n = 0;
    for (size_t i = 0; i < values; ++i) {
      uint32_t const v = hist[c * values + i];
      if (v == 0) continue;
      h.emplace_back(t.symbols[i], v);
      n += v;
    }
    if (h.size() < 2) {
      out.bytes.push_back(h.size() == 1 && h[0].first == 0 ? 2 : 4);
      continue;
    }
    double payload_bits = 0;
    out.bytes.push_back(
        2 +
        estimate_rans_static_blob_bytes(
            h, n, rans_static_scale_for(h.size(), n), &payload_bits) +
        payload_bits / 8);
  }
  return out;
}

// Each class's field counts (class_field_counts' layout, one copy) from
// its counts of whole elements (element_tables_of, over every row, with no
// element outside the table): where those are counted, no second pass.
field_counts& class_fields_of(element_tables const& t, unsigned k,
                              exponent_field const& f, bool mantissa) {
  size_t const cells = size_t{f.mask} + 1;
  size_t const low_cells = mantissa ? size_t{1} << f.shift : 0;
  static thread_local field_counts out;
  out.classes.assign(size_t{k} * cells, 0);
  out.mantissa.assign(size_t{k} * low_cells, 0);
  size_t const values = t.values.size();
  uint32_t const low_mask = (1u << f.shift) - 1;
  for (unsigned c = 0; c < k; ++c) {
    uint32_t const* counts = &t.counts[c * values];
    uint32_t* const field = &out.classes[c * cells];
    for (size_t i = 0; i < values; ++i) {
      field[(t.values[i] >> f.shift) & f.mask] += counts[i];
    }
    if (!mantissa) continue;
    uint32_t* const low = &out.mantissa[c * low_cells];
    for (size_t i = 0; i < values; ++i) {
      low[t.values[i] & low_mask] += counts[i];
    }
  }
  return out;
}

// The entropy in bytes, scaled to the tensor, of each class's field `f`
// and bits below it (bf16: the mantissa; fp16: the low byte) over rows 0,
// step, 2 step...: about what the classes' leaves code in (the sample's
// entropy is biased low, and tables are left out).
double sampled_class_bytes(uint8_t const* w, size_t rows, size_t cols,
                           size_t step, bool by_rows,
                           std::vector<uint8_t> const& map, unsigned k,
                           exponent_field const& f) {
  size_t const field_cells = size_t{f.mask} + 1;
  size_t const low_cells = size_t{1} << f.shift;
  static thread_local std::vector<uint32_t> counts;
  counts.assign(size_t{k} * (field_cells + low_cells), 0);
  uint32_t* const field = counts.data();
  uint32_t* const low = field + size_t{k} * field_cells;
  uint32_t const low_mask = static_cast<uint32_t>(low_cells - 1);
  size_t sampled = 0;
  for (size_t i = 0; i < rows; i += step, sampled += cols) {
    uint8_t const* row = w + 2 * i * cols;
    for (size_t j = 0; j < cols; ++j) {
      uint32_t const v = load_le<uint16_t>(row + 2 * j);
      size_t const c = by_rows ? map[i] : map[j];
      ++field[c * field_cells + ((v >> f.shift) & f.mask)];
      ++low[c * low_cells + (v & low_mask)];
    }
  }
  c_log2_c_table const& table = small_c_log2_c_table();
  auto entropy_bits = [&](uint32_t const* h, size_t cells) {
    uint32_t n = 0;
    double terms = 0;
    for (size_t c = 0; c < cells; ++c) {
      n += h[c];
      terms += small_c_log2_c(table, h[c]);
    }
    return small_c_log2_c(table, n) - terms;
  };
  double bits = 0;
  for (unsigned c = 0; c < k; ++c) {
    bits += entropy_bits(field + c * field_cells, field_cells) +
            entropy_bits(low + c * low_cells, low_cells);
  }
  double const n = static_cast<double>(rows) * static_cast<double>(cols);
  return sampled == 0 ? 0 : bits / 8 * n / static_cast<double>(sampled);
}

// The rows and columns (the last dimension) of region `r`, bytes `data`,
// when it is a bf16/fp16 tensor the classes take: of rank >= 2, at least
// min_elements, its shape its length.
struct tensor_grid {
  size_t rows = 0, cols = 0;
};
std::optional<tensor_grid> grid_of(region const& r, byte_view data) {
  if (r.kind != region_kind::tensor ||
      (r.type != dtype::bf16 && r.type != dtype::f16) || r.shape.size() < 2 ||
      data.size() != r.length || data.size() % 2 != 0) {
    return std::nullopt;
  }
  size_t const n = data.size() / 2;
  uint64_t elements = 1;
  for (uint64_t d : r.shape) elements *= d;
  size_t const cols = r.shape.back();
  if (n < min_elements || elements != n || cols < 2 || cols >= n) {
    return std::nullopt;
  }
  return tensor_grid{n / cols, cols};
}

// Every how-many-th line a tensor of `n` elements is sampled along, for
// groups of `lines` elements each keeping >= min_group_sample.
size_t sample_step(size_t n, size_t lines) {
  return std::clamp<size_t>(n / sample_elements, 1,
                            std::max<size_t>(1, lines / min_group_sample));
}

}  // namespace

std::optional<channel_classes> channel_classes_of(region const& r,
                                                  byte_view data,
                                                  double to_beat) {
  std::optional<tensor_grid> const grid = grid_of(r, data);
  if (!grid) return std::nullopt;
  size_t const n = data.size() / 2;
  size_t const rows = grid->rows, cols = grid->cols;
  meaning const m = meaning_of(r.type);

  // Read in place, unaligned (a safetensors header of odd length leaves
  // every tensor so): an aligned copy paged in fresh memory every tensor.
  uint8_t const* const w = data.data();
  // Sampled: the columns' counts from every col_step-th row, the rows'
  // from every row_step-th column, each group keeping >= min_group_sample.
  // Counting every element cost 0.17 ms a tensor of blazepose-heavy.bf16.
  size_t const col_step = sample_step(n, rows);
  size_t const row_step = sample_step(n, cols);
  bool const by_rows_too =
      r.length <= max_rows_region && rows >= 2 && rows <= max_rows;
  groups by_col, by_row;
  if (m == meaning::bf16) {
    sample_groups<7, 0xFF>(w, rows, cols, col_step, row_step, by_rows_too,
                           by_col, by_row);
  } else {
    sample_groups<10, 0x1F>(w, rows, cols, col_step, row_step, by_rows_too,
                            by_col, by_row);
  }
  // The tail past whole rows (none when the shape is right) is not counted.

  // The grouping whose floor (each group its own table, for free, and a
  // map of 2 bits a group) leaves more room under one table; classified
  // only when that room exceeds the gain asked for. Classifying both
  // groupings coded blazepose-heavy.bf16 4 KB (0.02%) smaller in 9 ms more.
  double single[2] = {0, 0}, room[2] = {0, 0};
  for (bool use_rows : {false, true}) {
    if (use_rows && !by_rows_too) continue;
    groups const& g = use_rows ? by_row : by_col;
    single[use_rows] = partition_cost(g, nullptr, 1);
    room[use_rows] = single[use_rows] - grouped_entropy_bytes(g) - 4 -
                     static_cast<double>(g.count) * std::log2(classes) / 8;
  }
  bool const use_rows = by_rows_too && room[1] > room[0];
  groups const& g = use_rows ? by_row : by_col;
  // The gain asked for: a fraction of the tensor's best program without
  // classes (choosing and coding the classes of blazepose-heavy.bf16 cost
  // 0.1 CPU s, 5% of its 27 MB's compression at 2 ns a byte), and the
  // mantissas' tables per class, not in the estimate.
  double const wanted = std::max(64.0, min_gain * to_beat);
  if (classes >= g.count || room[use_rows] <= wanted) return std::nullopt;
  partition best = classify<classes>(g);
  if (best.k < 2 || single[use_rows] - best.cost <= wanted) {
    return std::nullopt;
  }
  return channel_classes{std::move(best.map), best.k, use_rows};
}

std::optional<classes_choice> classes_program(region const& r, byte_view data,
                                              node const& inner, double to_beat,
                                              uint32_t chunk_size) {
  std::optional<channel_classes> const grouping =
      channel_classes_of(r, data, to_beat);
  if (!grouping) return std::nullopt;
  return classes_program(r, data, inner, to_beat, *grouping, chunk_size);
}

std::optional<classes_choice> classes_program(region const& r, byte_view data,
                                              node const& inner, double to_beat,
                                              channel_classes const& grouping,
                                              uint32_t chunk_size) {
  std::optional<tensor_grid> const grid = grid_of(r, data);
  if (!grid || grouping.k < 2 || grouping.k > classes) return std::nullopt;
  for (uint8_t c : grouping.map) {
    if (c >= grouping.k) return std::nullopt;
  }
  size_t const n = data.size() / 2;
  size_t const rows = grid->rows, cols = grid->cols;
  meaning const m = meaning_of(r.type);
  uint8_t const* const w = data.data();
  size_t const col_step = sample_step(n, rows);
  double const wanted = std::max(64.0, min_gain * to_beat);

  // The tensor's program, its exponent field's leaf replaced by one a
  // class: the same shape, one more stream a class, and a pass over the
  // tensor for the classes' field counts (no gather, no histogram of each
  // class's elements, no program of its own a class).
  classes_choice out;
  out.program = inner;
  exponent_field const field = exponent_field_of(out.program, m);
  exponent_field const* const f = &field;
  if ((grouping.rows ? rows : cols) != grouping.map.size()) return std::nullopt;
  unsigned const k = grouping.k;
  // A sparse program codes the zeros by its mask; the classes code every
  // element. Where the classes' entropy, estimated on the sample's rows,
  // leaves no gain by a margin, the pass over the tensor is not made
  // (handlandmark-sparse.bf16: 13 of its tensors made it, and lost by 160
  // to 9,800 B; 8 are turned away). The sample's rows can miss a pattern
  // of pruned rows: Identity_dense/kernel's estimate was 2.4% above what
  // the tensor's counts gave, and the classes won there by 3.5%.
  if (codes_elements_sparse(inner)) {
    double const map_bytes =
        6 + static_cast<double>(grouping.map.size()) * std::log2(k) / 8;
    double const estimate =
        map_bytes + sampled_class_bytes(w, rows, cols, col_step, grouping.rows,
                                        grouping.map, k, *f);
    if (to_beat - estimate <= wanted - sparse_sample_margin * to_beat) {
      return std::nullopt;
    }
  }
  size_t const cells = size_t{f->mask} + 1;
  // Timed by the thread's CPU clock (work_clock.h), a system call of 1.4
  // to 7 us here: the passes alone, not the winner's table building (36 us
  // a tensor on blazepose-heavy.bf16, left with choosing).
  // A program of one table of the elements has the classes' own tables
  // costed too (below), from a pass counting each class's elements; where
  // that pass is over every row, it is made first and the field counts
  // follow from its counts, with no pass of their own (blazepose-heavy.bf16:
  // 23 of its 74 tensors tried).
  std::optional<rans_static::table> const table = element_table_of(inner);
  size_t table_step = std::clamp<size_t>(n / table_sample_elements, 1,
                                         std::max<size_t>(1, rows / 8));
  if (table_step < min_table_sample_step) table_step = 1;
  std::optional<element_tables> tables;
  double tables_ms = 0;  // the whole tensor's pass (thread CPU)
  if (table && table_step == 1) {
    double const start = thread_cpu_ms();
    tables = element_tables_of(*table, w, rows, cols, grouping.rows,
                               grouping.map, k, 1);
    tables_ms = thread_cpu_ms() - start;
  }
  bool const fused = tables && tables->absent == 0;
  bool const count_mantissas = f->leaf == nullptr || m != meaning::bf16;
  double const counts_start = thread_cpu_ms();
  field_counts const& counted =
      fused ? class_fields_of(*tables, k, *f, count_mantissas)
            : class_field_counts(w, rows, cols, grouping.rows, grouping.map, k,
                                 f->shift, f->mask, count_mantissas);
  // Fused: the element pass is these counts' pass too.
  double const counts_ms =
      thread_cpu_ms() - counts_start + (fused ? tables_ms : 0);
  std::vector<uint64_t> per(size_t{k} * cells);
  std::vector<uint64_t> all(cells, 0);
  for (size_t i = 0; i < per.size(); ++i) {
    per[i] = counted.classes[i];
    all[i % cells] += per[i];
  }
  double const chunks =
      std::max(1.0, std::ceil(static_cast<double>(data.size()) / chunk_size));
  // The classes node with its params and map, and a leaf a class.
  double after =
      6 + static_cast<double>(grouping.map.size()) * std::log2(k) / 8;
  std::vector<class_leaf> leaves;
  for (unsigned c = 0; c < k; ++c) {
    std::span<uint64_t const> const h(&per[c * cells], cells);
    leaves.push_back(best_field_leaf(h, f->width, chunks));
    after += leaves.back().bytes;
  }
  unsigned const mbits = f->shift;
  unsigned const mwidth = 1;
  size_t const low_cells = size_t{1} << mbits;
  // (bf16's mantissas are counted only where the program is replaced
  // whole: a bitfields program keeps its mantissa's leaf. Counting them too
  // cost 6 instructions an element, and own mantissas changed
  // blazepose-heavy.bf16 by 0.002%; fp16's low bytes set quantized classes
  // apart: handlandmark-full.fp16 12 KB.)
  bool const mantissas = f->leaf == nullptr || m != meaning::bf16;
  std::vector<uint64_t> mantissa((k + 1) * low_cells, 0);  // then the whole's
  for (size_t i = 0; mantissas && i < k * low_cells; ++i) {
    mantissa[i] = counted.mantissa[i];
    mantissa[k * low_cells + i % low_cells] += mantissa[i];
  }
  // Each class's mantissa leaf, then the whole's. The classes' are costed
  // only where their floor (entropy, a bitfields node and a quarter byte a
  // value of table) is below the whole's leaf: the static tables' estimates
  // of k mantissas were 4% of compressing blazepose-heavy.bf16, and their
  // mantissas rarely differ.
  std::vector<class_leaf> mantissa_leaves(k + 1);
  mantissa_leaves[k] =
      best_field_leaf({&mantissa[k * low_cells], low_cells}, mwidth, chunks);
  double own = 0;
  for (unsigned c = 0; c < k; ++c) {
    uint64_t n = 0;
    double terms = 0, present = 0;
    for (size_t i = 0; i < low_cells; ++i) {
      uint64_t const v = mantissa[c * low_cells + i];
      n += v, terms += c_log2_c(static_cast<double>(v)), present += v != 0;
    }
    own += (c_log2_c(static_cast<double>(n)) - terms) / 8 + 6 + present / 4;
  }
  if (mantissas && own < mantissa_leaves[k].bytes) {
    own = 0;
    for (unsigned c = 0; c < k; ++c) {
      mantissa_leaves[c] = best_field_leaf(
          {&mantissa[c * low_cells], low_cells}, mwidth, chunks);
      own += mantissa_leaves[c].bytes + 4;  // and bitfields
    }
  } else {
    own = std::numeric_limits<double>::infinity();
  }
  // The gains, against the tensor's program, of: its sign-and-exponent leaf
  // replaced by the classes' (bitfields programs); bitfields with the
  // mantissa's table of the tensor and the classes' sign and exponent (any
  // other program); classes each with a bitfields program of its own
  // (classes that differ in more than their scale: one of quantized
  // values, one of noise, say).
  enum class shape { leaf, shared_mantissa, own_mantissas, own_tables };
  shape how = shape::own_mantissas;
  double gain = 0;
  {
    double const map_bytes =
        6 + static_cast<double>(grouping.map.size()) * std::log2(k) / 8;
    double const se_bytes = after - map_bytes;  // the classes' leaves
    gain = to_beat - (6 + map_bytes + se_bytes + own);
    double const shared =
        to_beat - (6 + 4 + mantissa_leaves[k].bytes + map_bytes + se_bytes);
    if (f->leaf != nullptr) {
      double const before =
          2 + leaf_bytes_from_counts(f->leaf->op, all, f->width, chunks);
      double const replaced = before - (map_bytes + se_bytes);
      if (replaced >= gain) gain = replaced, how = shape::leaf;
    } else if (shared >= gain) {
      gain = shared, how = shape::shared_mantissa;
    }
  }
  // Each class the cheaper of its own table and its own split (classes as
  // different as antispoof.fp16's: one of few values, one of noise).
  std::vector<bool> own_table(k, false);
  if (codes_elements_by_table(inner)) {
    double const map_bytes =
        6 + static_cast<double>(grouping.map.size()) * std::log2(k) / 8;
    if (std::isinf(own)) {  // the classes' mantissa leaves, not yet costed
      for (unsigned c = 0; c < k; ++c) {
        mantissa_leaves[c] = best_field_leaf(
            {&mantissa[c * low_cells], low_cells}, mwidth, chunks);
      }
    }
    auto mixed_bytes = [&](element_tables const& t) {
      double mixed = 6 + map_bytes;
      for (unsigned c = 0; c < k; ++c) {
        double const split = mantissa_leaves[c].bytes + 4 + leaves[c].bytes;
        own_table[c] = t.bytes[c] < split;
        mixed += own_table[c] ? t.bytes[c] : split;
      }
      return mixed;
    };
    // Decided on a sample of rows first: the whole pass (a gather an
    // element) only where the sample's gain could win. The sample's
    // estimate is optimistic (fewer values seen: smaller tables, lower
    // entropy), so it rarely turns away a winner; on blazepose-heavy.bf16
    // 1 of 27 tensors took its own tables, and their passes were 11 of its
    // 40 ms choosing the classes.
    // A sample of half or a third of the rows costs about what the whole
    // pass does (the tables' costing is most of a pass of blazepose-heavy's
    // 288x288 tensors): those count every row at once.
    // (Counted above where every row is counted at once.) A class's own
    // table lacks the elements of no value of the tensor's table: none
    // where that table codes the tensor, but were there any, no class
    // would have its own.
    bool worth = table.has_value();
    if (worth && table_step > 1) {
      element_tables const sampled = element_tables_of(
          *table, w, rows, cols, grouping.rows, grouping.map, k, table_step);
      worth = sampled.absent == 0 &&
              to_beat - mixed_bytes(sampled) >
                  std::max(gain, wanted) - table_sample_margin * to_beat;
    }
    if (worth && !tables) {
      double const start = thread_cpu_ms();
      tables = element_tables_of(*table, w, rows, cols, grouping.rows,
                                 grouping.map, k, 1);
      tables_ms = thread_cpu_ms() - start;
    }
    if (worth && tables->absent == 0) {
      double const mixed = mixed_bytes(*tables);
      if (to_beat - mixed > gain) {
        gain = to_beat - mixed, how = shape::own_tables;
      }
    }
  }
  if (!(gain > wanted)) return std::nullopt;
  if (how == shape::own_tables) {
    std::vector<node> kids;
    for (unsigned c = 0; c < k; ++c) {
      if (own_table[c]) {
        kids.push_back(element_leaf(*tables, c));
        continue;
      }
      std::span<uint64_t const> const h(&per[c * cells], cells);
      std::span<uint64_t const> const mh(&mantissa[c * low_cells], low_cells);
      kids.push_back(split_of(mbits,
                              field_leaf(mantissa_leaves[c].op, mh, mwidth, 0),
                              field_leaf(leaves[c].op, h, f->width, 0)));
    }
    node cls = make_op(opcode::classes, {grouping.rows ? cols : 1, k},
                       std::move(kids));
    cls.blob.assign(grouping.map.begin(), grouping.map.end());
    out.program = make_op(opcode::view, {2, static_cast<uint64_t>(m)},
                          {std::move(cls), make_leaf(opcode::raw)});
    out.rows = grouping.rows;
    out.estimated_bytes = to_beat - gain;
    // The element counts are the own tables' input; the field counts are
    // the splits', where a class has one.
    bool const any_split =
        std::find(own_table.begin(), own_table.end(), false) != own_table.end();
    out.coding_ms = fused ? counts_ms : tables_ms + (any_split ? counts_ms : 0);
    return out;
  }
  unsigned const scale = how == shape::leaf &&
                                 f->leaf->op == opcode::rans_static &&
                                 !f->leaf->blob.empty()
                             ? f->leaf->blob[0]
                             : 0;
  std::vector<node> kids;
  for (unsigned c = 0; c < k; ++c) {
    std::span<uint64_t const> const h(&per[c * cells], cells);
    node se = field_leaf(leaves[c].op, h, f->width, scale);
    if (how == shape::own_mantissas) {
      std::span<uint64_t const> const mh(&mantissa[c * low_cells], low_cells);
      se = split_of(mbits, field_leaf(mantissa_leaves[c].op, mh, mwidth, 0),
                    std::move(se));
    }
    kids.push_back(std::move(se));
  }
  uint64_t const stride = grouping.rows ? cols : 1;
  node cls = make_op(opcode::classes, {stride, k}, std::move(kids));
  cls.blob.assign(grouping.map.begin(), grouping.map.end());
  auto view_of = [&](node elements) {
    return make_op(opcode::view, {2, static_cast<uint64_t>(m)},
                   {std::move(elements), make_leaf(opcode::raw)});
  };
  if (how == shape::leaf) {
    *f->leaf = std::move(cls);
  } else if (how == shape::own_mantissas) {
    out.program = view_of(std::move(cls));
  } else {
    std::span<uint64_t const> const mh(&mantissa[k * low_cells], low_cells);
    out.program = view_of(
        split_of(mbits, field_leaf(mantissa_leaves[k].op, mh, mwidth, 0),
                 std::move(cls)));
  }
  out.estimated_bytes = to_beat - gain;
  out.rows = grouping.rows;
  out.keeps_inner_tables = how == shape::leaf;
  out.coding_ms = counts_ms;
  return out;
}

namespace {

class classes_chooser final : public chooser_decorator {
 public:
  classes_chooser(std::unique_ptr<program_chooser> inner, uint32_t chunk_size)
      : chooser_decorator(std::move(inner)), chunk_size_(chunk_size) {}

  bool choose_recorded(region const& r, byte_view data, node& program,
                       choice_record& how) const override {
    bool const recorded = inner().choose_recorded(r, data, program, how);
    if (!recorded || how.estimated_bytes <= 0) return recorded;
    double const start = work_clock_ms();
    // The channels' classes read the data alone: found once for both tries,
    // and with none, neither try is made (the second's plain table, its
    // histogram and fit, were for nothing). rvm.bf16, 44 second tries:
    // this stage 104.8 M -> 89.2 M of compress -T1's 362 M instructions.
    std::optional<channel_classes> const grouping =
        channel_classes_of(r, data, how.estimated_bytes);
    std::optional<classes_choice> c;
    if (grouping) {
      c = classes_program(r, data, program, how.estimated_bytes, *grouping,
                          chunk_size_);
    }
    if (!c && grouping && codes_elements_sparse(program) &&
        (r.type == dtype::bf16 || r.type == dtype::f16) &&
        lightly_pruned(data)) {
      // The classes extend a table of the elements, which sparse programs
      // lack: they are tried on the region's plain table instead, against
      // the sparse program's estimate (handlandmark-lite.bf16's Conv2D_29:
      // sparse won the search by 0.5% and, unextended, coded 2.9% larger
      // than the classes did).
      node plain =
          make_op(opcode::view, {2, static_cast<uint64_t>(meaning_of(r.type))},
                  {make_leaf(opcode::rans_static), make_leaf(opcode::raw)});
      fit_tables_from_histogram(plain, sparse_histogram(data),
                                meaning_of(r.type));
      c = classes_program(r, data, plain, how.estimated_bytes, *grouping,
                          chunk_size_);
    }
    double const ms = work_clock_ms() - start;
    how.ms += ms;
    if (c) {
      // Coding work (choice_record::coding_ms): the classes' counts and
      // tables, and the inner program's only where its tables still code
      // (the classes replaced one leaf); a program replaced whole wasted
      // its count and tables on choosing.
      how.coding_ms =
          (c->keeps_inner_tables ? how.coding_ms : 0) + c->coding_ms;
      if (std::getenv("BREVIS_SEARCH_DEBUG")) {
        std::fprintf(stderr, "%s: classes by %s, est %.0f (was %.0f)\n",
                     r.name.c_str(), c->rows ? "rows" : "columns",
                     c->estimated_bytes, how.estimated_bytes);
      }
      program = std::move(c->program);
      how.estimated_bytes = c->estimated_bytes;
      // how.expansions stays: the search spent them, whatever replaced its
      // program (the ablation's counts were missing them).
    }
    return true;
  }

 private:
  std::unique_ptr<program_chooser> rewrap(
      std::unique_ptr<program_chooser> inner) const override {
    return std::make_unique<classes_chooser>(std::move(inner), chunk_size_);
  }

  uint32_t chunk_size_;
};

}  // namespace

std::unique_ptr<program_chooser> with_classes(
    std::unique_ptr<program_chooser> inner, uint32_t chunk_size) {
  return std::make_unique<classes_chooser>(std::move(inner), chunk_size);
}

}  // namespace brevis::codec::search
