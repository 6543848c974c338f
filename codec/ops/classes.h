#pragma once
// The `classes` operator's limits (FORMAT.md 4.5) and what the archive
// writer needs to know of it: elements are classed by their position in a
// cycle that restarts at each chunk, so chunks must hold whole cycles for
// the classes to stay those of the tensor's channels.

#include <cstdint>

#include "codec/dsl/program.h"

namespace brevis::codec {

inline constexpr uint64_t classes_max_count = 16;
inline constexpr uint64_t classes_max_stride = uint64_t{1} << 32;

/// Elements in one cycle (stride x map length) of the first `classes` node
/// of `program`, or 0 when it has none.
uint64_t classes_cycle_elements(node const& program);

/// The length of a region's chunks (all but its last) under `program`, for
/// elements of `width` bytes: the largest multiple of the element within
/// `chunk_size`, and of a `classes` cycle where one fits.
uint32_t chunk_step(node const& program, uint32_t width, uint32_t chunk_size);

}  // namespace brevis::codec
