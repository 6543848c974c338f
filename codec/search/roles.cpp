#include "codec/search/roles.h"

#include <cctype>

namespace brevis::codec::search {

std::string role_of(region const& r) {
  if (r.kind != region_kind::tensor) return {};
  std::string key = dtype_name(r.type);
  key += '|';
  for (char c : r.name) {
    if (!std::isdigit(static_cast<unsigned char>(c))) key += c;
  }
  for (uint64_t d : r.shape) key += '|' + std::to_string(d);
  // No shape (a .pt storage whose pickle gives none): its length stands in.
  if (r.shape.empty()) key += "|#" + std::to_string(r.length);
  return key;
}

}  // namespace brevis::codec::search
