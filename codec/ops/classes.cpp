// classes(stride, k; blob = class map): elems<T> -> k values of the same
// type, child c holding, in order, the elements whose class is c. Element i
// has class map[(i / stride) mod period], period = the blob's length.
//
// Folded convolution weights carry a scale per output channel (the last
// dimension, so stride 1 and period = the channel count) or per input
// channel (stride = the channel count, a class per row): grouping the
// channels of similar scale gives each group its own tables, whose
// exponents are far narrower than the tensor's. On the bf16/fp16 corpus
// it codes the 82 bf16/fp16 safetensors files in 202,773,038 B instead of
// 206,036,010 B with one program per tensor (99.95% of the order-0 bound)
// when every tensor is tried at 4 and 8 classes; the default's cheaper
// choice (classes_candidate.cpp, classes of the exponent field alone) in
// 203,582,654 B.
//
// No side data: the child sizes follow from the output size, the params and
// the map. Decoding scatters each child back to its positions.
#include "codec/ops/classes.h"

#include <cstring>
#include <string>
#include <vector>

#include "codec/dsl/operator.h"
#include "codec/ops/op_util.h"

namespace brevis::codec {
namespace {

struct layout {
  uint64_t stride;
  unsigned k;
  byte_view map;
};

// Validates the node (FORMAT.md 4.5, `classes`) and returns its layout.
layout layout_of(node const& n) {
  fail_if(n.params.size() != 2, errc::bad_program,
          "classes takes two parameters (stride, classes)");
  fail_if(n.blob.empty(), errc::bad_program, "classes needs a class map");
  uint64_t const stride = n.params[0];
  uint64_t const k = n.params[1];
  fail_if(stride == 0 || stride > classes_max_stride, errc::bad_program,
          "classes: stride out of range");
  fail_if(k == 0 || k > classes_max_count, errc::bad_program,
          "classes: class count out of range");
  uint8_t top = 0;
  for (uint8_t c : n.blob) top = std::max(top, c);
  fail_if(top >= k, errc::bad_program, "classes: map names a missing class");
  return {stride, static_cast<unsigned>(k), byte_view(n.blob)};
}

// Element counts of each class among the first `count` elements.
std::vector<size_t> class_counts(layout const& l, size_t count) {
  std::vector<size_t> per(l.k, 0);
  uint64_t const period = l.map.size();
  uint64_t const cycle = l.stride * period;  // <= 2^32 * 2^20
  uint64_t const full = count / cycle;
  uint64_t const rest = count % cycle;
  for (uint8_t c : l.map) per[c] += full * l.stride;
  for (uint64_t j = 0; j * l.stride < rest; ++j) {
    per[l.map[j]] += std::min(l.stride, rest - j * l.stride);
  }
  return per;
}

// Calls run(c, at, len) for every run of elements of one class, in order:
// elements [at, at + len) have class c.
template <typename F>
void for_each_run(layout const& l, size_t count, F&& run) {
  size_t at = 0;
  while (at < count) {
    for (size_t j = 0; j < l.map.size() && at < count; ++j) {
      size_t const len =
          static_cast<size_t>(std::min<uint64_t>(l.stride, count - at));
      run(l.map[j], at, len);
      at += len;
    }
  }
}

// Stride 1: each class's positions in one period, so that a cycle moves
// every class's elements with one indexed loop (no per-element class
// lookup and cursor): measured on 1x1x1632x272 bf16 weights at 8 classes.
struct positions {
  std::vector<uint32_t> at;     // positions, grouped by class
  std::vector<uint32_t> first;  // class c's positions: [first[c], first[c+1])
};

positions positions_of(layout const& l) {
  positions p;
  p.first.assign(l.k + 1, 0);
  for (uint8_t c : l.map) ++p.first[c + 1];
  for (unsigned c = 0; c < l.k; ++c) p.first[c + 1] += p.first[c];
  p.at.resize(l.map.size());
  std::vector<uint32_t> next(p.first.begin(), p.first.end() - 1);
  for (size_t j = 0; j < l.map.size(); ++j) {
    p.at[next[l.map[j]]++] = static_cast<uint32_t>(j);
  }
  return p;
}

// Moves elements between the value (`whole`) and the children (`parts`):
// gather when `to_parts`, else scatter. Lanes are copied bytewise (children
// may be unaligned slices of the payload); the copies compile to moves.
template <typename T, bool to_parts>
void move_lanes(layout const& l, size_t count, uint8_t* whole,
                std::vector<uint8_t*> const& parts) {
  constexpr size_t w = sizeof(T);
  auto move = [](uint8_t* part, uint8_t* elem) {
    if constexpr (to_parts) {
      std::memcpy(part, elem, w);
    } else {
      std::memcpy(elem, part, w);
    }
  };
  std::vector<uint8_t*> cur(parts);
  size_t const period = l.map.size();
  if (l.stride == 1) {
    positions const p = positions_of(l);
    size_t const cycles = count / period;
    for (size_t r = 0; r < cycles; ++r) {
      uint8_t* row = whole + r * period * w;
      for (unsigned c = 0; c < l.k; ++c) {
        uint32_t const* at = p.at.data() + p.first[c];
        size_t const m = p.first[c + 1] - p.first[c];
        uint8_t* q = cur[c];
        // Four a loop: the loop's own count, compare and branch were a
        // third of each element's instructions.
        size_t t = 0;
        for (; t + 4 <= m; t += 4) {
          move(q + t * w, row + at[t] * w);
          move(q + (t + 1) * w, row + at[t + 1] * w);
          move(q + (t + 2) * w, row + at[t + 2] * w);
          move(q + (t + 3) * w, row + at[t + 3] * w);
        }
        for (; t < m; ++t) move(q + t * w, row + at[t] * w);
        cur[c] = q + m * w;
      }
    }
    for (size_t i = cycles * period; i < count; ++i) {
      uint8_t const c = l.map[i - cycles * period];
      move(cur[c], whole + i * w);
      cur[c] += w;
    }
    return;
  }
  for_each_run(l, count, [&](uint8_t c, size_t at, size_t len) {
    if constexpr (to_parts) {
      std::memcpy(cur[c], whole + at * w, len * w);
    } else {
      std::memcpy(whole + at * w, cur[c], len * w);
    }
    cur[c] += len * w;
  });
}

class classes_op final : public op_def {
 public:
  opcode code() const override { return opcode::classes; }
  std::string_view name() const override { return "classes"; }

  std::vector<value_type> child_types(node const& n,
                                      value_type in) const override {
    op_util::expect_valid_width(in);
    layout const l = layout_of(n);
    return std::vector<value_type>(l.k, in);
  }

  void encode(node const& n, stream const& in, std::vector<stream>& out,
              bytes&) const override {
    child_types(n, in.type);
    layout const l = layout_of(n);
    size_t const count = op_util::element_count(in.data.size(), in.type);
    std::vector<size_t> const per = class_counts(l, count);
    size_t const first = out.size();
    for (unsigned c = 0; c < l.k; ++c) {
      out.push_back(op_util::make_stream(per[c] * in.type.width, in.type));
    }
    op_util::with_lane(in.type.width, [&]<typename T>() {
      std::vector<uint8_t*> parts(l.k);
      for (unsigned c = 0; c < l.k; ++c) parts[c] = out[first + c].data.data();
      // The input is only read: the cast drops const for the shared helper.
      move_lanes<T, true>(l, count, const_cast<uint8_t*>(in.data.data()),
                          parts);
    });
  }

  std::vector<size_t> child_sizes(node const& n, value_type in, size_t out_size,
                                  byte_reader&) const override {
    child_types(n, in);
    layout const l = layout_of(n);
    size_t const count = op_util::element_count(out_size, in);
    std::vector<size_t> sizes = class_counts(l, count);
    for (size_t& s : sizes) s *= in.width;
    return sizes;
  }

  void decode(node const& n, value_type in,
              std::span<value_view const> children, size_t out_size, byte_view,
              uint8_t* out) const override {
    child_types(n, in);
    layout const l = layout_of(n);
    size_t const count = op_util::element_count(out_size, in);
    std::vector<size_t> sizes = class_counts(l, count);
    for (size_t& s : sizes) s *= in.width;
    op_util::expect_children(children, sizes, name());
    op_util::with_lane(in.width, [&]<typename T>() {
      std::vector<uint8_t*> parts(l.k);
      for (unsigned c = 0; c < l.k; ++c) {
        // Read only: the scatter never writes a child.
        parts[c] = const_cast<uint8_t*>(children[c].data.data());
      }
      move_lanes<T, false>(l, count, out, parts);
    });
  }
};

}  // namespace

op_def const& classes_op_def() {
  static classes_op const instance;
  return instance;
}

uint64_t classes_cycle_elements(node const& program) {
  if (program.op == opcode::classes && program.params.size() == 2 &&
      !program.blob.empty() && program.params[0] <= classes_max_stride) {
    return program.params[0] * program.blob.size();
  }
  for (node const& c : program.children) {
    if (uint64_t const e = classes_cycle_elements(c)) return e;
  }
  return 0;
}

uint32_t chunk_step(node const& program, uint32_t width, uint32_t chunk_size) {
  uint64_t const cycle = classes_cycle_elements(program) * width;
  if (cycle > 0 && cycle <= chunk_size) {
    return static_cast<uint32_t>(chunk_size / cycle * cycle);
  }
  return chunk_size / width * width;
}

}  // namespace brevis::codec
