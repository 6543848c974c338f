#pragma once
// The bits leaf (codec/leaves/bits.cpp): what the interpreter checks of its
// payload before it allocates the value.

#include <cstddef>

#include "codec/dsl/types.h"

namespace brevis::codec {

/// The number of values of a `bits` leaf of `bits` bits a value (checked
/// against the type already) decoding `out_size` bytes of lanes `in` from
/// `payload_size` bytes; throws errc::corrupt when the sizes disagree.
size_t bits_value_count(unsigned bits, value_type in, size_t payload_size,
                        size_t out_size);

}  // namespace brevis::codec
