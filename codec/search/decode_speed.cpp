// Decode speeds, MB/s of output on one core, measured once with the
// DISABLED_decode_speed test (tests/codec/search/decode_speed_test.cpp):
// 1 MiB chunks of bf16 gaussian weights, Release build, g++ 12, on the
// project's shared 2-core x86-64 machine (2026-11-30); the lower of two
// runs, rounded down. Leaves as view<u16>(leaf, raw); operators as
// view<u16>(op(raw...), raw) less view<u16>(raw, raw). repeat decodes
// faster than a copy of its output (one period is read): given raw's speed.

#include "codec/search/decode_speed.h"

namespace brevis::codec::search {

double decode_mb_per_s(opcode op) {
  switch (op) {
    case opcode::view:
    case opcode::split:
      return 28000;  // the children are decoded in place
    case opcode::fields:
      return 7200;
    case opcode::planes:
      return 8100;
    case opcode::delta:
    case opcode::xor_prev:
      return 4700;
    case opcode::xor_row:
      return 10000;
    case opcode::transpose:
      return 1600;
    case opcode::palette:
      return 8300;
    case opcode::runs:
      return 570;
    case opcode::low_zero:
      return 13700;
    case opcode::bitfields:
      return 7200;  // two fields of 16-bit lanes: one pass, as fields (the
                    // 2026-12-01 run measured it as fast as fields)
    case opcode::bitplanes:
      return 1100;
    case opcode::map:
      return 10000;
    case opcode::repeat:
      return 28000;
    case opcode::sparse:
      return 2000;  // not in the measured set yet: a branch-free expand
    case opcode::classes:
      return 2000;         // stride 1: an indexed scatter a lane at a time
    case opcode::literal:  // a copy out of the program blob
    case opcode::raw:
    case opcode::zero:
    case opcode::constant:
      return 28000;
    case opcode::bits:
      return 20000;  // 64 values a step with AVX-512 VBMI (program_decode
                     // bench)
    case opcode::rans0:
      return 1700;
    case opcode::rans1:
      return 770;
    case opcode::zstd:
      return 980;
    case opcode::rans_static:
      return 2000;  // 32 states, AVX-512/AVX2 where the CPU has them
  }
  return 500;  // unknown: assume slow
}

}  // namespace brevis::codec::search
