#pragma once
// BREVIS_AVX2_CLONES: an AVX2 clone of a hot decoding loop beside the
// portable build, picked at load time. GCC clones function templates; clang
// (the libFuzzer build) does not, so there the portable build stands alone,
// which fuzzing does not mind. Nor under ThreadSanitizer: the clones' resolver
// runs while the program is relocated, before the sanitizer's runtime is set
// up, and its instrumented code crashed there.

#if defined(__clang__) || defined(__SANITIZE_THREAD__)
#define BREVIS_AVX2_CLONES
#else
#define BREVIS_AVX2_CLONES __attribute__((target_clones("avx2", "default")))
#endif
