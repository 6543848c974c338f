#pragma once
// How many chunks decode_all() decodes at once. Each decode may use up to
// codec::decode_budget(chunk length) for its intermediates: 1 GiB for a
// 64 MiB chunk, which a forged archive may declare for every chunk. With a
// thread per core, a 32-core machine could then be asked for 32 GiB. So the
// decodes at once are as many as fit a share of the machine's memory.

#include <cstdint>

namespace brevis::cli {

/// The memory the decodes of one archive may take at once: a quarter of
/// physical memory, of the cgroup's limit or of RLIMIT_AS, whichever is
/// least; at least 1 GiB.
uint64_t decode_memory_limit();

/// At most `threads` and at least 1 (even where one decode alone does not
/// fit): how many decodes of chunks up to `longest` bytes fit `memory`,
/// counting for each its budget, its payload and the two output buffers it
/// keeps in flight.
unsigned decode_workers(unsigned threads, uint64_t longest, uint64_t memory);

}  // namespace brevis::cli
