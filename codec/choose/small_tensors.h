#pragma once
// Runs of small float tensors written as one region. A tensor coded alone
// pays a region's and a chunk's fixed costs (its own tables, the coder's
// states, an index entry and checksum, the chooser's work on it): on a file
// of 5,000 fp16 tensors of 1 KiB, 40 us and ~100 bytes a tensor, seven times
// zstd's time and more bytes than zstd. Neighbours of one dtype whose values
// are continuous (weights, biases, norms) share a distribution closely
// enough that coding them as one value costs less than those fixed costs;
// tensors of few distinct values (quantized palettes) are left alone, as
// each codes best with a table of its own.

#include <cstdint>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/parse/region.h"

namespace brevis::codec {

/// Tensors shorter than this are small: their fixed costs are comparable to
/// the coding of their bytes. (Below 4,096 16-bit elements, too few for the
/// classes of channels. With 16 KiB the 164 corpus files coded 0.048%
/// smaller, with 8 KiB 0.054%; the 2 GB benchmark checkpoint of 23,140
/// tensors 0.147% and 0.024% larger, 0.006% once repeated tensors stayed
/// apart: at 16 KiB, runs also took tensors that classes coded.)
inline constexpr uint64_t small_tensor_bytes = 8u << 10;

/// `regions` (covering `file` in order) with every run of two or more
/// adjacent small tensors of one float dtype (f16, bf16, f32) and
/// continuous values written as one tensor region of that dtype, at most
/// `chunk_size` bytes (one chunk), without a shape, named "FIRST .. LAST
/// (N tensors)" (within the index's limit) and holding N `tensors`. Other
/// regions are returned unchanged. For per-file archives only
/// (program_chooser::joins_small_tensors).
std::vector<region> join_small_tensors(byte_view file,
                                       std::vector<region> regions,
                                       uint32_t chunk_size);

}  // namespace brevis::codec
