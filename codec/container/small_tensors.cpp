#include "codec/container/small_tensors.h"

#include <memory>
#include <string>

#include "codec/container/format.h"

namespace brevis::codec {
namespace {

// A tensor's values are continuous when it has at least one distinct value
// per this many elements. (Weights of the corpus have one per 1 to 2;
// tensors dequantized from 8 bits have at most 256.)
constexpr uint64_t elements_per_distinct = 4;

bool float_type(dtype t) {
  return t == dtype::f16 || t == dtype::bf16 || t == dtype::f32;
}

// Counts distinct elements of small tensors, 16-bit keys (32-bit elements
// folded in half): a stamp per key, so that no tensor clears the table.
class distinct_counter {
 public:
  uint64_t count(byte_view data, unsigned width) {
    if (!stamps_) stamps_ = std::make_unique<uint32_t[]>(65536);
    ++stamp_;
    uint64_t distinct = 0;
    for (size_t i = 0; i + width <= data.size(); i += width) {
      uint32_t key = width == 2 ? load_le<uint16_t>(data.data() + i)
                                : load_le<uint32_t>(data.data() + i);
      key = (key ^ (key >> 16)) & 0xffff;
      distinct += stamps_[key] != stamp_;
      stamps_[key] = stamp_;
    }
    return distinct;
  }

 private:
  std::unique_ptr<uint32_t[]> stamps_;  // zeroed; a stamp 0 is never used
  uint32_t stamp_ = 0;
};

}  // namespace

std::vector<region> join_small_tensors(byte_view file,
                                       std::vector<region> regions,
                                       uint32_t chunk_size) {
  distinct_counter counter;
  // Whether region i may join a run, decided once a region.
  std::vector<bool> joinable(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    region const& r = regions[i];
    if (r.kind != region_kind::tensor || !float_type(r.type) ||
        r.length >= small_tensor_bytes || r.length == 0 ||
        r.offset + r.length > file.size()) {
      continue;
    }
    unsigned const width = dtype_width(r.type);
    uint64_t const n = r.length / width;
    joinable[i] = counter.count(file.subspan(r.offset, r.length), width) *
                      elements_per_distinct >=
                  n;
  }
  std::vector<region> out;
  out.reserve(regions.size());
  for (size_t i = 0; i < regions.size();) {
    size_t end = i + 1;
    uint64_t length = regions[i].length;
    if (joinable[i]) {
      while (end < regions.size() && joinable[end] &&
             regions[end].type == regions[i].type &&
             length + regions[end].length <= chunk_size) {
        length += regions[end].length;
        ++end;
      }
    }
    if (end - i < 2) {
      out.push_back(std::move(regions[i]));
      ++i;
      continue;
    }
    region run = std::move(regions[i]);
    run.length = length;
    run.shape.clear();
    run.tensors = static_cast<uint32_t>(end - i);
    run.name += " .. " + regions[end - 1].name + " (" +
                std::to_string(end - i) + " tensors)";
    if (run.name.size() > brv::max_name_length) {
      run.name.resize(brv::max_name_length);
    }
    out.push_back(std::move(run));
    i = end;
  }
  return out;
}

}  // namespace brevis::codec
