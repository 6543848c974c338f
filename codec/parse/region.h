#pragma once
// A checkpoint file cut into regions: opaque bytes (headers, JSON, pickles,
// padding) and tensors (element type, shape, name). Regions cover the file
// exactly, in order, without gaps or overlaps.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codec/core/bytes.h"

namespace brevis::codec {

/// Element type of a region. Values are stored in archives: never renumber.
enum class dtype : uint8_t {
  none = 0,  // untyped bytes (opaque region or unknown tensor type)
  boolean = 1,
  u8 = 2,
  i8 = 3,
  f8_e5m2 = 4,
  f8_e4m3 = 5,
  i16 = 6,
  u16 = 7,
  f16 = 8,
  bf16 = 9,
  i32 = 10,
  u32 = 11,
  f32 = 12,
  f64 = 13,
  i64 = 14,
  u64 = 15,
  // GGUF block-quantized types: gguf_block + ggml_type (ggml_type < 64).
  gguf_block = 64,
};

/// Size in bytes of one element, or 0 for untyped and block-quantized types
/// (whose regions are plain byte streams to the codec).
unsigned dtype_width(dtype t) noexcept;
/// "bf16", "f32", "gguf:q4_0", "-" for none.
std::string dtype_name(dtype t);

enum class region_kind : uint8_t { opaque = 0, tensor = 1 };

struct region {
  uint64_t offset = 0;
  uint64_t length = 0;
  region_kind kind = region_kind::opaque;
  dtype type = dtype::none;
  std::vector<uint64_t> shape;  // empty when unknown
  std::string name;             // tensor name, or what the opaque bytes are
  // Tensors of the file the region holds: more than one for a run of small
  // ones written as one (join_small_tensors), which has no shape. The
  // encoder's alone: not stored (regions read from an archive hold 1).
  uint32_t tensors = 1;
};

/// Which parser understood the file.
enum class file_format : uint8_t {
  unknown = 0,
  safetensors = 1,
  pytorch_zip = 2,
  gguf = 3,
  npy = 4,
};

struct parsed_file {
  file_format format = file_format::unknown;
  std::vector<region> regions;
  std::string note;  // why a parser gave up, when it did (for logs)
};

/// Cuts `file` into regions. Never throws on malformed input: a file that no
/// parser understands, or whose header is malformed or truncated, becomes a
/// single untyped opaque region (an empty file gives no regions).
/// `name_hint` (the file name) only orders which parsers are tried first.
parsed_file parse_regions(byte_view file, std::string_view name_hint = {});

/// Cuts `name` to at most `max_bytes` bytes, before the UTF-8 character the
/// limit would split (names are UTF-8 by convention; bytes that are not are
/// cut at the limit).
void cut_name(std::string& name, size_t max_bytes);

/// Checks the invariant: regions are in order, cover [0, size) exactly,
/// and none is empty.
bool regions_cover(std::vector<region> const& regions, uint64_t size);

}  // namespace brevis::codec
