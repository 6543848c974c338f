#pragma once
// The kernel's readahead for the mount. A FUSE mount's backing device
// starts at the kernel's default window (128 KiB), and the max_readahead a
// filesystem asks for in INIT only ever lowers it; so a sequential reader
// (cat reads 256 KiB at a time) sends one or two reads at once, and the
// daemon sat idle between them for half of a cold read (traced). As root,
// the daemon raises its own mount's window (/sys/class/bdi/MAJ:MIN) to
// what it asked for: 1 MiB reads, several in flight. Elsewhere it stays.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace brevis::fs {

/// The device ("MAJ:MIN") of the mount at `mountpoint` (canonical path), the
/// last one mounted there, from the text of /proc/self/mountinfo.
std::optional<std::string> mount_device(std::string_view mountinfo,
                                        std::string_view mountpoint);

/// Raises the readahead of the mount at `mountpoint` to `bytes` (never
/// lowers it). Returns whether the window is at least `bytes` now.
bool raise_mount_readahead(std::string const& mountpoint, size_t bytes);

}  // namespace brevis::fs
