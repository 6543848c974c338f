#pragma once
// What a sample's histogram hides about its source's entropy. The plug-in
// entropy of a sample (-sum c log2(c / n)) is biased low, the more so the
// more of its symbols were seen once: 2^16 near-uniform values sampled
// 2^16 times read as 15.2 bits a value, not 16. A static table fitted to
// such a sample and costed on it claims a gain that the whole value, coded
// by its own table, never shows (fp32's low mantissa halves: rANS chosen
// over raw, and coding larger and slower).

#include <cstdint>

#include "codec/choose/histogram.h"

namespace brevis::codec {

/// Bits by which the plug-in entropy of the sample `h` (whose counts sum to
/// `n`) underestimates its source's, for n values: n times the Chao-Shen
/// coverage-adjusted estimate (Chao and Shen, 2003), at most
/// `alphabet_bits` a value, less the plug-in one; never negative. Near 0
/// where few symbols were seen once. (Chao-Shen overshoots where nearly
/// every symbol was: 16.2 bits a value for uniform 16-bit values sampled
/// 2^16 times, 2 log2 n where all were seen once.)
double unseen_entropy_bits(sparse_hist const& h, uint64_t n,
                           unsigned alphabet_bits);

}  // namespace brevis::codec
