#pragma once
// pread until done: the one loop the store's packs and the compression
// jobs' staged copies read through.

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace brevis::fs {

/// Reads `n` bytes at `offset` of `fd` into `out`, retrying interrupted and
/// short reads. Returns `n`, or fewer where the file ends first. A failed
/// read throws store_fail_errno's error, its message "read " + `what`.
size_t read_at(int fd, uint64_t offset, size_t n, uint8_t* out,
               std::string_view what);

}  // namespace brevis::fs
