// XXH3 with avx512 code (see xxh3_kernels.h): xxhash's inline build compiled
// for avx512. Only static functions get the target: headers with inline
// functions of their own are included before it, so that no shared inline
// (one the linker may pick for every caller) holds avx512 code.
#include <assert.h>
#include <immintrin.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "codec/core/xxh3_kernels.h"

// GCC's pragmas, or clang's attribute (the fuzz build uses clang, which
// knows neither GCC's target pragma nor its warning group).
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC diagnostic push
// GCC 12 warns inside its own AVX-512 headers (_mm512_undefined_*).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC target("avx512f")
#endif
#define XXH_INLINE_ALL
#define XXH_VECTOR 3  // XXH_AVX512
#include <xxhash.h>

namespace brevis::codec::xxh3_kernels {
namespace {

#include "codec/core/xxh3_kernel_functions.inc"

}  // namespace
}  // namespace brevis::codec::xxh3_kernels
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace brevis::codec::xxh3_kernels {

kernel const& avx512() { return functions; }

}  // namespace brevis::codec::xxh3_kernels
