#include "codec/core/checksum.h"

#include <xxhash.h>

#include <new>

#include "codec/core/xxh3_kernels.h"

namespace brevis::codec {
namespace {

// The shared library's XXH3, for CPUs without AVX2.
namespace lib {
#include "codec/core/xxh3_kernel_functions.inc"
}  // namespace lib

// Chosen once (the CPU check runs cpuid, which traps on virtual machines).
xxh3_kernels::kernel const& best() {
  static xxh3_kernels::kernel const& k = []() -> xxh3_kernels::kernel const& {
    if (__builtin_cpu_supports("avx512f")) return xxh3_kernels::avx512();
    if (__builtin_cpu_supports("avx2")) return xxh3_kernels::avx2();
    return lib::functions;
  }();
  return k;
}

}  // namespace

uint64_t xxh3(byte_view data) noexcept {
  return best().hash(data.data(), data.size());
}

xxh3_stream::xxh3_stream() : state_(best().create()) {
  if (state_ == nullptr) throw std::bad_alloc();
}

xxh3_stream::~xxh3_stream() { best().destroy(state_); }

void xxh3_stream::update(byte_view data) noexcept {
  best().update(state_, data.data(), data.size());
}

uint64_t xxh3_stream::digest() const noexcept { return best().digest(state_); }

}  // namespace brevis::codec
