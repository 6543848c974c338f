#include "codec/choose/small_tensors.h"

#include <memory>
#include <string>
#include <unordered_map>

#include "codec/container/format.h"
#include "codec/core/checksum.h"

namespace brevis::codec {
namespace {

// A tensor's values are continuous when it has at least one distinct value
// per this many elements. (Weights of the corpus have one per 1 to 2;
// tensors dequantized from 8 bits have at most 256.)
constexpr uint64_t elements_per_distinct = 4;

bool float_type(dtype t) {
  return t == dtype::f16 || t == dtype::bf16 || t == dtype::f32;
}

// Counts distinct elements of small tensors, by 16-bit keys (32-bit
// elements folded in half): a stamp per key, so that no tensor clears the
// table.
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
  std::unique_ptr<uint32_t[]> stamps_;  // zeroed; stamp 0 is never used
  uint32_t stamp_ = 0;                  // one a tensor: cannot wrap here
};

// "FIRST .. LAST (N tensors)", within the index's limit: where the names are
// too long, each is cut to its share, so that both ends and the count show.
std::string run_name(std::string first, std::string last, size_t tensors) {
  std::string const suffix = " (" + std::to_string(tensors) + " tensors)";
  std::string const between = " .. ";
  size_t const room = brv::max_name_length - suffix.size() - between.size();
  if (first.size() + last.size() > room) {
    cut_name(first, room / 2);
    cut_name(last, room - first.size());
  }
  return first + between + last + suffix;
}

}  // namespace

std::vector<region> join_small_tensors(byte_view file,
                                       std::vector<region> regions,
                                       uint32_t chunk_size) {
  distinct_counter counter;
  // Whether region i may join a run, decided once a region.
  std::vector<bool> joinable(regions.size());
  // A tensor whose bytes another holds too stays alone, a chunk of its own
  // that the archive writes as a ref to the other (section 5.4): in a run,
  // whose neighbours differ, it would be coded again (the 2 GB benchmark
  // checkpoint, whose bf16 and fp32 sources give equal tensors: 166 fewer
  // refs, 0.024% larger). By XXH3 and length; a collision only keeps a
  // tensor apart.
  std::vector<uint64_t> key(regions.size());
  std::unordered_map<uint64_t, uint32_t> seen;
  for (size_t i = 0; i < regions.size(); ++i) {
    region const& r = regions[i];
    if (r.kind != region_kind::tensor || !float_type(r.type) || r.length == 0 ||
        r.length >= small_tensor_bytes || r.offset + r.length > file.size()) {
      continue;
    }
    unsigned const width = dtype_width(r.type);  // 2 or 4
    if (r.length % width != 0) continue;
    byte_view const data = file.subspan(r.offset, r.length);
    joinable[i] =
        counter.count(data, width) * elements_per_distinct >= r.length / width;
    if (joinable[i]) {
      key[i] = xxh3(data) ^ (r.length * 0x9e3779b97f4a7c15);
      ++seen[key[i]];
    }
  }
  for (size_t i = 0; i < regions.size(); ++i) {
    if (joinable[i] && seen[key[i]] > 1) joinable[i] = false;
  }
  std::vector<region> out;
  out.reserve(regions.size());
  for (size_t i = 0; i < regions.size();) {
    size_t end = i + 1;
    uint64_t length = regions[i].length;
    uint32_t tensors = regions[i].tensors;
    if (joinable[i]) {
      while (end < regions.size() && joinable[end] &&
             regions[end].type == regions[i].type &&
             regions[end].offset == regions[i].offset + length &&
             length + regions[end].length <= chunk_size) {
        length += regions[end].length;
        tensors += regions[end].tensors;
        ++end;
      }
    }
    if (end - i < 2) {
      out.push_back(std::move(regions[i]));
      ++i;
      continue;
    }
    region run = std::move(regions[i]);
    run.name = run_name(std::move(run.name), regions[end - 1].name, tensors);
    run.length = length;
    run.shape.clear();
    run.tensors = tensors;
    out.push_back(std::move(run));
    i = end;
  }
  return out;
}

}  // namespace brevis::codec
