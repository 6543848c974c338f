#pragma once
// Reading archives for decompress, inspect and verify: open an archive held
// in memory, and decode all of it in order with bounded memory.
// Errors: throw codec::error naming the problem.

#include <functional>

#include "codec/container/archive.h"
#include "codec/core/bytes.h"
#include "src/input.h"
#include "src/progress.h"

namespace brevis::cli {

/// Opens the archive `in` holds (which must outlive it): in memory, or,
/// streamed, read a payload at a time into a reused buffer.
codec::archive_reader open_archive(input const& in);

/// Which checksums decode_all() checks besides each chunk's.
enum class whole_file_check { skip, check };

/// Decodes every chunk (parallel, at most 2 x threads chunks in flight, and
/// fewer threads where the chunks are so long that their decodes would not
/// fit decode_memory_limit(): src/decode_workers.h),
/// checking each chunk's XXH3, passes the original bytes to `sink` in file
/// order, then (`check`) the whole-file XXH3. decompress skips that one: the
/// chunk checksums cover every byte, the index checksum the chunk table,
/// and hashing the file a second time in the ordered (serial) stage cost
/// 4% of decoding a bf16 file; verify checks it.
void decode_all(codec::archive_reader const& reader, unsigned threads,
                std::function<void(codec::byte_view)> const& sink,
                progress& bar, whole_file_check whole);

}  // namespace brevis::cli
