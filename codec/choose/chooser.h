#pragma once
// Chooses the program for each region: the interface the archive writer
// and the store call; the synthesis search (codec/search) implements it.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/dsl/program.h"
#include "codec/parse/region.h"

namespace brevis::codec {

/// How a chooser found a region's program (shown by `brevis inspect`).
struct choice_record {
  double estimated_bytes = 0;  // program + payload the chooser expected
  uint32_t expansions = 0;     // search steps spent
  double ms = 0;               // time spent choosing (work_clock.h)
  // Time (work_clock.h), spent while choosing (for the file or this region), on
  // work whose result the encoder takes as its input: the region's symbol count
  // and the static tables built from it, which an order-0 coder would
  // otherwise compute as it encodes. `brevis compress -v` reports choosing
  // with and without it. Not stored in the archive.
  double coding_ms = 0;
};

class program_chooser {
 public:
  virtual ~program_chooser() = default;
  /// Picks a program for region `r`, whose bytes are `data`. The program
  /// must accept any bytes; chunks it cannot encode (errc::domain) are coded
  /// with fallback_program() by the archive writer. Thread-safe.
  virtual node choose(region const& r, byte_view data) const = 0;

  /// Same, also recording how the program was found; false when this
  /// chooser keeps no record (the default). Thread-safe.
  virtual bool choose_recorded(region const& r, byte_view data, node& program,
                               choice_record& how) const {
    program = choose(r, data);
    (void)how;
    return false;
  }

  /// Offsets inside region `r` (bytes `data`) where it should be cut into
  /// separate regions, each with its own program: where an untyped region's
  /// statistics change. Increasing, inside (0, r.length). Called by the
  /// archive writer once per region, before for_file().
  virtual std::vector<uint64_t> cut_points(region const& /*r*/,
                                           byte_view /*data*/) const {
    return {};
  }

  /// Whether the archive writer may code a run of small tensors as one
  /// region (join_small_tensors, codec/choose/small_tensors.h): for a file
  /// on its own. Not where equal tensors of different files are to be
  /// stored once (the store), as a run's bytes depend on its neighbours.
  virtual bool joins_small_tensors() const { return false; }

  /// What the chooser learned about the file (for_file's result), for
  /// `brevis compress -v`; empty when nothing.
  virtual std::string summary() const { return {}; }

  /// A chooser for the regions of one file (`regions` cover `file`), which
  /// may share tables between its tensors; nullptr: use this one. The
  /// archive writer calls it once per file, before any choose().
  virtual std::unique_ptr<program_chooser> for_file(
      byte_view /*file*/, std::span<region const> /*regions*/) const {
    return nullptr;
  }
};

/// A chooser that always records how it found a program: choose() is
/// choose_recorded() with the record dropped.
class recording_chooser : public program_chooser {
 public:
  node choose(region const& r, byte_view data) const final {
    node program;
    choice_record how;
    choose_recorded(r, data, program, how);
    return program;
  }
  bool choose_recorded(region const& r, byte_view data, node& program,
                       choice_record& how) const override = 0;
};

/// The program every chunk can fall back to: it accepts any bytes.
node fallback_program();

/// Whether small tensors of one file may share an entropy table. Sharing
/// gains ratio in a standalone archive; a content-addressed store wants the
/// same tensor to code to the same payload in every file it appears in, so
/// that it is stored once, and codes each region on its own.
enum class table_sharing { per_file, per_region };

}  // namespace brevis::codec
