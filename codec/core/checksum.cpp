#include "codec/core/checksum.h"

#include <xxhash.h>

#include <new>

namespace brevis::codec {

uint64_t xxh3(byte_view data) noexcept {
  return XXH3_64bits(data.data(), data.size());
}

xxh3_stream::xxh3_stream() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

xxh3_stream::~xxh3_stream() {
  XXH3_freeState(static_cast<XXH3_state_t*>(state_));
}

void xxh3_stream::update(byte_view data) noexcept {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data.data(),
                     data.size());
}

uint64_t xxh3_stream::digest() const noexcept {
  return XXH3_64bits_digest(static_cast<XXH3_state_t const*>(state_));
}

}  // namespace brevis::codec
