#include "src/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "codec/core/error.h"

namespace brevis::cli {

mapped_file::mapped_file(int fd, size_t size, bool populate) : size_(size) {
  if (size == 0) return;  // mmap rejects empty mappings
  void* p = ::mmap(nullptr, size, PROT_READ,
                   MAP_PRIVATE | (populate ? MAP_POPULATE : 0), fd, 0);
  if (p == MAP_FAILED) {
    size_ = 0;
    codec::fail(codec::errc::io,
                std::string("cannot map: ") + std::strerror(errno));
  }
  addr_ = p;
}

mapped_file::~mapped_file() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

mapped_file::mapped_file(mapped_file&& other) noexcept
    : addr_(std::exchange(other.addr_, nullptr)),
      size_(std::exchange(other.size_, 0)) {}

mapped_file& mapped_file::operator=(mapped_file&& other) noexcept {
  if (this != &other) {
    if (addr_ != nullptr) ::munmap(addr_, size_);
    addr_ = std::exchange(other.addr_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

}  // namespace brevis::cli
