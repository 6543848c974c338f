#pragma once
// What the malformed-input tests assert: which error a call fails with.

#include "codec/core/error.h"

namespace brevis::codec::testing {

/// The code of the brevis error that f() throws, or errc::ok if it returns.
errc code_of(auto&& f) {
  try {
    f();
  } catch (error const& e) {
    return e.code();
  }
  return errc::ok;
}

}  // namespace brevis::codec::testing
