#pragma once
// XXH3-64 compiled for one instruction set each: the shared libxxhash is
// built for plain x86-64 (SSE2), and measured 2-3x slower than its AVX-512
// code on the chunks compression hashes. checksum.cpp picks one set of
// these per process. Each set keeps its own state type, so a stream is
// created, fed and read by one set only.

#include <cstddef>
#include <cstdint>

namespace brevis::codec::xxh3_kernels {

struct kernel {
  uint64_t (*hash)(void const* data, size_t size);
  void* (*create)();  // a reset state, or nullptr when out of memory
  void (*update)(void* state, void const* data, size_t size);
  uint64_t (*digest)(void const* state);
  void (*destroy)(void* state);
};

kernel const& avx2();
kernel const& avx512();

}  // namespace brevis::codec::xxh3_kernels
