#include "codec/search/classes_candidate.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <vector>

#include "codec/choose/histogram.h"
#include "codec/choose/work_clock.h"
#include "codec/core/bytes.h"
#include "codec/ops/classes.h"
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
// 202,674,221).
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
// The view, its tail and the classes node with its two params.
constexpr double frame_bytes = 6 + 2 + 4;

double c_log2_c(double c) { return c > 0 ? c * std::log2(c) : 0; }

// c log2 c of small counts, looked up: the groups' cells are sample counts.
float small_c_log2_c(uint32_t c) {
  static auto const table = [] {
    std::array<float, 4096> t{};
    for (uint32_t i = 1; i < t.size(); ++i) {
      t[i] = static_cast<float>(c_log2_c(i));
    }
    return t;
  }();
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
  double bits = 0;
  for (size_t j = 0; j < g.count; ++j) {
    uint32_t const* cell = &g.counts[j * buckets];
    uint32_t n = 0;
    float terms = 0;
    for (unsigned b = 0; b < buckets; ++b) {
      n += cell[b];
      terms += small_c_log2_c(cell[b]);
    }
    bits += small_c_log2_c(n) - terms;
  }
  return bits * g.scale / 8;
}

struct partition {
  std::vector<uint8_t> map;  // class of each group
  unsigned k = 1;
  double cost = 0;  // of the exponents, with the map
};

double partition_cost(groups const& g, std::vector<uint8_t> const& map,
                      unsigned k) {
  std::vector<double> h(size_t{k} * buckets, 0);
  for (size_t j = 0; j < g.count; ++j) {
    double* dst = &h[map[j] * buckets];
    uint32_t const* cell = &g.counts[j * buckets];
    for (unsigned b = 0; b < buckets; ++b) dst[b] += cell[b] * g.scale;
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

// K classes: by quantiles of the groups' mean exponent, then refined by
// Lloyd rounds (each group to the class whose histogram codes it in the
// fewest bits). Empty classes are dropped. Dense cells and a fixed K: a
// group's K costs are a few vector operations.
template <unsigned K>
partition classify(groups const& g) {
  std::vector<std::pair<float, uint32_t>> order(g.count);
  for (size_t j = 0; j < g.count; ++j) {
    uint32_t const* cell = &g.counts[j * buckets];
    float sum = 0, n = 0;
    for (unsigned b = 0; b < buckets; ++b) {
      sum += static_cast<float>(cell[b] * b);
      n += static_cast<float>(cell[b]);
    }
    order[j] = {n > 0 ? sum / n : 0, static_cast<uint32_t>(j)};
  }
  std::sort(order.begin(), order.end());
  std::vector<uint8_t> map(g.count);
  for (size_t i = 0; i < g.count; ++i) {
    map[order[i].second] = static_cast<uint8_t>(i * K / g.count);
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
      uint32_t const* cell = &g.counts[j * buckets];
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
    for (size_t j = 0; j < g.count; ++j) {
      uint32_t const* cell = &g.counts[j * buckets];
      costs sum{};
      for (unsigned b = 0; b < buckets; ++b) {
        sum += static_cast<float>(cell[b]) * bits[b];
      }
      unsigned arg = 0;
      for (unsigned c = 1; c < K; ++c) arg = sum[c] < sum[arg] ? c : arg;
      moved |= arg != map[j];
      map[j] = static_cast<uint8_t>(arg);
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
  p.cost = partition_cost(g, map, used);
  p.map = std::move(map);
  return p;
}

// The bucket of each element's top bits (w >> shift: sign and exponent):
// the `buckets` - 1 highest present exponents of the samples, the rest in
// bucket 0.
template <typename Visit>
std::vector<uint8_t> bucket_of(unsigned shift, unsigned exponent_mask,
                               Visit&& visit_samples) {
  std::vector<uint8_t> seen(exponent_mask + 1, 0);
  visit_samples([&](uint16_t v) { seen[(v >> shift) & exponent_mask] = 1; });
  std::vector<uint8_t> of_exponent(exponent_mask + 1, 0);
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

// The elements of each class, in order (the op's encode, on 16-bit lanes),
// in buffers the thread reuses: fresh ones as large as the tensor cost a
// page fault every 4 KiB (10% of blazepose-heavy's compress CPU). By
// columns, each class's column positions are listed once and each row
// gathered by them: a copy per element through the map and a cursor per
// class took 0.3 ms a tensor of blazepose-heavy.bf16 (27 ms in all).
std::vector<bytes>& gather(uint8_t const* w, size_t rows, size_t cols,
                           bool by_rows, std::vector<uint8_t> const& map,
                           unsigned k) {
  std::vector<uint32_t> first(k + 1, 0);
  for (uint8_t c : map) ++first[c + 1];
  for (unsigned c = 0; c < k; ++c) first[c + 1] += first[c];
  size_t const other = by_rows ? cols : rows;
  static thread_local std::vector<bytes> out;
  if (out.size() < k) out.resize(k);
  std::vector<uint16_t*> at(k);
  for (unsigned c = 0; c < k; ++c) {
    out[c].resize(size_t{first[c + 1] - first[c]} * other * 2);
    at[c] = reinterpret_cast<uint16_t*>(out[c].data());
  }
  if (by_rows) {
    for (size_t r = 0; r < rows; ++r) {
      std::memcpy(at[map[r]], w + r * cols * 2, cols * 2);
      at[map[r]] += cols;
    }
    return out;
  }
  std::vector<uint32_t> pos(cols);
  {
    std::vector<uint32_t> next(first.begin(), first.end() - 1);
    for (size_t j = 0; j < cols; ++j) {
      pos[next[map[j]]++] = static_cast<uint32_t>(j);
    }
  }
  for (unsigned c = 0; c < k; ++c) {
    uint32_t const* p = pos.data() + first[c];
    size_t const m = first[c + 1] - first[c];
    uint16_t* dst = at[c];
    for (size_t r = 0; r < rows; ++r, dst += m) {
      uint8_t const* row = w + r * cols * 2;
      for (size_t t = 0; t < m; ++t) dst[t] = load_le<uint16_t>(row + 2 * p[t]);
    }
  }
  return out;
}

}  // namespace

std::optional<classes_choice> classes_program(region const& r, byte_view data,
                                              double to_beat) {
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
  size_t const rows = n / cols;
  meaning const m = meaning_of(r.type);
  unsigned const shift = m == meaning::bf16 ? 7 : 10;
  unsigned const exponent_mask = m == meaning::bf16 ? 0xFF : 0x1F;

  // Read in place, unaligned (a safetensors header of odd length leaves
  // every tensor so): an aligned copy paged in fresh memory every tensor.
  uint8_t const* const w = data.data();
  auto lane = [w](size_t i) { return load_le<uint16_t>(w + 2 * i); };
  // Sampled: the columns' counts from every col_step-th row, the rows'
  // from every row_step-th column, each group keeping >= min_group_sample.
  // Counting every element cost 0.17 ms a tensor of blazepose-heavy.bf16.
  size_t const col_step = std::clamp<size_t>(
      n / sample_elements, 1, std::max<size_t>(1, rows / min_group_sample));
  size_t const row_step = std::clamp<size_t>(
      n / sample_elements, 1, std::max<size_t>(1, cols / min_group_sample));
  bool const by_rows_too =
      r.length <= max_rows_region && rows >= 2 && rows <= max_rows;
  auto visit_samples = [&](auto&& visit) {
    for (size_t i = 0; i < rows; i += col_step) {
      for (size_t j = 0; j < cols; ++j) visit(lane(i * cols + j));
    }
  };
  std::vector<uint8_t> const bucket =
      bucket_of(shift, exponent_mask, visit_samples);
  groups by_col;
  by_col.count = cols;
  by_col.counts.assign(cols * buckets, 0);
  by_col.scale = static_cast<double>(col_step);
  for (size_t i = 0; i < rows; i += col_step) {
    size_t const row = i * cols;
    uint32_t* cell = by_col.counts.data();
    for (size_t j = 0; j < cols; ++j, cell += buckets) {
      ++cell[bucket[lane(row + j) >> shift]];
    }
  }
  groups by_row;
  if (by_rows_too) {
    by_row.count = rows;
    by_row.counts.assign(rows * buckets, 0);
    by_row.scale = static_cast<double>(row_step);
    for (size_t i = 0; i < rows; ++i) {
      size_t const row = i * cols;
      uint32_t* cell = &by_row.counts[i * buckets];
      for (size_t j = 0; j < cols; j += row_step) {
        ++cell[bucket[lane(row + j) >> shift]];
      }
    }
  }
  // The tail past whole rows (none when the shape is right) is not counted.

  // The best partition by the exponents' estimate, the groupings and class
  // counts tried only where their floor (each group its own table, for
  // free) leaves room for a gain.
  // The grouping whose floor (each group its own table, for free, and a
  // map of 2 bits a group) leaves more room under one table; classified
  // only when that room exceeds the gain asked for. Classifying both
  // groupings coded blazepose-heavy.bf16 4 KB (0.02%) smaller in 9 ms more.
  double single[2] = {0, 0}, room[2] = {0, 0};
  for (bool use_rows : {false, true}) {
    if (use_rows && !by_rows_too) continue;
    groups const& g = use_rows ? by_row : by_col;
    single[use_rows] = partition_cost(g, std::vector<uint8_t>(g.count, 0), 1);
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
  bool const best_rows = use_rows;

  uint64_t const stride = best_rows ? cols : 1;
  std::vector<bytes>& pool = gather(w, rows, cols, best_rows, best.map, best.k);
  std::span<bytes const> const parts(pool.data(), best.k);
  classes_choice out;
  out.rows = best_rows;
  out.estimated_bytes = frame_bytes + static_cast<double>(best.map.size()) *
                                          std::log2(best.k) / 8;
  std::vector<closed_form_choice> chosen;
  std::vector<sparse_hist> hists;
  for (bytes const& part : parts) {
    region sub = r;
    sub.length = part.size();
    sub.shape.clear();
    hists.push_back(sparse_histogram(part));
    float16_marginals const mg = float16_marginals_of(hists.back(), m);
    region_input const in{sub, part, nullptr, &hists.back(), &mg};
    chosen.push_back(closed_form_decide(in, closed_form_costs(in, mg)));
    double const view = chosen.back().program.op == opcode::view ? 6 : 0;
    out.estimated_bytes += chosen.back().estimated_bytes - view;
    if (out.estimated_bytes >= to_beat) return std::nullopt;
  }
  std::vector<node> kids;
  for (size_t c = 0; c < chosen.size(); ++c) {
    build_closed_form_tables(chosen[c], hists[c], m);
    node& p = chosen[c].program;
    kids.push_back(p.op == opcode::view ? std::move(p.children[0])
                                        : std::move(p));
  }
  node cls = make_op(opcode::classes, {stride, best.k}, std::move(kids));
  cls.blob.assign(best.map.begin(), best.map.end());
  out.program = make_op(opcode::view, {2, static_cast<uint64_t>(m)},
                        {std::move(cls), make_leaf(opcode::raw)});
  return out;
}

namespace {

class classes_chooser final : public recording_chooser {
 public:
  explicit classes_chooser(std::unique_ptr<program_chooser> inner)
      : inner_(std::move(inner)) {}

  bool choose_recorded(region const& r, byte_view data, node& program,
                       choice_record& how) const override {
    bool const recorded = inner_->choose_recorded(r, data, program, how);
    if (!recorded || how.estimated_bytes <= 0) return recorded;
    double const start = work_clock_ms();
    auto c = classes_program(r, data, how.estimated_bytes);
    double const ms = work_clock_ms() - start;
    how.ms += ms;
    if (c) {
      if (std::getenv("BREVIS_SEARCH_DEBUG")) {
        std::fprintf(stderr, "%s: classes by %s, est %.0f (was %.0f)\n",
                     r.name.c_str(), c->rows ? "rows" : "columns",
                     c->estimated_bytes, how.estimated_bytes);
      }
      program = std::move(c->program);
      how.estimated_bytes = c->estimated_bytes;
      how.expansions = 0;
    }
    return true;
  }

  std::vector<uint64_t> cut_points(region const& r,
                                   byte_view data) const override {
    return inner_->cut_points(r, data);
  }
  std::string summary() const override { return inner_->summary(); }

  std::unique_ptr<program_chooser> for_file(
      byte_view file, std::span<region const> regions) const override {
    auto inner = inner_->for_file(file, regions);
    if (!inner) return nullptr;
    return std::make_unique<classes_chooser>(std::move(inner));
  }

 private:
  std::unique_ptr<program_chooser> inner_;
};

}  // namespace

std::unique_ptr<program_chooser> with_classes(
    std::unique_ptr<program_chooser> inner) {
  return std::make_unique<classes_chooser>(std::move(inner));
}

}  // namespace brevis::codec::search
