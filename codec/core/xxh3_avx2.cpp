// XXH3 with avx2 code (see xxh3_kernels.h): xxhash's inline build compiled
// for avx2. Only static functions get the target: headers with inline
// functions of their own are included before it, so that no shared inline
// (one the linker may pick for every caller) holds avx2 code.
#include <assert.h>
#include <immintrin.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/core/xxh3_kernels.h"

#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx2")
#define XXH_INLINE_ALL
#define XXH_VECTOR 2  // XXH_AVX2
#include <xxhash.h>

namespace brevis::codec::xxh3_kernels {
namespace {

uint64_t hash(void const* data, size_t size) { return XXH3_64bits(data, size); }

void* create() {
  XXH3_state_t* s = XXH3_createState();
  if (s != nullptr) XXH3_64bits_reset(s);
  return s;
}

void update(void* state, void const* data, size_t size) {
  XXH3_64bits_update(static_cast<XXH3_state_t*>(state), data, size);
}

uint64_t digest(void const* state) {
  return XXH3_64bits_digest(static_cast<XXH3_state_t const*>(state));
}

void destroy(void* state) { XXH3_freeState(static_cast<XXH3_state_t*>(state)); }

}  // namespace
}  // namespace brevis::codec::xxh3_kernels
#pragma GCC diagnostic pop
#pragma GCC pop_options

namespace brevis::codec::xxh3_kernels {

kernel const& avx2() {
  static kernel const k{&hash, &create, &update, &digest, &destroy};
  return k;
}

}  // namespace brevis::codec::xxh3_kernels
