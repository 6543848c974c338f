// The list of every operator. Each operator lives in its own file and is
// listed here once (explicit, so static libraries keep them all).
#include <array>
#include <span>

#include "codec/dsl/operator.h"

namespace brevis::codec {

// ops B
op_def const& palette_op_def();
op_def const& runs_op_def();
op_def const& low_zero_op_def();
op_def const& split_op_def();
op_def const& bitfields_op_def();
op_def const& bitplanes_op_def();
op_def const& repeat_op_def();

std::span<op_def const* const> all_ops() noexcept {
  static op_def const* const ops[] = {
      // ops B
      &palette_op_def(), &runs_op_def(),      &low_zero_op_def(),
      &split_op_def(),   &bitfields_op_def(), &bitplanes_op_def(),
      &repeat_op_def(),
  };
  return ops;
}

}  // namespace brevis::codec
