// The program every chunk can fall back to.
#include "codec/choose/chooser.h"

namespace brevis::codec {

node fallback_program() {
  // TODO(merge): zstd — return make_leaf(opcode::zstd, {3}) when the zstd
  // leaf is in the registry; raw is the only leaf on this branch.
  return make_leaf(opcode::raw);
}

}  // namespace brevis::codec
