#pragma once
// Whether a program uses an operator or leaf: what tests of the choosers
// assert of the programs they pick.

#include "codec/dsl/program.h"

namespace brevis::codec::testing {

/// Whether `n` or any node below it is `op`.
inline bool uses_op(node const& n, opcode op) {
  if (n.op == op) return true;
  for (node const& k : n.children) {
    if (uses_op(k, op)) return true;
  }
  return false;
}

}  // namespace brevis::codec::testing
