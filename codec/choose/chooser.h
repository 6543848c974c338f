#pragma once
// Chooses the program for each region. Until the synthesis search lands, the
// candidate chooser tries a few programs per region type on a sample and
// keeps the smallest; the search will implement this same interface.

#include <memory>

#include "codec/core/bytes.h"
#include "codec/dsl/program.h"
#include "codec/parse/region.h"

namespace brevis::codec {

class program_chooser {
 public:
  virtual ~program_chooser() = default;
  /// Picks a program for region `r`, whose bytes are `data`. The program
  /// must accept any bytes; chunks it cannot encode (errc::domain) are coded
  /// with fallback_program() by the archive writer. Thread-safe.
  virtual node choose(region const& r, byte_view data) const = 0;
};

/// The program every chunk can fall back to: it accepts any bytes.
node fallback_program();

/// The candidate chooser: a few programs per dtype, measured on a sample.
std::unique_ptr<program_chooser> make_candidate_chooser();

}  // namespace brevis::codec
