// The program every chunk can fall back to.
#include "codec/choose/chooser.h"

namespace brevis::codec {

node fallback_program() {
  // zstd accepts any bytes and never expands them by more than a few bytes;
  // the archive writer still keeps raw when that is smaller.
  return make_leaf(opcode::zstd, {3});
}

}  // namespace brevis::codec
