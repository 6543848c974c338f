// The candidate chooser: per region dtype, a handful of programs that capture
// the structure tensors commonly have (whole-word entropy of 16-bit floats,
// byte planes, upcast zero bits, few distinct values, constants). Each
// candidate is encoded on a sample of the region and the one with the
// smallest estimated total (program bytes + payload scaled to the region)
// wins. The synthesis search will replace this behind program_chooser.

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "codec/choose/chooser.h"
#include "codec/choose/histogram.h"
#include "codec/choose/literals.h"
#include "codec/choose/sample.h"
#include "codec/choose/shared_tables.h"
#include "codec/dsl/interpreter.h"
#include "codec/entropy/histogram.h"
#include "codec/entropy/rans_static.h"
#include "codec/leaves/rans_static.h"

namespace brevis::codec {
namespace {

node leaf(opcode op, std::vector<uint64_t> params = {}) {
  return make_leaf(op, std::move(params));
}

// view<width, meaning>(inner, raw tail)
node view(unsigned width, meaning m, node inner) {
  return make_op(opcode::view, {width, static_cast<uint64_t>(m)},
                 {std::move(inner), leaf(opcode::raw)});
}

node planes_rans0(unsigned width) {
  std::vector<node> kids(width, leaf(opcode::rans0));
  return make_op(opcode::planes, {}, std::move(kids));
}

meaning meaning_of(dtype t) {
  switch (t) {
    case dtype::bf16:
      return meaning::bf16;
    case dtype::f16:
      return meaning::fp16;
    case dtype::f32:
      return meaning::fp32;
    case dtype::f64:
      return meaning::fp64;
    case dtype::f8_e4m3:
      return meaning::f8e4m3;
    case dtype::f8_e5m2:
      return meaning::f8e5m2;
    case dtype::i8:
    case dtype::i16:
    case dtype::i32:
    case dtype::i64:
      return meaning::sint;
    default:
      return meaning::uint;
  }
}

stream lane_stream(byte_view data, unsigned width, meaning m) {
  size_t const n = data.size() / width * width;
  return {bytes(data.begin(), data.begin() + n),
          value_type{static_cast<uint8_t>(width), m}};
}

bool all_bytes_equal(byte_view data) {
  return std::all_of(data.begin(), data.end(),
                     [&](uint8_t b) { return b == data.front(); });
}

// The 16-bit halves of 32-bit lanes: hi = bits 16..31.
stream high_halves(byte_view data) {
  size_t const n = data.size() / 4;
  stream s{bytes(n * 2), value_type{2, meaning::uint}};
  for (size_t i = 0; i < n; ++i) {
    uint32_t v = load_le<uint32_t>(data.data() + 4 * i);
    store_le<uint16_t>(s.data.data() + 2 * i, static_cast<uint16_t>(v >> 16));
  }
  return s;
}

bool low_bits_zero(byte_view data, unsigned k) {
  uint32_t const mask = (1u << k) - 1;
  size_t const n = data.size() / 4;
  for (size_t i = 0; i < n; ++i) {
    if (load_le<uint32_t>(data.data() + 4 * i) & mask) return false;
  }
  return true;
}

struct candidate {
  node program;
  double discount = 0;  // program bytes stored once for the file
  // Payload bytes for the whole region when known without a trial encode
  // (a static table's cost follows from the histogram).
  std::optional<double> payload = std::nullopt;
};

// Fraction of lanes that repeat their predecessor, on up to 64 Ki lanes.
template <typename T>
double repeat_fraction(byte_view data) {
  size_t const n = std::min<size_t>(data.size() / sizeof(T), 65536);
  size_t same = 0;
  for (size_t i = 1; i < n; ++i) {
    same += load_le<T>(data.data() + i * sizeof(T)) ==
            load_le<T>(data.data() + (i - 1) * sizeof(T));
  }
  return n < 2 ? 0 : static_cast<double>(same) / static_cast<double>(n - 1);
}

// Sparse tensors (runs of zeros, pruned channels): runs of equal lanes, the
// run values and lengths (mostly 1, so their high bytes cost nearly nothing)
// as byte planes.
node runs_candidate(unsigned width, meaning m) {
  return view(
      width, m,
      make_op(opcode::runs, {}, {planes_rans0(width), planes_rans0(4)}));
}

// ---- sparse tensors: nonzero mask + nonzero values (FORMAT.md 4.5) ----
// Pruned weights have their zeros scattered: a bit mask (rans0 codes its
// bytes at about H(p) bits an element) and the nonzero values on their own,
// as byte planes or with a table of the nonzero values only.
constexpr double min_sparse_zero_fraction = 0.1;

node sparse_of(unsigned width, meaning m, node values) {
  return view(
      width, m,
      make_op(opcode::sparse, {}, {leaf(opcode::rans0), std::move(values)}));
}

// For 16-bit lanes with histogram `h`, when enough of them are zero.
std::vector<candidate> sparse_candidates16(sparse_hist const& h, meaning m) {
  std::vector<candidate> out;
  if (h.empty() || h.front().first != 0) return out;
  uint64_t n = 0;
  for (auto const& [s, c] : h) n += c;
  uint64_t const zeros = h.front().second;
  if (zeros < min_sparse_zero_fraction * static_cast<double>(n) || zeros == n) {
    return out;
  }
  out.push_back({sparse_of(2, m, planes_rans0(2))});
  if (n - zeros >= min_static_table_region / 2) {
    std::vector<uint32_t> symbols;
    std::vector<uint64_t> counts;
    for (size_t i = 1; i < h.size(); ++i) {
      symbols.push_back(h[i].first), counts.push_back(h[i].second);
    }
    node t = make_leaf(opcode::rans_static);
    t.blob =
        serialize_rans_static_table(choose_rans_static_table(symbols, counts));
    out.push_back({sparse_of(2, m, std::move(t))});
  }
  return out;
}

std::vector<node> sparse_candidates32(byte_view data) {
  size_t const n = data.size() / 4;
  size_t zeros = 0;
  for (size_t i = 0; i < n; ++i) {
    zeros += load_le<uint32_t>(data.data() + 4 * i) == 0;
  }
  if (zeros < min_sparse_zero_fraction * static_cast<double>(n) || zeros == n) {
    return {};
  }
  return {sparse_of(4, meaning::fp32, planes_rans0(4))};
}
// ---- end sparse tensors ----

std::vector<candidate> float16_candidates(byte_view data, meaning m,
                                          sparse_hist const* known) {
  std::vector<candidate> out;
  if (repeat_fraction<uint16_t>(data) > 0.05)
    out.push_back({runs_candidate(2, m)});
  sparse_hist const h = known ? *known : sparse_histogram(data);
  // A table of its own, where estimates say it can beat byte planes (it
  // costs about half a byte per distinct value).
  double const planes = estimate_planes_bytes(h);
  bool try_planes = true;
  if (data.size() >= min_static_table_region &&
      estimate_own_table_bytes(h) < 1.01 * planes) {
    own_table t = own_table_leaf(h);
    candidate own{view(2, m, std::move(t.leaf)), 0, t.payload_bytes};
    // The own table's cost is exact, byte planes' an estimate: their trial
    // encode is skipped only where the table wins clearly.
    double const own_bytes =
        *own.payload +
        static_cast<double>(serialize_program(own.program).size());
    try_planes = own_bytes > 0.97 * planes;
    out.push_back(std::move(own));
  }
  if (try_planes) out.push_back({view(2, m, planes_rans0(2))});
  for (candidate& c : sparse_candidates16(h, m)) out.push_back(std::move(c));
  if (h.size() <= 256) {
    out.push_back({view(2, m,
                        make_op(opcode::palette, {1},
                                {leaf(opcode::raw), leaf(opcode::rans0)}))});
  }
  return out;
}

std::vector<node> float32_candidates(byte_view data) {
  std::vector<node> out;
  meaning const m = meaning::fp32;
  // Sign, exponent and the top 7 mantissa bits: coded as whole 16-bit words
  // when the region is large enough to pay for a static table, else as bytes.
  node const high = data.size() >= 2 * min_static_table_region
                        ? make_rans_static(high_halves(data), 2)
                        : planes_rans0(2);
  if (low_bits_zero(data, 16)) {
    // fp32 upcast from bf16: only the high halves carry information.
    out.push_back(view(4, m, make_op(opcode::low_zero, {16}, {high})));
  } else if (low_bits_zero(data, 13)) {
    // fp32 upcast from fp16: 19 informative bits; the top 16 of them are the
    // high halves of the original lanes.
    out.push_back(view(
        4, m,
        make_op(opcode::low_zero, {13},
                {make_op(opcode::bitfields, {3, 16, 13},
                         {leaf(opcode::rans0), high, leaf(opcode::zero)})})));
  }
  out.push_back(view(
      4, m, make_op(opcode::bitfields, {16, 16}, {planes_rans0(2), high})));
  out.push_back(view(4, m, planes_rans0(4)));
  for (node& c : sparse_candidates32(data)) out.push_back(std::move(c));
  if (repeat_fraction<uint32_t>(data) > 0.05)
    out.push_back(runs_candidate(4, m));
  if (distinct32_up_to(data, 256) <= 256) {
    out.push_back(view(4, m,
                       make_op(opcode::palette, {1},
                               {leaf(opcode::raw), leaf(opcode::rans0)})));
  }
  return out;
}

std::vector<node> integer_candidates(byte_view data, unsigned width,
                                     meaning m) {
  std::vector<node> out;
  if (width == 1) {
    out.push_back(leaf(opcode::rans0));
    out.push_back(leaf(opcode::rans1));
    return out;
  }
  out.push_back(view(width, m, planes_rans0(width)));
  if (width == 2 && data.size() >= min_static_table_region) {
    out.push_back(
        view(2, m, make_rans_static(lane_stream(data, 2, meaning::uint), 2)));
  }
  // Index-like and smooth integers: differences are small.
  std::vector<node> kids(width, leaf(opcode::rans0));
  out.push_back(
      view(width, m,
           make_op(opcode::delta, {},
                   {make_op(opcode::map, {0, 0},
                            {make_op(opcode::planes, {}, std::move(kids))})})));
  return out;
}

std::vector<candidate> plain(std::vector<node> nodes) {
  std::vector<candidate> out;
  for (node& n : nodes) out.push_back({std::move(n), 0});
  return out;
}

std::vector<candidate> candidates_for(region const& r, byte_view data,
                                      sparse_hist const* known = nullptr) {
  std::vector<candidate> out;
  // Tiny regions: nothing beats the bytes themselves.
  if (data.size() <= 16) return plain({leaf(opcode::raw)});
  if (r.kind == region_kind::tensor) {
    unsigned const width = dtype_width(r.type);
    meaning const m = meaning_of(r.type);
    switch (r.type) {
      case dtype::bf16:
      case dtype::f16:
        out = float16_candidates(data, m, known);
        break;
      case dtype::f32:
        out = plain(float32_candidates(data));
        break;
      case dtype::f64:
        out.push_back({view(8, m, planes_rans0(8))});
        break;
      case dtype::none:
        break;
      default:
        if (width > 0) out = plain(integer_candidates(data, width, m));
        break;
    }
    if (r.type == dtype::none || dtype_width(r.type) == 0) {
      // Untyped tensor bytes: guess the common element widths.
      out.push_back({leaf(opcode::rans0)});
      out.push_back({view(2, meaning::uint, planes_rans0(2))});
      out.push_back({view(4, meaning::uint, planes_rans0(4))});
    }
  }
  out.push_back({leaf(opcode::zstd, {data.size() < (1u << 20) ? 9u : 3u})});
  out.push_back({leaf(opcode::raw)});
  return out;
}

// Evenly spaced slices of the region, 64 KiB + 1/32 of it in total, so that
// choosing costs a small fraction of encoding; small regions are used whole.
bytes sample_of(byte_view data, unsigned width) {
  return sample_slices(data, width, (64u << 10) + data.size() / 32);
}

// Picks the cheapest candidate on a sample: program bytes (less what the
// file shares) plus the payload scaled to the region.
node choose_among(std::vector<candidate> cands, byte_view data,
                  unsigned width) {
  bytes const sample = sample_of(data, std::max(1u, width));
  double const scale =
      static_cast<double>(data.size()) / static_cast<double>(sample.size());
  double best_cost = std::numeric_limits<double>::infinity();
  node best = fallback_program();
  for (candidate& c : cands) {
    double payload_bytes = 0;
    if (c.payload) {
      payload_bytes = *c.payload;
    } else {
      // zstd's stored level costs ~10x level 1 to try: the trial uses level
      // 1 and the stored level keeps its (smaller) size if it wins.
      node const* trial = &c.program;
      node cheap;
      if (c.program.op == opcode::zstd && !c.program.params.empty() &&
          c.program.params[0] > 1) {
        cheap = leaf(opcode::zstd, {1});
        trial = &cheap;
      }
      bytes payload;
      try {
        encode_chunk(*trial, sample, payload);
      } catch (error const& e) {
        if (e.code() == errc::domain) continue;
        throw;
      }
      payload_bytes = static_cast<double>(payload.size()) * scale;
    }
    double const cost =
        static_cast<double>(serialize_program(c.program).size()) - c.discount +
        payload_bytes;
    if (cost < best_cost) {
      best_cost = cost;
      best = std::move(c.program);
    }
  }
  return best;
}

node trivial_program(byte_view data) {
  if (data.empty()) return leaf(opcode::raw);
  return data.front() == 0 ? leaf(opcode::zero) : leaf(opcode::constant);
}

// The chooser for one file: the plain candidates, plus a file-level table
// per 16-bit float dtype that small tensors can share.
class file_chooser final : public program_chooser {
 public:
  file_chooser(byte_view file, std::span<region const> regions)
      : tables_(file, regions), literals_(literal_regions(regions)) {}

  node choose(region const& r, byte_view data) const override {
    if (data.empty() || all_bytes_equal(data)) return trivial_program(data);
    // The histograms and estimates of the constructor hold only when
    // `data` is the whole region it saw.
    bool const whole = data.size() == r.length;
    if (whole && literals_.contains(r.offset)) return literal_program(data);
    sparse_hist const* h = tables_.histogram_of(r.offset);
    std::vector<candidate> cands = candidates_for(
        r, data, whole && file_tables::shared_kind(r) >= 0 ? h : nullptr);
    auto const use = tables_.table_for(r.offset);
    if (file_tables::shared_kind(r) >= 0 && use && data.size() > 16) {
      node p = view(2, meaning_of(r.type), *use->leaf);
      double const discount =
          static_cast<double>(use->leaf->blob.size()) - use->blob_share;
      cands.push_back(
          {std::move(p), discount,
           whole ? std::optional<double>(use->payload_bytes) : std::nullopt});
    }
    return choose_among(std::move(cands), data, dtype_width(r.type));
  }

 private:
  file_tables tables_;
  std::unordered_set<uint64_t> literals_;  // region offsets
};

class candidate_chooser final : public program_chooser {
 public:
  explicit candidate_chooser(table_sharing sharing) : sharing_(sharing) {}

  node choose(region const& r, byte_view data) const override {
    if (data.empty() || all_bytes_equal(data)) return trivial_program(data);
    return choose_among(candidates_for(r, data), data, dtype_width(r.type));
  }

  std::unique_ptr<program_chooser> for_file(
      byte_view file, std::span<region const> regions) const override {
    if (sharing_ == table_sharing::per_region) return nullptr;
    return std::make_unique<file_chooser>(file, regions);
  }

 private:
  table_sharing sharing_;
};

}  // namespace

std::unique_ptr<program_chooser> make_candidate_chooser(table_sharing sharing) {
  return std::make_unique<candidate_chooser>(sharing);
}

}  // namespace brevis::codec
