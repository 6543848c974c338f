// runs: elems<T> -> run values (same type) + run lengths (u32, each >= 1).
// Captures zero and constant regions. A run longer than 2^32 - 1 elements is
// cut into several. Side data: varint r, the number of runs.
#include <algorithm>
#include <cstring>
#include <vector>

#include "codec/dsl/operator.h"
#include "codec/dsl/scratch.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

constexpr value_type length_type = op_util::uint_type(4);
constexpr uint64_t max_run = 0xffffffffu;

// Calls f(value, length) for each run, in order.
template <typename T, typename F>
void for_each_run(uint8_t const* in, size_t count, F&& f) {
  size_t j = 0;
  while (j < count) {
    T const v = load_le<T>(in + j * sizeof(T));
    size_t end = j + 1;
    while (end < count && end - j < max_run &&
           load_le<T>(in + end * sizeof(T)) == v) {
      ++end;
    }
    f(v, static_cast<uint32_t>(end - j));
    j = end;
  }
}

// Two passes (count, then fill) so the outputs are sized exactly once.
// Branch-free where no run can reach max_run: the search tries runs on
// fields whose runs are a few elements long, where for_each_run's branches
// mispredicted every run (runs' encode was 2.5% of compressing
// handlandmark-full.bf16, all of it the search's).
template <typename T>
void encode_lanes(uint8_t const* in, size_t count, bytes& values,
                  bytes& lengths) {
  if (count > max_run) {
    size_t r = 0;
    for_each_run<T>(in, count, [&](T, uint32_t) { ++r; });
    // Reused buffers, fully written below: no zero-fill, no fresh pages.
    values = scratch::take(r * sizeof(T));
    lengths = scratch::take(r * 4);
    size_t i = 0;
    for_each_run<T>(in, count, [&](T v, uint32_t len) {
      store_le<T>(values.data() + i * sizeof(T), v);
      store_le<uint32_t>(lengths.data() + i * 4, len);
      ++i;
    });
    return;
  }
  if (count == 0) {
    values = scratch::take(0);
    lengths = scratch::take(0);
    return;
  }
  size_t r = 1;  // each element against the one before: vectorizes
  for (size_t j = 1; j < count; ++j) {
    r += load_le<T>(in + j * sizeof(T)) != load_le<T>(in + (j - 1) * sizeof(T));
  }
  values = scratch::take(r * sizeof(T));
  lengths = scratch::take(r * 4);
  uint8_t* const v = values.data();
  uint8_t* const len = lengths.data();
  // Run i's value is stored at its first element; its length, the
  // elements so far, at every element (the last store stands).
  size_t i = 0;
  size_t start = 0;
  T prev = load_le<T>(in);
  store_le<T>(v, prev);
  for (size_t j = 1; j < count; ++j) {
    T const e = load_le<T>(in + j * sizeof(T));
    bool const change = e != prev;
    store_le<uint32_t>(len + i * 4, static_cast<uint32_t>(j - start));
    i += change;
    start = change ? j : start;
    store_le<T>(v + i * sizeof(T), e);
    prev = e;
  }
  store_le<uint32_t>(len + i * 4, static_cast<uint32_t>(count - start));
}

template <typename T>
void decode_lanes(uint8_t const* values, uint8_t const* lengths, size_t runs,
                  uint8_t* out) {
  size_t j = 0;
  for (size_t i = 0; i < runs; ++i) {
    T const v = load_le<T>(values + i * sizeof(T));
    size_t const len = load_le<uint32_t>(lengths + i * 4);
    if constexpr (sizeof(T) == 1) {
      std::memset(out + j, v, len);
    } else {
      for (size_t e = 0; e < len; ++e)
        store_le<T>(out + (j + e) * sizeof(T), v);
    }
    j += len;
  }
}

class runs_op final : public op_def {
 public:
  opcode code() const override { return opcode::runs; }
  std::string_view name() const override { return "runs"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_valid_width(in);
    op_util::expect_params(n, 0, "runs takes no parameters");
    return {in, length_type};
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes& side) const override {
    std::vector<value_type> const types = child_types(n, in.type);
    stream values{{}, types[0]};
    stream lengths{{}, types[1]};
    op_util::with_lane(in.type.width, [&]<typename T>() {
      encode_lanes<T>(in.data.data(), in.count(), values.data, lengths.data);
    });
    put_varint(side, lengths.count());
    out.push_back(std::move(values));
    out.push_back(std::move(lengths));
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader& side) const override {
    child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    size_t const r = read_runs(side, count);
    return {r * in.width, r * length_type.width};
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size,
              byte_view side, uint8_t* out) const override {
    child_types(n, in);
    size_t const count = op_util::element_count(out_size, in);
    byte_reader reader(side);
    size_t const r = read_runs(reader, count);
    op_util::expect_children(children, {r * in.width, r * length_type.width},
                             name());
    // Every length >= 1 and their sum == count, checked before writing; the
    // running sum stays <= count + 2^32, so it cannot overflow.
    uint8_t const* lengths = children[1].data.data();
    uint64_t sum = 0;
    for (size_t i = 0; i < r; ++i) {
      uint32_t const len = load_le<uint32_t>(lengths + i * 4);
      fail_if(len == 0, errc::corrupt, "run of length zero");
      sum += len;
      fail_if(sum > count, errc::corrupt, "run lengths exceed the output");
    }
    fail_if(sum != count, errc::corrupt,
            "run lengths fall short of the output");
    op_util::with_lane(in.width, [&]<typename T>() {
      decode_lanes<T>(children[0].data.data(), lengths, r, out);
    });
  }

 private:
  static size_t read_runs(byte_reader& side, size_t count) {
    uint64_t const r = side.varint();
    fail_if(r > count, errc::corrupt, "more runs than elements");
    return static_cast<size_t>(r);
  }
};

}  // namespace

op_def const& runs_op_def() {
  static runs_op const instance;
  return instance;
}

}  // namespace brevis::codec
