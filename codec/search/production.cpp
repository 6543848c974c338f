#include "codec/search/production.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "codec/core/bytes.h"

namespace brevis::codec::search {
namespace {

bool is_bytes(value_info const& v) {
  return v.depth == 0 && v.sample.type == bytes_type;
}
bool is_int(meaning m) {
  return m == meaning::none || m == meaning::uint || m == meaning::sint;
}
unsigned width(value_info const& v) { return v.sample.type.width; }

// Entropy in bits of the field [lo, lo + bits) of 16-bit lanes.
double field_entropy(byte_view sample, unsigned lo, unsigned bits) {
  std::vector<uint64_t> h(size_t{1} << bits, 0);
  size_t const n = sample.size() / 2;
  for (size_t i = 0; i < n; ++i) {
    ++h[(load_le<uint16_t>(sample.data() + 2 * i) >> lo) & ((1u << bits) - 1)];
  }
  double e = 0;
  for (uint64_t c : h) {
    if (c) e -= static_cast<double>(c) * std::log2(static_cast<double>(c) / n);
  }
  return n ? e / static_cast<double>(n) : 0;
}

// The meaning of untyped 16-bit lanes. A float's sign and exponent field has
// low entropy and is nearly independent of its mantissa, so splitting the
// lanes at the right mantissa boundary loses little (the sum of the fields'
// entropies is least). bf16 data split at fp16's boundary puts exponent bits
// in the mantissa and loses their correlation; fp16 data splits equally well
// at both (bf16's field takes 3 uniform mantissa bits), so fp16, the longer
// mantissa, is preferred unless bf16 is clearly better. Neither: uint.
meaning guess_meaning16(byte_view sample) {
  double const bytes =
      field_entropy(sample, 0, 8) + field_entropy(sample, 8, 8);
  double const bf16_top = field_entropy(sample, 7, 9);
  double const fp16_top = field_entropy(sample, 10, 6);
  double const bf16 = field_entropy(sample, 0, 7) + bf16_top;
  double const fp16 = field_entropy(sample, 0, 10) + fp16_top;
  bool const is_bf16 = bf16 + 0.05 < fp16;
  double const split = is_bf16 ? bf16 : fp16;
  double const top = is_bf16 ? bf16_top : fp16_top;
  double const top_bits = is_bf16 ? 9 : 6;
  if (split > bytes + 0.05 || top > top_bits - 2) return meaning::uint;
  return is_bf16 ? meaning::bf16 : meaning::fp16;
}

node view_node(unsigned w, meaning m) {
  return make_op(opcode::view, {w, static_cast<uint64_t>(m)},
                 {open_value(), make_leaf(opcode::raw)});
}

node with_open(opcode op, std::vector<uint64_t> params, size_t kids) {
  return make_op(op, std::move(params), std::vector<node>(kids, open_value()));
}

uint64_t row_length(region_input const& r) {
  auto const& s = r.info.shape;
  return s.size() >= 2 && s.back() > 1 ? s.back() : 0;
}

// ---------------------------------------------------------------- leaves

bool any(value_info const&, region_input const&) { return true; }
bool nonempty(value_info const& v, region_input const&) {
  return v.stats.count > 0;
}
bool all_zero(value_info const& v, region_input const&) {
  return v.stats.count > 0 && v.stats.zero_rate == 1;
}
bool constant(value_info const& v, region_input const&) {
  return v.stats.constant && v.stats.zero_rate < 1;
}
// Order-1 contexts pay for their tables only on large, structured bytes:
// headers, text, 8-bit tensors (the streams operators make are order-0).
bool rans1_fits(value_info const& v, region_input const&) {
  return v.depth <= 1 && v.sample.data.size() >= 16384 &&
         v.stats.byte_entropy > 0.1 && v.stats.byte_entropy < 7.5 &&
         v.sample.type.width == 1;
}
// zstd finds repeats; the streams that operators produce are for the
// entropy coders.
constexpr size_t zstd_tensor_limit = 64u << 10;
bool zstd_fits(value_info const& v, region_input const& r) {
  if (v.sample.data.size() < 64 || v.depth > 1) return false;
  // In typed tensors, only on the region's bytes and elements (one trial,
  // shared): zstd on another operator's output (runs' values and lengths)
  // won nowhere but in a few small int32 tensors and two fp16 runs of
  // zeros, and its trials were a third of zstd's in the learning searches
  // (corpus 430,547,487 -> 430,548,041 B, centernet.fp16 +1,246 B;
  // blazepose-detector.bf16.pt compress 425.4 -> 411.7 M instructions).
  // Not admissible: a pruned trial is not known to lose.
  if (v.depth == 1 && v.parent != opcode::view &&
      r.info.kind == region_kind::tensor && r.info.type != dtype::none) {
    return false;
  }
  // Nor on tensors past 64 KiB: on the corpus (164 files) zstd won no
  // tensor larger than 51,216 B and lost 344 trials above 64 KiB (26 MB of
  // samples coded; 5-13% of compressing handtrack.fp32 and
  // blazepose-detector fp16/fp32). All files 426,870,623 -> 426,872,086 B
  // (+0.0003%), none more than +0.03% (recorded timings' noise).
  if (r.info.kind == region_kind::tensor && r.info.type != dtype::none &&
      r.data.size() > zstd_tensor_limit) {
    return false;
  }
  // Tensors: only where words repeat (an entropy coder finds the rest).
  return r.info.kind != region_kind::tensor || r.info.type == dtype::none ||
         v.stats.word_repeats > 0.02;
}
bool static_fits(value_info const& v, region_input const& r) {
  size_t const total = v.whole.empty() ? r.data.size() : v.whole.size();
  return width(v) <= 2 && total >= min_static_table_region && !v.stats.constant;
}
bool shared_fits(value_info const& v, region_input const& r) {
  return width(v) == 2 && v.depth == 1 && !v.whole.empty() && r.tables &&
         r.tables->table_for(r.info.offset).has_value();
}

void plain_leaf_of(opcode op, std::vector<node>& out) {
  out.push_back(make_leaf(op));
}
void gen_raw(value_info const&, region_input const&, std::vector<node>& o) {
  plain_leaf_of(opcode::raw, o);
}
void gen_zero(value_info const&, region_input const&, std::vector<node>& o) {
  plain_leaf_of(opcode::zero, o);
}
void gen_const(value_info const&, region_input const&, std::vector<node>& o) {
  plain_leaf_of(opcode::constant, o);
}
void gen_rans0(value_info const&, region_input const&, std::vector<node>& o) {
  plain_leaf_of(opcode::rans0, o);
}
void gen_rans1(value_info const&, region_input const&, std::vector<node>& o) {
  plain_leaf_of(opcode::rans1, o);
}
void gen_zstd(value_info const&, region_input const& r, std::vector<node>& o) {
  o.push_back(make_leaf(opcode::zstd, {r.data.size() < (1u << 20) ? 9u : 3u}));
}
// A table of the value's own: the blob stays empty and the chosen program's
// tables are fitted to the whole region afterwards (at the region's 16-bit
// elements the cost model knows the table's cost from the region's
// histogram, without building it).
void gen_static(value_info const&, region_input const&, std::vector<node>& o) {
  o.push_back(make_leaf(opcode::rans_static));
}
void gen_shared(value_info const&, region_input const& r,
                std::vector<node>& o) {
  o.push_back(*r.tables->table_for(r.info.offset)->leaf);
}

// ---------------------------------------------------------------- operators

// Tensors, and large untyped regions (an unknown file, a raw dump), whose
// element width is then searched; headers and small opaque bytes stay bytes.
bool view_fits(value_info const& v, region_input const& r) {
  if (!is_bytes(v) || v.sample.data.size() < 16) return false;
  return r.info.kind == region_kind::tensor ||
         (r.info.type == dtype::none && r.data.size() >= (64u << 10));
}
void gen_view(value_info const& v, region_input const& r,
              std::vector<node>& o) {
  unsigned const w = dtype_width(r.info.type);
  if (w > 1 || (w == 1 && meaning_of(r.info.type) != meaning::uint)) {
    o.push_back(view_node(w, meaning_of(r.info.type)));
    return;
  }
  if (w == 1) return;  // plain bytes: the leaves code them directly
  // Untyped: the element width is part of the search.
  o.push_back(view_node(2, guess_meaning16(v.sample.data)));
  o.push_back(view_node(4, meaning::uint));
  o.push_back(view_node(4, meaning::fp32));
}

bool fields_fits(value_info const& v, region_input const&) {
  meaning const m = v.sample.type.kind;
  return is_float(m) && meaning_width(m) == width(v) && v.stats.count > 0;
}
bool planes_fits(value_info const& v, region_input const&) {
  return width(v) >= 2 && v.stats.count > 0 && v.parent != opcode::planes;
}
// Differences of integer elements, or of columns once transposed.
bool delta_fits(value_info const& v, region_input const&) {
  bool const where = (v.depth == 1 && is_int(v.sample.type.kind)) ||
                     v.parent == opcode::transpose;
  return where && v.stats.count > 1 && !v.stats.constant;
}
bool row_fits(value_info const& v, region_input const& r) {
  uint64_t const cols = row_length(r);
  return v.depth == 1 && !v.whole.empty() && cols > 0 &&
         v.stats.count >= 2 * cols;
}
void gen_row(opcode op, region_input const& r, std::vector<node>& o) {
  o.push_back(with_open(op, {row_length(r)}, 1));
}
void gen_xor_row(value_info const&, region_input const& r,
                 std::vector<node>& o) {
  gen_row(opcode::xor_row, r, o);
}
void gen_transpose(value_info const&, region_input const& r,
                   std::vector<node>& o) {
  gen_row(opcode::transpose, r, o);
}
// Transposing only reorders: it pays when differences follow (integers),
// while order-0 coders of floats see the same histogram.
bool transpose_fits(value_info const& v, region_input const& r) {
  return row_fits(v, r) && is_int(v.sample.type.kind);
}
void gen_delta(value_info const&, region_input const&, std::vector<node>& o) {
  o.push_back(with_open(opcode::delta, {}, 1));
}
void gen_fields(value_info const&, region_input const&, std::vector<node>& o) {
  o.push_back(with_open(opcode::fields, {}, 3));
}
void gen_planes(value_info const& v, region_input const&,
                std::vector<node>& o) {
  o.push_back(with_open(opcode::planes, {}, width(v)));
}
bool zigzag_fits(value_info const& v, region_input const&) {
  // Differences and signed integers: small magnitudes of either sign.
  bool const where = (v.depth == 1 && v.sample.type.kind == meaning::sint) ||
                     v.parent == opcode::delta;
  return where && !v.stats.constant && v.stats.count > 0 &&
         v.sample.type.width >= 2;
}
void gen_zigzag(value_info const&, region_input const&, std::vector<node>& o) {
  o.push_back(with_open(opcode::map, {0, 0}, 1));
}
// The whole value's distinct elements, where its histogram is known: a
// sample of slices may miss the rarer ones (centernet's squeeze-excite
// weights, 64 slices: a palette program estimated at 14,121 B fell back to
// 25,901 B on the chunk of more than 256 values).
size_t whole_distinct(value_info const& v, region_input const& r) {
  if (v.whole_hist != nullptr && !v.whole_hist->empty()) {
    return v.whole_hist->size();
  }
  if (v.depth == 1 && !v.whole.empty() && width(v) == 2 &&
      r.root_hist != nullptr && !r.root_hist->empty()) {
    return r.root_hist->size();
  }
  return v.stats.distinct;
}
bool palette_fits(value_info const& v, region_input const& r) {
  return width(v) >= 2 && v.stats.distinct <= 256 && !v.stats.constant &&
         v.stats.count >= 64 && v.parent != opcode::palette &&
         whole_distinct(v, r) <= 256;
}
void gen_palette(value_info const&, region_input const&, std::vector<node>& o) {
  o.push_back(with_open(opcode::palette, {1}, 2));
}
// Runs of 2.5 elements on average at least: shorter runs, which the bf16
// fields and bytes of weights have (repeat rates of 0.2 to 0.3), leave
// nearly as many values as elements plus their lengths, and the search's
// trials of them (the runs encode and a count over the whole region) were a
// third of learning handlandmark-full.bf16's prior. The 164 corpus files:
// 0.05 coded 426,690,253 B, 0.25 426,676,208, 0.4 426,676,753, 0.6
// 426,668,071 (no file 0.01% larger), 0.8 426,668,255.
bool runs_fits(value_info const& v, region_input const&) {
  return v.stats.repeat_rate > 0.6 && v.stats.count > 1 &&
         v.parent != opcode::runs;
}
void gen_runs(value_info const&, region_input const&, std::vector<node>& o) {
  o.push_back(with_open(opcode::runs, {}, 2));
}
// Zero low bits of the region's elements (fp32 upcast), checked on the
// whole region.
bool low_zero_fits(value_info const& v, region_input const&) {
  return width(v) >= 2 && v.depth == 1 && !v.whole.empty() &&
         v.stats.low_zero > 0 && !v.stats.constant;
}
void gen_low_zero(value_info const& v, region_input const&,
                  std::vector<node>& o) {
  o.push_back(with_open(opcode::low_zero, {v.stats.low_zero}, 1));
}
bool bitfields_fits(value_info const& v, region_input const&) {
  return width(v) == 4 && v.stats.count > 0 && !v.stats.constant &&
         v.parent != opcode::bitfields;
}
// 32-bit lanes: the high and low halves; with high bits always zero (after
// low_zero), the top 16 informative bits apart from the rest.
void gen_bitfields(value_info const& v, region_input const&,
                   std::vector<node>& o) {
  unsigned const z = v.stats.high_zero;
  if (z > 0 && z < 16) {
    o.push_back(with_open(opcode::bitfields, {16 - z, 16, z}, 3));
  } else {
    o.push_back(with_open(opcode::bitfields, {16, 16}, 2));
  }
}
// Scattered zeros (pruned weights): a bit mask of the nonzero elements and
// the nonzero elements alone, which then code without the zero symbol. On
// the region's elements only: deeper values (differences, fields) have
// zeros too, but there the order-0 coders already price them well.
bool sparse_fits(value_info const& v, region_input const&) {
  return v.depth == 1 && width(v) >= 2 && v.stats.count > 0 &&
         v.stats.zero_rate >= 0.1 && v.stats.zero_rate < 1;
}
void gen_sparse(value_info const&, region_input const&, std::vector<node>& o) {
  o.push_back(with_open(opcode::sparse, {}, 2));
}
bool repeat_fits(value_info const& v, region_input const&) {
  return v.depth == 1 && !v.whole.empty() && v.stats.period > 0;
}
void gen_repeat(value_info const& v, region_input const&,
                std::vector<node>& o) {
  o.push_back(with_open(opcode::repeat, {v.stats.period}, 1));
}

constexpr production table[] = {
    // Leaves.
    {"raw", opcode::raw, any, gen_raw},
    {"zero", opcode::zero, all_zero, gen_zero},
    {"constant", opcode::constant, constant, gen_const},
    {"rans0", opcode::rans0, nonempty, gen_rans0},
    {"rans1", opcode::rans1, rans1_fits, gen_rans1},
    {"zstd", opcode::zstd, zstd_fits, gen_zstd},
    {"rans_static", opcode::rans_static, static_fits, gen_static},
    {"rans_static_shared", opcode::rans_static, shared_fits, gen_shared},
    // Operators.
    {"view", opcode::view, view_fits, gen_view},
    {"fields", opcode::fields, fields_fits, gen_fields},
    {"planes", opcode::planes, planes_fits, gen_planes},
    {"low_zero", opcode::low_zero, low_zero_fits, gen_low_zero},
    {"bitfields", opcode::bitfields, bitfields_fits, gen_bitfields},
    {"palette", opcode::palette, palette_fits, gen_palette},
    {"runs", opcode::runs, runs_fits, gen_runs},
    {"sparse", opcode::sparse, sparse_fits, gen_sparse},
    {"repeat", opcode::repeat, repeat_fits, gen_repeat},
    {"xor_row", opcode::xor_row, row_fits, gen_xor_row},
    {"transpose", opcode::transpose, transpose_fits, gen_transpose},
    {"delta", opcode::delta, delta_fits, gen_delta},
    {"zigzag", opcode::map, zigzag_fits, gen_zigzag},
};

}  // namespace

std::span<production const> productions() { return table; }

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

}  // namespace brevis::codec::search
