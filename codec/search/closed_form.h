#pragma once
// Choosing a 16-bit float tensor's program without a search. The region's
// 16-bit histogram is a sufficient statistic for every order-0 program of
// its elements: their own or the file's static table, rANS order 0, and the
// same leaves on their byte planes or float fields (the histograms' marginals).
// Their sizes follow in closed form, in O(distinct values), with no sample
// and no trial encode. So are sparse's over such programs of the nonzero
// values (their histogram: the elements' without 0), its mask costed from
// its bytes' histogram (one pass). Only operators that see order or
// position (runs, repeat, xor_row, zstd's matches) or a small alphabet
// (palette, low_zero) can do better; a gate of cheap statistics sends the
// regions where they might to the search.

#include <limits>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "codec/choose/histogram.h"
#include "codec/dsl/program.h"
#include "codec/search/production.h"

namespace brevis::codec::search {

/// Payload bytes of a leaf closing a value whose whole histogram is
/// `counts` (dense, indexed by value; `width` bytes per lane), coded in
/// `chunks` archive chunks. Infinity where the leaf cannot code it.
/// Estimates: rans0's entropy plus its tables, rans_static's own table
/// (estimate_table_bytes); raw, zero and constant are exact.
double leaf_bytes_from_counts(opcode leaf, std::span<uint64_t const> counts,
                              unsigned width, double chunks);

struct closed_form_choice {
  node program;  // its static tables built (from the region's histogram)
  double estimated_bytes = 0;
  double table_ms =
      0;  // time (work_clock.h) building those tables (encoding work)
  // The precisions of the winner's children's tables (0: the standard),
  // until they are built: of the elements' split, or of sparse's nonzero
  // values' split.
  std::vector<unsigned> scales;
  // The precision of the elements' own table, when it wins (0: the
  // standard), until it is built.
  unsigned element_scale = 0;
  // A sparse winner's mask: its bytes' histogram and its table's precision,
  // until its table is built.
  std::vector<uint64_t> mask_counts;
  unsigned mask_scale = 0;
};

/// A split of 16-bit floats (planes, fields or bitfields, each child closed
/// by its leaf) as the closed form weighs it: its estimated bytes, its
/// entropy-coded leaves (each a rANS step per element to decode), and its
/// place in the search's order (planes 0, fields 1, bitfields 2).
struct split_candidate {
  double bytes;
  unsigned streams;
  unsigned rank;
};

/// How far above the smallest a split of fewer streams may be estimated
/// and still be chosen. Fields' sign and exponent as two rans0 streams
/// against bitfields' one static table of the joint symbol come within a
/// few bytes on small bf16 tensors, where the estimates often put fields
/// ahead: with the margin, ckpt-300m in the store decoded with 3-5% less
/// CPU for 0.019% more bytes, the corpus archives 0.003% larger.
inline constexpr double split_stream_margin = 0.005;

/// Among the candidates within split_stream_margin of the smallest: the
/// fewest streams, then the fewest bytes, then the lowest rank. Returns its
/// index (c.size() when `c` is empty).
size_t pick_split(std::span<split_candidate const> c);

/// The smallest precision a table of the 16-bit elements of histogram `h`
/// may take under region_input::small_table_margin: below the standard
/// (rans_static_scale_for's), down to 2^smallest_table_scale, each step
/// down while the table's estimated bytes stay within `margin` of the
/// standard's. 0: the standard. `extra` (if given): the bytes it adds.
/// Alphabets of up to fast_table_symbols that choose_rans_static gives its
/// fast table (2^fast_table_scale slots) keep it.
unsigned smaller_table_scale(sparse_hist const& h, double margin,
                             double* extra = nullptr);
inline constexpr unsigned smallest_table_scale = 14;

/// The blob of a table of the 16-bit elements of histogram `h` at precision
/// 2^scale (0: choose_rans_static's).
bytes own_table_blob(sparse_hist const& h, unsigned scale);

/// The closed form's candidates that the file's shared table does not
/// change, costed from the region's marginals `mg` (while they are at
/// hand: the file computes them once, for its tables and the gate).
struct closed_form_parts {
  node elements;  // the elements closed by raw, zero, constant or rans0
  double elements_bytes = 0;
  node split;  // the best of their planes, fields and bitfields
  double split_bytes = std::numeric_limits<double>::infinity();
  // The bytes region_input's wide preference adds to split_bytes and
  // sparse_bytes, which weigh every leaf at its least.
  double split_extra = 0;
  std::vector<unsigned> split_scales;
  double terms = 0;  // the marginals' sum of c log2 c
  // Where a tenth of the elements or more are zero: sparse, its mask and
  // its nonzero values closed by the best of the same order-0 candidates
  // (their histogram is the elements' without 0). Its mask's bytes and
  // table precision are held for build_closed_form_tables.
  node sparse;
  double sparse_bytes = std::numeric_limits<double>::infinity();
  double sparse_extra = 0;
  std::vector<unsigned> sparse_scales;
  std::vector<uint64_t> mask_counts;
  unsigned mask_scale = 0;
};
closed_form_parts closed_form_costs(region_input const& in,
                                    float16_marginals const& mg);

/// The winner among `parts` (sparse included), the file's shared table
/// (in.tables) and the elements' own table, its static tables not yet built.
closed_form_choice closed_form_decide(region_input const& in,
                                      closed_form_parts parts);

/// Builds the empty static tables of `choice` (closed_form_decide's) from the
/// region's histogram `h` (elements of meaning `m`; sparse's values from h
/// without 0, its mask from choice.mask_counts): encoding work.
void build_closed_form_tables(closed_form_choice& choice, sparse_hist const& h,
                              meaning m);

/// Why the gate sent a region to the search (for tests and the trace), or
/// none when the closed form decides it.
enum class gate_reason : uint8_t {
  none,
  not_float16,   // not a bf16/fp16 tensor region with a known histogram
  few_values,    // <= 256 distinct values: a palette may win
  zeros,         // >= 10% zero elements: sparse may win
  low_zero,      // the elements' low bit is always zero
  no_singleton,  // every value occurs twice or more: it may repeat a period
  runs,          // neighbours often equal: runs may win
  rows,          // elements often equal the one a row above: xor_row
  words,         // 8-byte words repeat: an LZ coder (zstd) may win
};

/// The reason's name, for traces ("rows").
std::string_view gate_reason_name(gate_reason g);

/// The gate alone: whether `in` needs a search, and why.
gate_reason closed_form_gate(region_input const& in);

/// The gate without its checks of the elements' alphabet (few_values,
/// zeros): none when only their alphabet sent `in` to the search.
gate_reason closed_form_order_gate(region_input const& in);

/// The fewest bytes in which an order-0 coder could code the elements of a
/// bf16/fp16 region of marginals `mg` (in.root_hist's): as they are, and
/// split by sparse into its mask (the mask bytes' entropy, as the search
/// costs them) and nonzero values. Entropies alone, no tables; a palette's
/// indices have the elements' entropy.
struct order0_floor {
  double elements = 0;
  double sparse = 0;  // the elements' where no element is zero
};
order0_floor order0_floor_bytes(region_input const& in,
                                float16_marginals const& mg);

/// The best order-0 program of a bf16/fp16 tensor region whose whole
/// histogram (in.root_hist) is known, or nothing when the gate says a
/// search may find better. With `gated`, the caller has already checked
/// closed_form_gate.
std::optional<closed_form_choice> closed_form_program(region_input const& in,
                                                      bool gated = false);

}  // namespace brevis::codec::search
