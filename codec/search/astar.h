#pragma once
// The search for a region's program: a bounded best-first (A*) search over
// partial programs. A state is a program tree with open values; a step
// applies one production to an open value (an operator with its parameters)
// or closes it with its best leaf. See astar.cpp for the costs and the
// heuristic.

#include <cstddef>
#include <span>
#include <vector>

#include "codec/dsl/program.h"
#include "codec/search/prior.h"
#include "codec/search/production.h"

namespace brevis::codec::search {

enum class strategy : uint8_t {
  astar,   // best-first over partial programs
  greedy,  // follow the best successor only
  fixed,   // no search: one program per dtype (byte planes + rANS)
};

struct search_options {
  strategy how = strategy::astar;
  size_t budget = 24;  // expansions per region
  // Regions under 64 KiB get a share of the budget in proportion to their
  // size, at least this many expansions: a few hundred bytes cannot repay
  // a long search.
  size_t small_region_budget = 2;
  // 16-bit tensors whose elements' costs come from their histogram (bf16,
  // fp16) settle within this share of the budget: 1/3 of 24 cost them
  // under 0.025% on the corpus and 15% of the choosing CPU (fp32 regions,
  // costed from samples, lose 0.2% there).
  double histogram_budget = 1.0 / 3;
  double time_ms = 0;  // per region; 0: no limit
  // Weight of the heuristic, the open values' best leaf costs: 0 makes it
  // admissible (uniform-cost search), 1 best-first on the upper bound.
  double heuristic_weight = 0.2;
  // With a learned prior, operators below this probability are not tried.
  double prune_below = 0.03;
  // Values shallower than this are never pruned (the prior only orders
  // their expansions). 2 (the region's bytes and elements) reaches the
  // uniform prior's ratio on the corpus with a few fewer expansions, but
  // costs a third more choosing CPU than 0: speed wins by default.
  unsigned prune_from_depth = 0;
  // A program decoding below fast_decode_mb_per_s is chosen only when it
  // costs this fraction less than the best fast program.
  double slow_margin = 0.03;
  // A sibling's program (the seed) is only checked on the region when its
  // statistics match the sibling's (find_program), with no search against
  // it.
  bool trust_seed = true;
  size_t sample_bytes = 256u << 10;  // the region's sample, at most
  // The sample's least size (or the whole region), for the regions costed
  // from samples (not bf16/fp16). Compressing the 24 fp32 corpus files of
  // 4 MB or more at -T1, against 64 KiB: 32 KiB 8.6% less CPU, 164 files
  // +0.007% bytes; 16 KiB 12.5% less, +0.023% (blazepose-detector.fp32
  // +1.0%: its sparse tensors' large-alphabet leaves misjudged).
  size_t sample_floor = 32u << 10;
  uint32_t chunk_size = 1u << 20;  // the archive's chunks
};

struct search_result {
  node program;
  double estimated_bytes = 0;  // program + payload, scaled to the region
  double decode_mb_per_s = 0;  // estimated
  size_t expansions = 0;
  double ms = 0;  // work_clock.h's work_clock_ms
  // Of which, CPU ms (thread_cpu_ms) fitting the winner's static tables:
  // encoding work, as on the closed form's path (choice_record::coding_ms).
  double table_ms = 0;
  std::vector<decision> decisions;  // of the chosen program
};

/// Searches the program of region `in`. `seed` (a sibling's program, may be
/// null) is measured first and kept unless the search beats it by more
/// than `seed_margin` (a fraction). The result always encodes every chunk
/// or falls back per chunk: a plain leaf on the region is always there.
/// With opt.trust_seed, the seed is kept without a search when it replays
/// with the same decision contexts as `seed_decisions` (the seed's own, on
/// its region: the statistics match) and beats the region's plain leaf.
search_result find_program(region_input const& in, prior const& p,
                           search_options const& opt,
                           node const* seed = nullptr,
                           double seed_margin = 0.01,
                           std::span<decision const> seed_decisions = {});

/// Fits the empty-table rans_static leaves of `program` to the values they
/// see over every chunk of `data` (so that every chunk encodes); a leaf
/// whose values need no table becomes rans0.
void fit_static_tables(node& program, byte_view data, uint32_t chunk_size);

/// Fits the empty-table rans_static leaves of a view<u16> program at its
/// elements, or at their byte planes or float fields (of meaning `m`), from
/// the region's histogram `h` (the chunks' histograms add up to it): no
/// pass over the region. So is sparse's nonzero values' table (h without
/// 0), and its mask's from the elements' mask bytes where `data` (the
/// region, coded in chunks of `chunk_size` bytes) is given. Other leaves are
/// left for fit_static_tables. The elements' own table takes a smaller
/// precision under `small_table_margin` (region_input's); returns the bytes
/// that adds to the program's estimate.
double fit_tables_from_histogram(node& program, sparse_hist const& h, meaning m,
                                 byte_view data = {},
                                 uint32_t chunk_size = 1u << 20,
                                 double small_table_margin = 0);

}  // namespace brevis::codec::search
