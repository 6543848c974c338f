#pragma once
// The production set of the search, one table entry per production: an
// operator or leaf, the predicate saying where it applies and the generator
// of its parameter choices. Adding a leaf or an operator to the search is
// one entry in production.cpp.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "codec/choose/histogram.h"
#include "codec/choose/shared_tables.h"
#include "codec/dsl/program.h"
#include "codec/parse/region.h"
#include "codec/search/value_stats.h"

namespace brevis::codec::search {

/// Marks an open value in a partial program.
inline constexpr opcode hole = static_cast<opcode>(0);
inline node open_value() { return make_leaf(hole); }

/// What the search knows of the region it works on.
struct region_input {
  region const& info;
  byte_view data;                          // the whole region
  file_tables const* tables = nullptr;     // per-file shared tables, if any
  sparse_hist const* root_hist = nullptr;  // 16-bit histogram of `data`
  // root_hist's marginals, for bf16/fp16 tensors where already computed
  float16_marginals const* marginals = nullptr;
  uint32_t chunk_size = 1u << 20;  // the archive's chunks, as coded
  // The store's reads are bound by decoding: where set, the closed form
  // closes a stream of at least `wide_static_from` symbols a chunk with
  // rans_static, whose 32 states decode with vector code, rather than
  // rans0 when that costs at most `wide_static_margin` more. Below 32 KiB
  // a chunk rans0 decodes 4 states with scalar code, about 2.5 times the
  // time a symbol (above, 32 with vector code: left alone). Operators are
  // weighed without it; a split is picked with it unless that adds rans0
  // leaves. 0: the smaller wins.
  uint64_t wide_static_from = 0;
  double wide_static_margin = 0;
  // The store's reads again: a table of the elements themselves (a whole
  // 16-bit word a symbol) takes fewer slots than the standard, down to
  // 2^14, where that costs at most this share more (closed_form.h's
  // smaller_table_scale): a smaller decode table decodes faster. 0: the
  // standard.
  double small_table_margin = 0;

  /// How many chunks code the whole region (at least one).
  [[nodiscard]] double chunks() const {
    return std::max(1.0, std::ceil(static_cast<double>(data.size()) /
                                   static_cast<double>(chunk_size)));
  }
};

/// A value the search may transform or close: its sample and what is known.
struct value_info {
  stream const& sample;
  value_stats const& stats;
  unsigned depth = 0;           // 0: the region's bytes
  opcode parent = opcode::raw;  // the operator that produced it (raw: none)
  // The whole value, when it is the region itself or its elements under
  // the root view (exact costs and whole-value patterns need it).
  byte_view whole;
  // The whole value's histogram, when known without the value itself: the
  // byte planes and float fields of the region's 16-bit elements.
  sparse_hist const* whole_hist = nullptr;
};

struct production {
  std::string_view name;  // unique; the prior counts by it
  opcode op;
  bool (*applies)(value_info const&, region_input const&);
  /// Appends the nodes to try (children still to search are open_value(),
  /// others already closed); nothing when no parameters fit.
  void (*generate)(value_info const&, region_input const&,
                   std::vector<node>& out);
};

/// Every production; an index into it identifies a production.
std::span<production const> productions();

/// The element meaning of a region dtype (uint for integers of no sign).
meaning meaning_of(dtype t);

}  // namespace brevis::codec::search
