// Fuzz target: the checkpoint parsers (codec/parse), which read untrusted
// files during compression. Input layout: one byte choosing the file name
// hint (which orders the parsers tried), then the file. Parsing never
// throws; whatever the bytes, the regions must cover the file exactly, and
// a tensor of a fixed-width type with a known shape must be that many
// elements long.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <string_view>

#include "codec/parse/region.h"

extern "C" int LLVMFuzzerTestOneInput(uint8_t const* data, size_t size) {
  using namespace brevis::codec;
  if (size == 0) return 0;
  static constexpr std::string_view hints[] = {
      "", "model.safetensors", "model.pt", "model.gguf", "array.npy"};
  std::string_view const hint = hints[data[0] % std::size(hints)];
  byte_view const file(data + 1, size - 1);
  parsed_file const p = parse_regions(file, hint);
  if (!regions_cover(p.regions, file.size())) std::abort();
  for (region const& r : p.regions) {
    unsigned const width = dtype_width(r.type);
    if (r.kind != region_kind::tensor || width == 0 || r.shape.empty()) {
      continue;
    }
    uint64_t elements = 1;
    for (uint64_t d : r.shape) {
      if (d != 0 && elements > UINT64_MAX / d) std::abort();
      elements *= d;
    }
    if (elements > UINT64_MAX / width || elements * width != r.length) {
      std::abort();
    }
  }
  return 0;
}
