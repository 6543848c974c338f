// The list of every operator. Each operator lives in its own file and is
// listed here once (explicit, so static libraries keep them all).
#include <span>

#include "codec/dsl/operator.h"

namespace brevis::codec {

op_def const& view_op_def();
op_def const& fields_op_def();
op_def const& planes_op_def();
op_def const& delta_op_def();
op_def const& xor_prev_op_def();
op_def const& xor_row_op_def();
op_def const& transpose_op_def();
op_def const& map_op_def();
op_def const& palette_op_def();
op_def const& runs_op_def();
op_def const& low_zero_op_def();
op_def const& split_op_def();
op_def const& bitfields_op_def();
op_def const& bitplanes_op_def();
op_def const& repeat_op_def();
op_def const& sparse_op_def();
op_def const& classes_op_def();

std::span<op_def const* const> all_ops() noexcept {
  static op_def const* const ops[] = {
      &view_op_def(),      &fields_op_def(),    &planes_op_def(),
      &delta_op_def(),     &xor_prev_op_def(),  &xor_row_op_def(),
      &transpose_op_def(), &map_op_def(),       &palette_op_def(),
      &runs_op_def(),      &low_zero_op_def(),  &split_op_def(),
      &bitfields_op_def(), &bitplanes_op_def(), &repeat_op_def(),
      &sparse_op_def(),    &classes_op_def(),
  };
  return ops;
}

}  // namespace brevis::codec
