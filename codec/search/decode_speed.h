#pragma once
// Decode throughput of each operator and leaf, in MB/s of the bytes it
// outputs, on one core: a small static table, measured once (see
// decode_speed.cpp), from which the search estimates a program's decode
// speed and keeps slow programs out unless they save enough.

#include "codec/dsl/program.h"

namespace brevis::codec::search {

/// MB/s of output bytes, one core.
double decode_mb_per_s(opcode op);

/// Programs decoding below this are chosen only when they save more than
/// the slow-program margin.
inline constexpr double fast_decode_mb_per_s = 500;

}  // namespace brevis::codec::search
