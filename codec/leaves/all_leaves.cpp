// The list of every leaf (entropy coder). Each leaf lives in its own file and
// is listed here once (explicit, so static libraries keep them all).
#include <span>

#include "codec/dsl/operator.h"

namespace brevis::codec {

leaf_def const& raw_leaf_def();
leaf_def const& zero_leaf_def();
leaf_def const& constant_leaf_def();
leaf_def const& rans0_leaf_def();
leaf_def const& rans1_leaf_def();
leaf_def const& zstd_leaf_def();
leaf_def const& rans_static_leaf_def();
leaf_def const& literal_leaf_def();
leaf_def const& bits_leaf_def();

std::span<leaf_def const* const> all_leaves() noexcept {
  static leaf_def const* const leaves[] = {
      &raw_leaf_def(),         &zero_leaf_def(),    &constant_leaf_def(),
      &rans0_leaf_def(),       &rans1_leaf_def(),   &zstd_leaf_def(),
      &rans_static_leaf_def(), &literal_leaf_def(), &bits_leaf_def(),
  };
  return leaves;
}

}  // namespace brevis::codec
