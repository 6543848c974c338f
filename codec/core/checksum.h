#pragma once
// XXH3-64 of original bytes: the checksum of every chunk and of whole files.

#include <cstdint>

#include "codec/core/bytes.h"

namespace brevis::codec {

uint64_t xxh3(byte_view data) noexcept;

/// XXH3-64 of bytes fed in pieces: equals xxh3() of them all together. Lets
/// one pass over a file give both its chunks' checksums and its own.
class xxh3_stream {
 public:
  xxh3_stream();
  ~xxh3_stream();
  xxh3_stream(xxh3_stream const&) = delete;
  xxh3_stream& operator=(xxh3_stream const&) = delete;

  void update(byte_view data) noexcept;
  uint64_t digest() const noexcept;

 private:
  void* state_;  // XXH3_state_t, which xxhash.h defines
};

}  // namespace brevis::codec
