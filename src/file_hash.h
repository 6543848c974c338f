#pragma once
// Streaming XXH3-64 of a whole original file, fed in order by the serial
// output stage (the codec's xxh3() is one-shot).

#include <cstdint>

#include "codec/core/bytes.h"

namespace brevis::cli {

class file_hash {
 public:
  file_hash();
  ~file_hash();
  file_hash(file_hash const&) = delete;
  file_hash& operator=(file_hash const&) = delete;

  void update(codec::byte_view data);
  uint64_t digest() const;

 private:
  void* state_;  // XXH3_state_t, kept out of this header
};

}  // namespace brevis::cli
