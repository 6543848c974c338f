#include "src/file_hash.h"

#include <xxhash.h>

#include <new>

namespace brevis::cli {

file_hash::file_hash() : state_(XXH3_createState()) {
  if (state_ == nullptr) throw std::bad_alloc();
  XXH3_64bits_reset(static_cast<XXH3_state_t*>(state_));
}

file_hash::~file_hash() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

void file_hash::update(codec::byte_view data) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state_), data.data(),
                     data.size());
}

uint64_t file_hash::digest() const {
  return XXH3_64bits_digest(static_cast<XXH3_state_t const*>(state_));
}

}  // namespace brevis::cli
