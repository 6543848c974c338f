#pragma once
// Size arguments: "65536", "64K", "1M", "1MiB", "2G" (K/M/G are binary
// multiples, as in zstd and xz; "KB" and "KiB" are accepted as synonyms).

#include <cstdint>
#include <optional>
#include <string_view>

namespace brevis::cli {

/// The size `text` denotes, or nullopt if it is malformed or overflows.
std::optional<uint64_t> parse_size(std::string_view text);

}  // namespace brevis::cli
