#pragma once
// safetensors: u64 LE header length, JSON header, tensor data.

#include "codec/parse/region.h"

namespace brevis::codec {

/// Cheap test: a plausible header length followed by '{'.
bool looks_like_safetensors(byte_view file) noexcept;

/// Parses a safetensors file; throws brevis::codec::error when it is
/// malformed (bad JSON, offsets out of range, overlapping tensors).
parsed_file parse_safetensors(byte_view file);

}  // namespace brevis::codec
