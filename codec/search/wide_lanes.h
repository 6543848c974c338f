#pragma once
// Programs whose rans_static leaves interleave 32 states from fewer symbols
// than the format's default (FORMAT.md section 4.6, the leaf's parameter):
// the store's choice. A payload of 2^12 to 2^16 - 1 symbols then decodes
// with 32 states (on AVX-512 in its wide kernel, instead of the scalar loop
// of 8), for 96 bytes more of states. The choosers' estimates do not count
// those bytes: they may pick a rans_static leaf over another by less.

#include <memory>

#include "codec/choose/chooser.h"
#include "codec/dsl/program.h"

namespace brevis::codec::search {

/// Sets the parameter of every rans_static leaf in `program` to `log2`
/// (< 16: 16 is the default, written as no parameter).
void set_wide_lanes(node& program, unsigned log2);

/// Wraps `inner`: each program it chooses, with set_wide_lanes(log2).
std::unique_ptr<program_chooser> with_wide_lanes(
    std::unique_ptr<program_chooser> inner, unsigned log2);

}  // namespace brevis::codec::search
