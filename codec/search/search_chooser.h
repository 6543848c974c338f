#pragma once
// The search behind the program_chooser interface: per file, learn the
// production prior on a sample of its regions, then search every region's
// program, siblings starting from their role's program.

#include <memory>

#include "codec/choose/chooser.h"
#include "codec/core/parallel.h"
#include "codec/entropy/rans_static.h"
#include "codec/search/astar.h"

namespace brevis::codec {

enum class prior_kind : uint8_t { learned, uniform };

struct search_chooser_options {
  search::search_options search;
  prior_kind prior = prior_kind::learned;
  table_sharing sharing = table_sharing::per_file;
  // Regions searched (uniform prior) to learn the prior. With bf16/fp16
  // tensors left to the closed form, on the 164 corpus files: 8 gave
  // 430,713,076 B in 26,202 expansions, 10 430,687,336 B in 25,829, 12
  // 430,685,031 B in 26,627, 16 430,709,976 B in 26,985; the uniform prior
  // 430,709,610 B in 27,807.
  size_t learn_regions = 10;
  size_t learn_budget = 1;       // times the budgets, for those
  double sibling_margin = 0.01;  // keep a sibling's program within this
  bool segment = true;           // cut untyped regions where stats change
  // bf16/fp16 tensors with no structure beyond order 0 (closed_form.h's
  // gate) get their program in closed form from their histogram, with no
  // search (and are left out of the prior's learning sample).
  bool closed_form = true;
  // Also try the classes operator on bf16/fp16 tensors (classes_candidate.h):
  // the 82 bf16/fp16 safetensors of the corpus code in 203.5 MB instead of
  // 206.0 MB (99.6% of the order-0 bound's ratio instead of 98.4%).
  bool classes = true;
  // Code the 7-bit mantissa of bf16 elements packed (the bits leaf) instead
  // of by an entropy coder where that costs at most packed_mantissa_margin
  // of the region's bytes (the store: its cold reads are decode-bound).
  // Per-region choosing only (make_search_chooser throws otherwise).
  bool pack_mantissas = false;
  // rans_static payloads interleave 32 states from 2^wide_lanes_log2
  // symbols on (wide_lanes.h); 16, the format's default, writes no
  // parameter. The store: store_wide_lanes_log2.
  unsigned wide_lanes_log2 = rans_static::wide_from_log2;
  // Per-region choosing: the closed form takes rans_static over rans0 for
  // streams of at least 2^wide_lanes_log2 symbols a chunk where it costs at
  // most this share more (region_input::wide_static_margin). The store:
  // store_wide_static_margin.
  double wide_static_margin = 0;
  // Per-region choosing: a table of a tensor's elements themselves (the
  // closed form's or the search's) takes a smaller precision where it costs
  // at most this share more (region_input::small_table_margin). The store:
  // store_small_table_margin.
  double small_table_margin = 0;
  // Runs the passes over a whole file (every bf16/fp16 tensor's count, its
  // closed-form costs and choice) on the caller's threads; empty: serially.
  // The programs are the same either way.
  parallel_ranges parallel;
};

/// The most a packed bf16 mantissa may cost, as a share of its region's
/// estimated bytes, bounded by the mantissa's entropy (a rANS stream costs
/// more). On ckpt-300m (`brevis_program_decode_bench`), under bitfields a
/// packed mantissa decodes in 0.86 ns an element instead of 1.56, for
/// +0.21% of those tensors' bytes. `store add` of ckpt-300m by margin:
/// 0 189,489,275 B, 0.25% 189,507,629, 0.5% and 1% 189,681,396 (+0.10%);
/// `store get -T1` user CPU 290 -> 283 -> 237 ms.
inline constexpr double packed_mantissa_margin = 0.005;

/// The store's wide_lanes_log2: 32 states from 4096 symbols on. On
/// ckpt-300m (Zen 5, AVX-512), `store get -T1` CPU 232 -> 204 ms (best of
/// 5, alternated) for +55,562 B (+0.03%) of packs; 2^11 and 2^13 measured
/// no better.
inline constexpr unsigned store_wide_lanes_log2 = 12;

/// The store's small_table_margin: a bf16/fp16 tensor's own table of whole
/// 16-bit words takes 2^15 or 2^14 slots instead of 2^16 where that costs
/// at most 0.5% more. `store add` of ckpt-300m (Zen 4): packs 176,755,587
/// -> 177,012,797 B (+0.145%); `store get -T1` CPU -4.3% (223.6 -> 213.9
/// and 240.9 -> 230.6 ms, medians of 8 alternated runs, pinned, an hour
/// apart): the 59 M symbols decoded from tables of 2^16 slots are now
/// 1.8 M. A 1% margin: -6.6% for +0.215%.
/// Like store_search_budget, every writer of a store must use the same
/// value, or a tensor stored again codes to another payload.
inline constexpr double store_small_table_margin = 0.005;

/// The store's wide_static_margin. `store add` of ckpt-300m (bf16): packs
/// 176,766,500 -> 176,755,587 B, `store get -T1` 1.6-4% less CPU (three
/// alternated runs, the least of 16-20 each; e.g. 222.0 -> 218.4 ms
/// median of the five least); of four fp16 corpus files (blazepose-heavy,
/// movenet-multipose, faceres, handlandmark-full): 40,642,753 ->
/// 40,640,582 B, 89.8-94.0 -> 86.8-90.8 ms. rans0's share of the bf16
/// decode 10% -> 4%, partly paid back in table fills. 1% moved few
/// streams; 10% was as fast, at +22 KB. Like store_search_budget, every
/// writer of a store must use the same value: a tensor stored before a
/// change codes to another payload after it and is not deduplicated.
inline constexpr double store_wide_static_margin = 0.03;

/// The search chooser. With table_sharing::per_region (the store) a region's
/// program depends only on its own bytes, dtype and shape: no file tables,
/// no learned prior, no sibling seeds and no time limit (a deadline would
/// make the choice depend on the machine's load), so the same tensor codes
/// to the same payload in every file and is stored once.
std::unique_ptr<program_chooser> make_search_chooser(
    search_chooser_options const& opt = {});

/// Expansions per region of the store's search. Per region there is no
/// learned prior to prune with, so every expansion costs in full: on
/// ckpt-300m (bf16) 4 instead of 24 took `store add -T1` from 3.6 to 2.5 CPU
/// s with 0.4% smaller packs; six fp32 corpus files 0.90 -> 0.48 s, 0.15%
/// larger. Every writer of a store must use the same value, or a tensor
/// stored again would code to another payload and not dedup.
inline constexpr size_t store_search_budget = 4;

/// The options of the store's and the mount's chooser: the search, per
/// region, bf16 mantissas packed.
search_chooser_options store_chooser_options();

/// make_search_chooser(store_chooser_options()).
std::unique_ptr<program_chooser> make_store_chooser();

}  // namespace brevis::codec
