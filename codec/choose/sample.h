#pragma once
// The sample a chooser measures programs on: evenly spaced, element-aligned
// slices of a region, so that choosing costs a small fraction of encoding.

#include <cstddef>

#include "codec/core/bytes.h"

namespace brevis::codec {

/// `slices` evenly spaced slices of `data`, `want` bytes in total (rounded
/// down to whole elements of `width` bytes); `data` itself when it is no
/// larger than `want`.
bytes sample_slices(byte_view data, unsigned width, size_t want,
                    size_t slices = 8);

}  // namespace brevis::codec
