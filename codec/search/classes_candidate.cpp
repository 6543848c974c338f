#include "codec/search/classes_candidate.h"

#include <algorithm>
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
// Groups (columns or rows) times sign|exponent symbols counted: bounds the
// counting's memory (32 MiB).
constexpr size_t max_group_cells = size_t{8} << 20;
// Rows are classed by their index in the chunk: only where the tensor is
// one chunk of the default size.
constexpr uint64_t max_rows_region = uint64_t{1} << 20;
constexpr unsigned class_counts[] = {4, 8};
constexpr int lloyd_rounds = 3;
// The view, its tail and the classes node with its two params.
constexpr double frame_bytes = 6 + 2 + 4;

double c_log2_c(double c) { return c > 0 ? c * std::log2(c) : 0; }

// Per group (a column or a row), counts of each present sign|exponent.
struct groups {
  size_t count = 0;              // groups
  size_t symbols = 0;            // present sign|exponent values
  std::vector<uint32_t> counts;  // count x symbols
  std::vector<double> mean;      // mean exponent per group
  // The nonzero counts, per group: entries [start[j], start[j + 1]).
  std::vector<uint32_t> start;
  std::vector<uint16_t> symbol;
  std::vector<double> weight;
};

void make_sparse(groups& g) {
  g.start.assign(1, 0);
  for (size_t j = 0; j < g.count; ++j) {
    for (size_t s = 0; s < g.symbols; ++s) {
      if (uint32_t const c = g.counts[j * g.symbols + s]) {
        g.symbol.push_back(static_cast<uint16_t>(s));
        g.weight.push_back(c);
      }
    }
    g.start.push_back(static_cast<uint32_t>(g.symbol.size()));
  }
}

// Estimated coded bytes of one class's sign|exponent: entropy, a table
// byte per present value and its rANS states.
double class_cost(std::span<uint64_t const> h) {
  uint64_t n = 0;
  double terms = 0;
  size_t present = 0;
  for (uint64_t c : h) {
    n += c;
    terms += c_log2_c(static_cast<double>(c));
    present += c != 0;
  }
  if (present <= 1) return 2;
  double const bits = c_log2_c(static_cast<double>(n)) - terms;
  return bits / 8 + 4.0 + static_cast<double>(present) +
         (n >= 65536 ? 128 : 32);
}

struct partition {
  std::vector<uint8_t> map;  // class of each group
  unsigned k = 1;
  double cost = 0;  // of the sign|exponents, with the map
};

double partition_cost(groups const& g, std::vector<uint8_t> const& map,
                      unsigned k) {
  std::vector<uint64_t> h(size_t{k} * g.symbols, 0);
  for (size_t j = 0; j < g.count; ++j) {
    uint64_t* dst = &h[map[j] * g.symbols];
    for (uint32_t e = g.start[j]; e < g.start[j + 1]; ++e) {
      dst[g.symbol[e]] += static_cast<uint64_t>(g.weight[e]);
    }
  }
  double cost = static_cast<double>(g.count) * std::log2(k) / 8 + 4;
  for (unsigned c = 0; c < k; ++c) {
    cost += class_cost({&h[c * g.symbols], g.symbols});
  }
  return cost;
}

// k classes: by quantiles of the groups' mean exponent, then refined by
// Lloyd rounds (each group to the class whose histogram codes it in the
// fewest bits). Empty classes are dropped.
partition classify(groups const& g, unsigned k) {
  std::vector<uint32_t> order(g.count);
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return g.mean[a] < g.mean[b];
  });
  std::vector<uint8_t> map(g.count);
  for (size_t i = 0; i < g.count; ++i) {
    map[order[i]] = static_cast<uint8_t>(i * k / g.count);
  }
  std::vector<double> bits(size_t{k} * g.symbols);
  std::vector<double> h(size_t{k} * g.symbols);
  for (int round = 0; round < lloyd_rounds; ++round) {
    std::fill(h.begin(), h.end(), 0.02);
    for (size_t j = 0; j < g.count; ++j) {
      double* dst = &h[map[j] * g.symbols];
      for (uint32_t e = g.start[j]; e < g.start[j + 1]; ++e) {
        dst[g.symbol[e]] += g.weight[e];
      }
    }
    // Symbol-major, so that a group's k costs add up as one vector.
    for (unsigned c = 0; c < k; ++c) {
      double const total = std::accumulate(
          h.begin() + c * g.symbols, h.begin() + (c + 1) * g.symbols, 0.0);
      for (size_t s = 0; s < g.symbols; ++s) {
        bits[s * k + c] = -std::log2(h[c * g.symbols + s] / total);
      }
    }
    bool moved = false;
    std::vector<double> sum(k);
    for (size_t j = 0; j < g.count; ++j) {
      std::fill(sum.begin(), sum.end(), 0.0);
      for (uint32_t e = g.start[j]; e < g.start[j + 1]; ++e) {
        double const* b = &bits[g.symbol[e] * k];
        double const wgt = g.weight[e];
        for (unsigned c = 0; c < k; ++c) sum[c] += wgt * b[c];
      }
      auto const arg = static_cast<uint8_t>(
          std::min_element(sum.begin(), sum.end()) - sum.begin());
      moved |= arg != map[j];
      map[j] = arg;
    }
    if (!moved) break;
  }
  // Renumber the classes in use, in order of first use.
  std::vector<int> id(k, -1);
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

// The counts of both groupings in one pass over the elements.
void count_groups(uint16_t const* w, size_t rows, size_t cols, unsigned shift,
                  std::vector<int16_t> const& index, groups& by_col,
                  groups* by_row) {
  size_t const k = by_col.symbols;
  for (size_t r = 0; r < rows; ++r) {
    uint32_t* rh = by_row ? &by_row->counts[r * k] : nullptr;
    for (size_t j = 0; j < cols; ++j) {
      auto const s = static_cast<size_t>(index[w[r * cols + j] >> shift]);
      ++by_col.counts[j * k + s];
      if (rh) ++rh[s];
    }
  }
}

void set_means(groups& g, std::vector<double> const& exponent_of) {
  g.mean.assign(g.count, 0);
  for (size_t j = 0; j < g.count; ++j) {
    double sum = 0, n = 0;
    for (uint32_t e = g.start[j]; e < g.start[j + 1]; ++e) {
      sum += g.weight[e] * exponent_of[g.symbol[e]];
      n += g.weight[e];
    }
    g.mean[j] = n > 0 ? sum / n : 0;
  }
}

// The elements of each class, in order (the op's encode, on 16-bit lanes),
// in buffers the thread reuses: fresh ones as large as the tensor cost a
// page fault every 4 KiB (10% of blazepose-heavy's compress CPU).
std::vector<bytes>& gather(uint16_t const* w, size_t n, uint64_t stride,
                           std::vector<uint8_t> const& map, unsigned k) {
  auto for_each_run = [&](auto&& run) {
    for (size_t at = 0; at < n;) {
      for (size_t j = 0; j < map.size() && at < n; ++j) {
        size_t const len =
            static_cast<size_t>(std::min<uint64_t>(stride, n - at));
        run(map[j], at, len);
        at += len;
      }
    }
  };
  std::vector<size_t> sizes(k, 0);
  for_each_run([&](uint8_t c, size_t, size_t len) { sizes[c] += len; });
  static thread_local std::vector<bytes> out;
  if (out.size() < k) out.resize(k);
  std::vector<uint8_t*> at(k);
  for (unsigned c = 0; c < k; ++c) {
    out[c].resize(sizes[c] * 2);
    at[c] = out[c].data();
  }
  for_each_run([&](uint8_t c, size_t from, size_t len) {
    std::memcpy(at[c], w + from, len * 2);
    at[c] += len * 2;
  });
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

  // The elements as 16-bit lanes (aligned copy only when unaligned).
  std::vector<uint16_t> copy;
  uint16_t const* w = nullptr;
  if (reinterpret_cast<uintptr_t>(data.data()) % 2 == 0) {
    w = reinterpret_cast<uint16_t const*>(data.data());
  } else {
    copy.resize(n);
    std::memcpy(copy.data(), data.data(), data.size());
    w = copy.data();
  }
  // Present sign|exponent values, indexed densely.
  std::vector<int16_t> index(size_t{1} << (16 - shift), -1);
  std::vector<double> exponent_of;
  for (size_t i = 0; i < n; ++i) index[w[i] >> shift] = 0;
  for (size_t s = 0; s < index.size(); ++s) {
    if (index[s] == 0) {
      index[s] = static_cast<int16_t>(exponent_of.size());
      exponent_of.push_back(static_cast<double>(s & exponent_mask));
    }
  }
  size_t const symbols = exponent_of.size();
  if (symbols < 2 || cols * symbols > max_group_cells) return std::nullopt;
  groups by_col;
  by_col.count = cols;
  by_col.symbols = symbols;
  by_col.counts.assign(cols * symbols, 0);
  bool const try_rows = r.length <= max_rows_region && rows >= 2 &&
                        rows <= 65536 && rows * symbols <= max_group_cells;
  groups by_row;
  if (try_rows) {
    by_row.count = rows;
    by_row.symbols = symbols;
    by_row.counts.assign(rows * symbols, 0);
  }
  count_groups(w, rows, cols, shift, index, by_col,
               try_rows ? &by_row : nullptr);
  // The tail past whole rows (none when the shape is right) is not counted.
  make_sparse(by_col);
  set_means(by_col, exponent_of);
  if (try_rows) {
    make_sparse(by_row);
    set_means(by_row, exponent_of);
  }

  // The best partition by the sign|exponent estimate.
  double const single =
      partition_cost(by_col, std::vector<uint8_t>(cols, 0), 1);
  partition best;
  best.cost = single;
  bool best_rows = false;
  for (bool use_rows : {false, true}) {
    if (use_rows && !try_rows) continue;
    groups const& g = use_rows ? by_row : by_col;
    for (unsigned k : class_counts) {
      if (k >= g.count) break;
      partition p = classify(g, k);
      if (p.k >= 2 && p.cost < best.cost) {
        best = std::move(p);
        best_rows = use_rows;
      }
    }
  }
  // Worth the per-class programs only with a margin: the mantissas' own
  // tables per class are not in the estimate.
  if (best.k < 2 || best.cost > single - 64) return std::nullopt;

  uint64_t const stride = best_rows ? cols : 1;
  std::vector<bytes>& pool = gather(w, n, stride, best.map, best.k);
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

class classes_chooser final : public program_chooser {
 public:
  explicit classes_chooser(std::unique_ptr<program_chooser> inner)
      : inner_(std::move(inner)) {}

  node choose(region const& r, byte_view data) const override {
    node p;
    choice_record how;
    choose_recorded(r, data, p, how);
    return p;
  }

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
