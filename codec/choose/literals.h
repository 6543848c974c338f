#pragma once
// Small opaque regions of a file (zip headers and descriptors, the pickle,
// the central directory) and tiny tensors, coded one by one, each pay a
// codec's framing, a payload and a chunk checksum, and share nothing. As
// `literal` programs holding their bytes they live in the archive index
// alone (their chunks are In_Program: no payload, no stored checksum), which
// is compressed as one zstd stream (FORMAT.md 3.3.3, 4.7). Only for per-file
// choosers: a content-addressed store codes regions on their own.

#include <cstdint>
#include <span>
#include <unordered_set>

#include "codec/core/bytes.h"
#include "codec/dsl/program.h"
#include "codec/parse/region.h"

namespace brevis::codec {

/// Offsets of the regions that become literals: small opaque ones and tiny
/// tensors, in file order, up to a per-file budget; none in a file that no
/// parser understood (one opaque region: nothing to share).
std::unordered_set<uint64_t> literal_regions(std::span<region const> regions);

/// The bare `literal` leaf holding `data`: the archive writer stores the
/// chunks of a region so coded in the index.
node literal_program(byte_view data);

}  // namespace brevis::codec
