#include "src/size_arg.h"

#include <cctype>
#include <limits>

namespace brevis::cli {

std::optional<uint64_t> parse_size(std::string_view text) {
  uint64_t value = 0;
  size_t i = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]));
       ++i) {
    uint64_t digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (std::numeric_limits<uint64_t>::max() - digit) / 10) {
      return std::nullopt;
    }
    value = value * 10 + digit;
  }
  if (i == 0) return std::nullopt;
  std::string_view suffix = text.substr(i);
  unsigned shift = 0;
  if (!suffix.empty()) {
    switch (std::toupper(static_cast<unsigned char>(suffix[0]))) {
      case 'K':
        shift = 10;
        break;
      case 'M':
        shift = 20;
        break;
      case 'G':
        shift = 30;
        break;
      default:
        return std::nullopt;
    }
    std::string_view rest = suffix.substr(1);
    if (!(rest.empty() || rest == "B" || rest == "iB" || rest == "b" ||
          rest == "ib")) {
      return std::nullopt;
    }
  }
  if (shift != 0 && value > (std::numeric_limits<uint64_t>::max() >> shift)) {
    return std::nullopt;
  }
  return value << shift;
}

}  // namespace brevis::cli
