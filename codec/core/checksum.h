#pragma once
// XXH3-64 of original bytes: the checksum of every chunk and of whole files.

#include <cstdint>

#include "codec/core/bytes.h"

namespace brevis::codec {

uint64_t xxh3(byte_view data) noexcept;

}  // namespace brevis::codec
