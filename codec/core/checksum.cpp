#include "codec/core/checksum.h"

#include <xxhash.h>

namespace brevis::codec {

uint64_t xxh3(byte_view data) noexcept {
  return XXH3_64bits(data.data(), data.size());
}

}  // namespace brevis::codec
