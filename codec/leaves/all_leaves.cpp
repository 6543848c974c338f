// The list of every leaf (entropy coder). Each leaf lives in its own file and
// is listed here once (explicit, so static libraries keep them all).
#include <array>
#include <span>

#include "codec/dsl/operator.h"

namespace brevis::codec {

std::span<leaf_def const* const> all_leaves() noexcept {
  static leaf_def const* const leaves[] = {nullptr};
  return std::span(leaves, 0);
}

}  // namespace brevis::codec
