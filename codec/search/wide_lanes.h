#pragma once
// Programs whose rans_static leaves interleave 32 states from fewer symbols
// than the format's default (FORMAT.md section 4.6, the leaf's parameter):
// the store's choice. A payload of 2^12 to 2^16 symbols then decodes in the
// AVX-512 kernel of 32 states instead of the scalar loop of 8, for 96 bytes
// more states a payload.

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
