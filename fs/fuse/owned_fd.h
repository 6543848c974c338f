#pragma once
// A file descriptor closed by its owner.

#include <unistd.h>

#include <utility>

namespace brevis::fs {

class owned_fd {
 public:
  owned_fd() = default;
  explicit owned_fd(int fd) : fd_(fd) {}
  owned_fd(owned_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  owned_fd& operator=(owned_fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  owned_fd(owned_fd const&) = delete;
  owned_fd& operator=(owned_fd const&) = delete;
  ~owned_fd() { reset(); }

  int get() const { return fd_; }
  void reset() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

}  // namespace brevis::fs
