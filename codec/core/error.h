#pragma once
// Errors of the codec. Every failure the codec reports is a
// brevis::codec::error carrying one of the pinned codes below and a one-line
// message that names the problem. Values are stable (they appear in logs); new
// ones get new numbers.

#include <cstdint>
#include <stdexcept>
#include <string>
#include <system_error>

namespace brevis::codec {

enum class errc : int {
  ok = 0,
  // Container framing.
  truncated = 10,            // input ends before a structure does
  bad_magic = 12,            // not a brevis archive
  unsupported_version = 14,  // a major version this decoder does not know
  reserved_nonzero = 16,     // a must-be-zero field is not zero
  // Corruption.
  corrupt = 20,   // a structure is inconsistent (sizes, counts, offsets)
  checksum = 22,  // decoded bytes do not match their XXH3
  // Limits and programs.
  limit = 30,        // a declared size exceeds what the decoder accepts
  bad_program = 32,  // a program is malformed or ill-typed
  // Encoding.
  domain = 40,  // an operator cannot encode this input (the caller falls back)
  // Environment.
  io = 50,  // reading or writing a file failed
};

std::error_category const& codec_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), codec_category()};
}

class error : public std::runtime_error {
 public:
  error(errc code, std::string const& message)
      : std::runtime_error(message), code_(code) {}
  errc code() const noexcept { return code_; }

 private:
  errc code_;
};

/// Throws error(code, message). Kept out of line so hot paths stay small.
[[noreturn]] void fail(errc code, std::string const& message);

/// Throws error(code, message) when `condition` holds.
inline void fail_if(bool condition, errc code, char const* message) {
  if (condition) [[unlikely]] {
    fail(code, message);
  }
}

}  // namespace brevis::codec

template <>
struct std::is_error_code_enum<brevis::codec::errc> : std::true_type {};
