#include "codec/core/error.h"

namespace brevis::codec {
namespace {

class category final : public std::error_category {
 public:
  char const* name() const noexcept override { return "brevis"; }
  std::string message(int value) const override {
    switch (static_cast<errc>(value)) {
      case errc::ok:
        return "ok";
      case errc::truncated:
        return "truncated input";
      case errc::bad_magic:
        return "not a brevis archive (bad magic)";
      case errc::unsupported_version:
        return "unsupported format version";
      case errc::reserved_nonzero:
        return "reserved field is not zero";
      case errc::corrupt:
        return "corrupt data";
      case errc::checksum:
        return "checksum mismatch";
      case errc::limit:
        return "declared size exceeds decoder limit";
      case errc::bad_program:
        return "malformed program";
      case errc::domain:
        return "input outside the operator's domain";
      case errc::io:
        return "i/o error";
    }
    return "unknown error";
  }
};

}  // namespace

std::error_category const& codec_category() noexcept {
  static category const instance;
  return instance;
}

void fail(errc code, std::string const& message) { throw error(code, message); }

}  // namespace brevis::codec
