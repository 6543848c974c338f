#include "codec/core/checksum.h"

#include <xxhash.h>

#include <new>

#include "codec/core/xxh3_kernels.h"

namespace brevis::codec {
namespace {

// The shared library's XXH3, for CPUs without AVX2.
uint64_t lib_hash(void const* data, size_t size) {
  return XXH3_64bits(data, size);
}

void* lib_create() {
  XXH3_state_t* s = XXH3_createState();
  if (s != nullptr) XXH3_64bits_reset(s);
  return s;
}

void lib_update(void* state, void const* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, size);
}

uint64_t lib_digest(void const* state) {
  return XXH3_64bits_digest(static_cast<XXH3_state_t const*>(state));
}

void lib_destroy(void* state) {
  XXH3_freeState(static_cast<XXH3_state_t*>(state));
}

// Chosen once (the CPU check runs cpuid, which traps on virtual machines).
xxh3_kernels::kernel const& best() {
  static xxh3_kernels::kernel const& k = []() -> xxh3_kernels::kernel const& {
    static xxh3_kernels::kernel const lib{&lib_hash, &lib_create, &lib_update,
                                          &lib_digest, &lib_destroy};
    if (__builtin_cpu_supports("avx512f")) return xxh3_kernels::avx512();
    if (__builtin_cpu_supports("avx2")) return xxh3_kernels::avx2();
    return lib;
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
