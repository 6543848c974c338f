#pragma once
// GGUF v2/v3 (llama.cpp): header, metadata, tensor infos, aligned data.

#include <cstdint>

#include "codec/parse/region.h"

namespace brevis::codec {

/// Block layout of a ggml tensor type: `block_elems` elements take
/// `block_bytes` bytes.
struct ggml_type_info {
  char const* name;  // ggml's type name, e.g. "q4_0"
  uint32_t block_elems;
  uint32_t block_bytes;
};

/// Layout of ggml type `type`, or nullptr for unknown or removed types.
ggml_type_info const* ggml_type_lookup(uint32_t type) noexcept;

bool looks_like_gguf(byte_view file) noexcept;

/// Parses a GGUF file; throws brevis::codec::error when it is malformed.
parsed_file parse_gguf(byte_view file);

}  // namespace brevis::codec
