// Decode speeds, MB/s of output on one core. Provisional round figures;
// scripts/decode_speed.sh measures them (see the report of issue 3) and
// they are updated from its output.

#include "codec/search/decode_speed.h"

namespace brevis::codec::search {

double decode_mb_per_s(opcode op) {
  switch (op) {
    case opcode::view:
      return 20000;
    case opcode::split:
      return 20000;
    case opcode::fields:
      return 2000;
    case opcode::planes:
      return 4000;
    case opcode::delta:
    case opcode::xor_prev:
      return 2000;
    case opcode::xor_row:
      return 3000;
    case opcode::transpose:
      return 1500;
    case opcode::palette:
      return 1500;
    case opcode::runs:
      return 1000;
    case opcode::low_zero:
      return 3000;
    case opcode::bitfields:
      return 1500;
    case opcode::bitplanes:
      return 600;
    case opcode::map:
      return 3000;
    case opcode::repeat:
      return 5000;
    case opcode::raw:
      return 20000;
    case opcode::zero:
    case opcode::constant:
      return 20000;
    case opcode::rans0:
      return 800;
    case opcode::rans1:
      return 500;
    case opcode::zstd:
      return 1000;
    case opcode::rans_static:
      return 700;
  }
  return 500;
}

}  // namespace brevis::codec::search
