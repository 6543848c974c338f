#pragma once
// The `classes` candidate (codec/ops/classes.cpp): a bf16/fp16 tensor whose
// channels (columns: the last dimension; or rows) carry scales of their own
// is coded as groups of channels of similar exponent statistics, the
// tensor's own program (closed_form.h) coding each group's exponent field
// by a leaf and table of its own.
//
// One table per tensor pays for the mix of every channel's exponents; a
// group's exponents are narrower. Choosing is cheap: one pass over a sample
// counts each channel's exponents (16 buckets), a closed-form floor (every
// channel its own table) picks columns or rows and drops tensors with no
// room for a gain, and Lloyd rounds on the dense counts find 4 classes.
// Then one pass over the tensor counts each class's sign and exponent (bf16;
// fp16: its high byte) and, where needed, its mantissa (fp16: low byte),
// and the programs below are costed from those counts in closed form: the
// tensor's bitfields (bf16) or planes (fp16) program with that leaf replaced
// by one a class (a stream and table more a class, not two); that split
// over the classes, the mantissa shared; the classes each with a split of
// its own; or, for tensors of few values coded by one table, each class its
// own table (counted by the values' indexes in the tensor's). Only the
// winner's tables are built.

#include <memory>
#include <optional>
#include <vector>

#include "codec/choose/chooser.h"
#include "codec/core/bytes.h"
#include "codec/dsl/program.h"
#include "codec/parse/region.h"

namespace brevis::codec::search {

struct classes_choice {
  node program;  // view(classes(...)(one closed-form program per class), raw)
  double estimated_bytes = 0;
  bool rows = false;  // grouped by rows (else by columns)
  // Thread CPU ms (work_clock.h) of the work whose results the program's
  // coders take as input: the passes counting what its tables were built
  // from. Choosing alone is the rest.
  double coding_ms = 0;
  // Whether the inner program's tables still code (the classes replaced
  // its exponent leaf alone).
  bool keeps_inner_tables = false;
};

/// The `classes` program of region `r` (its whole bytes `data`), when `r` is
/// a bf16/fp16 tensor of rank >= 2 whose channels group into classes that
/// code the exponent field of `inner` (its program, view(split(...), raw),
/// estimated `to_beat` bytes) enough smaller; its static tables built. Its
/// estimate counts each leaf's framing once per archive chunk of
/// `chunk_size` bytes.
std::optional<classes_choice> classes_program(region const& r, byte_view data,
                                              node const& inner, double to_beat,
                                              uint32_t chunk_size = 1u << 20);

/// How classes_program groups the channels of a tensor: the class of each
/// column (or row), of `k`. Read from the data alone, not from the inner
/// program: the chooser's second try, on a sparse program's plain table,
/// reuses it.
struct channel_classes {
  std::vector<uint8_t> map;
  unsigned k = 0;
  bool rows = false;  // grouped by rows (else by columns)
};

/// The classes of the channels of region `r` (bytes `data`), when it is a
/// tensor classes_program takes and a grouping leaves room for the gain
/// asked of a program of `to_beat` bytes: classes_program's first step.
std::optional<channel_classes> channel_classes_of(region const& r,
                                                  byte_view data,
                                                  double to_beat);

/// classes_program with its first step's classes given (`grouping`, of
/// channel_classes_of(r, data, to_beat)); none for a grouping that does not
/// fit `r`.
std::optional<classes_choice> classes_program(region const& r, byte_view data,
                                              node const& inner, double to_beat,
                                              channel_classes const& grouping,
                                              uint32_t chunk_size = 1u << 20);

/// Wraps `inner`: each region's program is the inner chooser's, or the
/// classes program when that is estimated smaller (in an archive of chunks
/// of `chunk_size` bytes).
std::unique_ptr<program_chooser> with_classes(
    std::unique_ptr<program_chooser> inner, uint32_t chunk_size);

}  // namespace brevis::codec::search
