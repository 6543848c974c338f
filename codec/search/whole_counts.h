#pragma once
// Exact output sizes of runs (one element a run, however many the data
// has), counted over the whole value without encoding it. The search
// measures programs on a sample of slices and scales their costs to the
// region; the sample's share of runs is not the region's when its
// statistics vary along it (centernet.fp16: rows of weights between rows of
// +-0 made the sample hold half the region's runs, and a sparse/runs
// program estimated at 70,663 B coded to 126,037 B). Scaling runs' outputs
// by these counts instead corrects that.

#include <cstddef>

#include "codec/core/bytes.h"

namespace brevis::codec::search {

/// Where a value derived from the region comes from: the elements of
/// `width` bytes (1, 2, 4 or 8; little-endian; a trailing partial element
/// ignored) in `elements`, or with `skip_zeros` their nonzero ones
/// (sparse's values), or with `bits` > 0 the field of that many bits at
/// `shift` of each (planes' and fields' children).
struct value_source {
  byte_view elements;
  unsigned width = 1;
  bool skip_zeros = false;
  unsigned shift = 0;
  unsigned bits = 0;  // 0: the whole element
};

/// Runs of equal symbols in the value `s` describes (runs' output count);
/// 0 for an empty value, and for a width or field it does not handle.
size_t count_runs(value_source const& s);

}  // namespace brevis::codec::search
