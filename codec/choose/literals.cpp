#include "codec/choose/literals.h"

#include <algorithm>

namespace brevis::codec {
namespace {

constexpr uint64_t max_literal_region = 64u << 10;
constexpr uint64_t max_literal_tensor = 64;
constexpr uint64_t max_literal_bytes = 512u << 10;  // per file

}  // namespace

std::unordered_set<uint64_t> literal_regions(std::span<region const> regions) {
  std::unordered_set<uint64_t> out;
  if (std::none_of(regions.begin(), regions.end(), [](region const& r) {
        return r.kind == region_kind::tensor;
      })) {
    return out;
  }
  uint64_t budget = max_literal_bytes;
  for (region const& r : regions) {
    uint64_t const max =
        r.kind == region_kind::opaque ? max_literal_region : max_literal_tensor;
    if (r.length == 0 || r.length > max || r.length > budget) continue;
    budget -= r.length;
    out.insert(r.offset);
  }
  return out;
}

node literal_program(byte_view data) {
  node n = make_leaf(opcode::literal);
  n.blob.assign(data.begin(), data.end());
  return n;
}

}  // namespace brevis::codec
