#pragma once
// NumPy .npy v1/v2/v3: magic, Python-literal header dict, one array.

#include "codec/parse/region.h"

namespace brevis::codec {

bool looks_like_npy(byte_view file) noexcept;

/// Parses an .npy file; throws brevis::codec::error when it is malformed.
parsed_file parse_npy(byte_view file);

}  // namespace brevis::codec
