#pragma once
// How much of this process's resident memory is file-backed (mapped files:
// the staged copy the pipeline maps, LMDB's map, the program's own text),
// from /proc/self/statm. The pipeline drops the staged copy's pages from
// its mapping only once this has grown by a set amount: dropping them on a
// timer every 10 ms cost 4.5% of a job's CPU (each madvise zaps the whole
// range and flushes every CPU's TLB), and the pages it dropped were faulted
// in again by the next pass over them.

#include <cstdint>
#include <optional>

namespace brevis::fs {

/// Bytes of file-backed (and shared memory) pages resident in this
/// process, or nothing where /proc is not there.
std::optional<uint64_t> resident_file_bytes();

}  // namespace brevis::fs
