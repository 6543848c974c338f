// The list of every leaf (entropy coder). Each leaf lives in its own file and
// is listed here once (explicit, so static libraries keep them all).
#include <span>

#include "codec/dsl/operator.h"

namespace brevis::codec {

leaf_def const& raw_leaf_def();

std::span<leaf_def const* const> all_leaves() noexcept {
  static leaf_def const* const leaves[] = {
      &raw_leaf_def(),
  };
  return leaves;
}

}  // namespace brevis::codec
