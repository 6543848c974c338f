#pragma once
// Puts the main malloc arena on transparent huge pages: the buffers of
// chunks, values, coder tables and histograms that compress and decompress
// make (a few to a few tens of MiB, reused through the run) are then faulted
// in 2 MiB at a time instead of 4 KiB (see codec/core/huge_pages.h).

#include <cstddef>

namespace brevis::cli {

/// Grows the main arena's heap by at least `bytes` now (virtual memory:
/// only what is touched later is backed), advises it huge, and keeps it.
/// Call once, early, from the main thread. Does nothing where the heap
/// cannot grow (sbrk refused): malloc works as before.
void reserve_huge_heap(size_t bytes);

/// Makes threads started from now on allocate from the main arena (the one
/// on huge pages) rather than each from an arena of its own on small pages.
/// For the batch commands, whose threads allocate few, large, reused blocks:
/// compress -T2 of blazepose-heavy bf16 2390 -> 367 faults, 176 -> 136 ms
/// CPU; decompress 3230 -> 340, 77 -> 71 ms. The mount daemon too
/// (src/cmd_mount.cpp): its threads' small blocks come from their tcaches.
void share_main_arena();

}  // namespace brevis::cli
