#pragma once
// Reading archives for decompress, inspect and verify: open an archive held
// in memory, and decode all of it in order with bounded memory.
// Errors: throw codec::error naming the problem.

#include <functional>

#include "codec/container/archive.h"
#include "codec/core/bytes.h"
#include "src/progress.h"

namespace brevis::cli {

/// Opens the archive whose bytes are `archive` (which must outlive it).
codec::archive_reader open_archive(codec::byte_view archive);

/// Decodes every chunk (parallel, at most 2 x threads chunks in flight),
/// checking each chunk's XXH3, passes the original bytes to `sink` in file
/// order, then checks the whole-file XXH3.
void decode_all(codec::archive_reader const& reader, unsigned threads,
                std::function<void(codec::byte_view)> const& sink,
                progress& bar);

}  // namespace brevis::cli
