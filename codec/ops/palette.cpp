// palette: elems<T> -> dictionary (the k distinct values, ascending, same type
// as the input) + indices into it. Captures tensors with few distinct values
// (norms, biases, fp32 copies of quantized weights).
//
// The index lane is static (program types do not depend on data): param
// [iw] = 1 gives u8 indices (k <= 256), 2 gives u16 indices (k <= 65536);
// without the param it is 1 for byte input and 2 otherwise. The encoder
// throws errc::domain when the input has more distinct values than fit.
// Side data: varint k.
#include <algorithm>
#include <bit>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "codec/dsl/operator.h"
#include "codec/dsl/scratch.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

// Not narrowed before the caller checks it: a param of 2^32 + 1 is not 1.
uint64_t index_width(node const& n, value_type in) {
  return n.params.empty() ? (in.width == 1 ? 1 : 2) : n.params[0];
}

size_t max_entries(unsigned iw) { return iw == 1 ? 256 : 65536; }

// Distinct values and the index of each, by direct table: for u8 and u16,
// where a table over every possible value is small (64K entries).
template <typename T, typename I>
void encode_by_table(uint8_t const* in, size_t count, size_t max_k, bytes& dict,
                     bytes& indices) {
  constexpr size_t range = size_t{1} << (8 * sizeof(T));
  std::vector<uint8_t> seen(range, 0);
  for (size_t j = 0; j < count; ++j) seen[load_le<T>(in + j * sizeof(T))] = 1;
  auto index = std::make_unique_for_overwrite<I[]>(range);
  size_t k = 0;
  dict.reserve(std::min(count, max_k) * sizeof(T));
  for (size_t v = 0; v < range; ++v) {
    if (!seen[v]) continue;
    fail_if(k == max_k, errc::domain, "palette: too many distinct values");
    index[v] = static_cast<I>(k++);
    put_le<T>(dict, static_cast<T>(v));
  }
  indices = scratch::take(count * sizeof(I));  // fully written below
  uint8_t* out = indices.data();
  for (size_t j = 0; j < count; ++j) {
    store_le<I>(out + j * sizeof(I), index[load_le<T>(in + j * sizeof(T))]);
  }
}

// Open-addressing hash from value to the order of its first appearance, for
// u32 and u64 lanes (and small u16 inputs). Key and id share a slot so a
// probe touches one cache line. Sized for max_keys at load <= 2/3, so a
// too-varied input is rejected after max_k + 1 insertions.
template <typename T>
class first_seen_table {
 public:
  explicit first_seen_table(size_t max_keys) {
    size_t cap = 16;
    while (cap < max_keys + max_keys / 2) cap *= 2;
    shift_ = 64 - std::countr_zero(cap);
    slots_.assign(cap, slot{T{0}, empty});
  }

  // The id of `v`, which becomes `next` (and next is bumped) when absent.
  uint32_t id(T v, uint32_t& next) {
    size_t const mask = slots_.size() - 1;
    for (size_t s = hash(v);; s = (s + 1) & mask) {
      slot& e = slots_[s];
      if (e.id == empty) {
        e = slot{v, next};
        return next++;
      }
      if (e.key == v) return e.id;
    }
  }

 private:
  static constexpr uint32_t empty = ~uint32_t{0};
  struct slot {
    T key;
    uint32_t id;
  };

  size_t hash(T v) const {
    return static_cast<size_t>((uint64_t{v} * 0x9e3779b97f4a7c15ULL) >> shift_);
  }

  int shift_ = 0;
  std::vector<slot> slots_;
};

// One hashing pass writes provisional ids (order of first appearance) as the
// indices; sorting the distinct values gives each id its rank, and a
// sequential pass renumbers the indices.
template <typename T, typename I>
void encode_by_hash(uint8_t const* in, size_t count, size_t max_k, bytes& dict,
                    bytes& indices) {
  first_seen_table<T> table(std::min(count, max_k + 1));
  std::vector<T> values;                       // by id
  indices = scratch::take(count * sizeof(I));  // fully written below
  uint8_t* out = indices.data();
  uint32_t next = 0;
  uint32_t id = 0;
  for (size_t j = 0; j < count; ++j) {
    T const v = load_le<T>(in + j * sizeof(T));
    // Runs of one value are common (zeros): skip the probe for them.
    if (j == 0 || v != load_le<T>(in + (j - 1) * sizeof(T))) {
      id = table.id(v, next);
      if (id == values.size()) {
        fail_if(next > max_k, errc::domain,
                "palette: too many distinct values");
        values.push_back(v);
      }
    }
    store_le<I>(out + j * sizeof(I), static_cast<I>(id));
  }
  // Sort (value, id) pairs: contiguous, no indirection in the comparisons.
  std::vector<std::pair<T, uint32_t>> sorted(values.size());
  for (uint32_t i = 0; i < sorted.size(); ++i) sorted[i] = {values[i], i};
  std::sort(sorted.begin(), sorted.end());
  std::vector<I> rank(sorted.size());
  dict.resize(sorted.size() * sizeof(T));
  for (size_t r = 0; r < sorted.size(); ++r) {
    rank[sorted[r].second] = static_cast<I>(r);
    store_le<T>(dict.data() + r * sizeof(T), sorted[r].first);
  }
  for (size_t j = 0; j < count; ++j) {
    store_le<I>(out + j * sizeof(I), rank[load_le<I>(out + j * sizeof(I))]);
  }
}

template <typename T, typename I>
void decode_lanes(byte_view dict, byte_view indices, size_t count, size_t k,
                  uint8_t* out) {
  // Validate every index first (a branch-free max), then gather.
  I max_index = 0;
  for (size_t j = 0; j < count; ++j) {
    max_index = std::max(max_index, load_le<I>(indices.data() + j * sizeof(I)));
  }
  fail_if(count > 0 && size_t{max_index} >= k, errc::corrupt,
          "palette index out of range");
  std::vector<T> values(k);
  if (k > 0) std::memcpy(values.data(), dict.data(), k * sizeof(T));
  for (size_t j = 0; j < count; ++j) {
    store_le<T>(out + j * sizeof(T),
                values[load_le<I>(indices.data() + j * sizeof(I))]);
  }
}

class palette_op final : public op_def {
 public:
  opcode code() const override { return opcode::palette; }
  std::string_view name() const override { return "palette"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_valid_width(in);
    fail_if(n.params.size() > 1 || !n.blob.empty(), errc::bad_program,
            "palette takes at most one parameter (index width)");
    uint64_t const iw = index_width(n, in);
    fail_if(iw != 1 && iw != 2, errc::bad_program,
            "palette index width must be 1 or 2");
    fail_if(iw > in.width, errc::bad_program,
            "palette indices wider than the values");
    return {in, op_util::uint_type(static_cast<uint8_t>(iw))};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes& side) const override {
    std::vector<value_type> const types = child_types(n, in.type);
    size_t const count = in.count();
    size_t const max_k = max_entries(types[1].width);
    stream dict{{}, types[0]};
    stream indices{{}, types[1]};
    uint8_t const* data = in.data.data();
    op_util::with_lane(in.type.width, [&]<typename T>() {
      auto run = [&]<typename I>() {
        // A table over all 64K u16 values pays off only on large inputs.
        if constexpr (sizeof(T) <= 2) {
          if (sizeof(T) == 1 || count >= 16384) {
            encode_by_table<T, I>(data, count, max_k, dict.data, indices.data);
            return;
          }
        }
        encode_by_hash<T, I>(data, count, max_k, dict.data, indices.data);
      };
      if (types[1].width == 1) {
        run.template operator()<uint8_t>();
      } else {
        run.template operator()<uint16_t>();
      }
    });
    put_varint(side, dict.count());
    out.push_back(std::move(dict));
    out.push_back(std::move(indices));
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader& side) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    size_t const k = read_k(side, count, types[1].width);
    return {k * in.width, count * types[1].width};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size,
              byte_view side, uint8_t* out) const override {
    std::vector<value_type> const types = child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    byte_reader r(side);
    size_t const k = read_k(r, count, types[1].width);
    unsigned const iw = types[1].width;
    op_util::expect_children(children, {k * in.width, count * iw}, name());
    op_util::with_lane(in.width, [&]<typename T>() {
      if (iw == 1) {
        decode_lanes<T, uint8_t>(children[0].data, children[1].data, count, k,
                                 out);
      } else {
        decode_lanes<T, uint16_t>(children[0].data, children[1].data, count, k,
                                  out);
      }
    });
  }

 private:
  static size_t read_k(byte_reader& side, size_t count, unsigned iw) {
    uint64_t const k = side.varint_max(max_entries(iw), "palette size");
    fail_if(k > count, errc::corrupt, "palette larger than its input");
    fail_if(k == 0 && count > 0, errc::corrupt, "empty palette");
    return static_cast<size_t>(k);
  }
};

}  // namespace

op_def const& palette_op_def() {
  static palette_op const instance;
  return instance;
}

}  // namespace brevis::codec
