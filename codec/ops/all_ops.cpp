// The list of every operator. Each operator lives in its own file and is
// listed here once (explicit, so static libraries keep them all).
#include <array>
#include <span>

#include "codec/dsl/operator.h"

namespace brevis::codec {

std::span<op_def const* const> all_ops() noexcept {
  static op_def const* const ops[] = {nullptr};
  return std::span(ops, 0);
}

}  // namespace brevis::codec
