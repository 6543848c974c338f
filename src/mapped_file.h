#pragma once
// A read-only memory mapping of a whole file (RAII). The mapping stays valid
// after the descriptor is closed; it is unmapped when the object dies.
// Errors: the constructor throws codec::error(errc::io) with strerror text.
// @note A file truncated by another process while mapped makes later reads
// fault (SIGBUS): the CLI's handler (fatal_signals.h) then says so, removes
// its uncommitted output and exits non-zero.

#include <cstddef>
#include <cstdint>

#include "codec/core/bytes.h"

namespace brevis::cli {

class mapped_file {
 public:
  mapped_file() = default;
  /// Maps `size` bytes of the open descriptor `fd` (size 0 maps nothing);
  /// `populate` maps every page now (MAP_POPULATE) rather than a fault per
  /// few pages at first touch.
  mapped_file(int fd, size_t size, bool populate = false);
  ~mapped_file();
  mapped_file(mapped_file&& other) noexcept;
  mapped_file& operator=(mapped_file&& other) noexcept;
  mapped_file(mapped_file const&) = delete;
  mapped_file& operator=(mapped_file const&) = delete;

  codec::byte_view data() const {
    return {static_cast<uint8_t const*>(addr_), size_};
  }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace brevis::cli
