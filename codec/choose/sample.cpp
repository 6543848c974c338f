#include "codec/choose/sample.h"

#include <algorithm>

namespace brevis::codec {

bytes sample_slices(byte_view data, unsigned width, size_t want,
                    size_t slices) {
  want = std::min(want, data.size());
  if (want >= data.size() || want == 0 || slices < 2) {
    return bytes(data.begin(), data.end());
  }
  width = std::max(1u, width);
  size_t slice = want / slices;
  slice = std::max<size_t>(width, slice / width * width);
  bytes out;
  out.reserve(slice * slices);
  for (size_t i = 0; i < slices; ++i) {
    size_t start = (data.size() - slice) * i / (slices - 1);
    start = start / width * width;
    out.insert(out.end(), data.begin() + start, data.begin() + start + slice);
  }
  return out;
}

}  // namespace brevis::codec
