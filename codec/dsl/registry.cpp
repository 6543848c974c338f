#include <algorithm>
#include <array>
#include <cstring>

#include "codec/dsl/operator.h"
#include "codec/dsl/scratch.h"

namespace brevis::codec {

void op_def::encode_view(node const& n, byte_view in, value_type type,
                         std::vector<stream>& out, bytes& side) const {
  stream s{scratch::take(in.size()), type};
  if (!in.empty()) std::memcpy(s.data.data(), in.data(), in.size());
  encode(n, s, out, side);
  scratch::give(std::move(s.data));
}

void op_def::decode(node const& n, value_type in,
                    std::span<stream const> children, size_t out_size,
                    byte_view side, uint8_t* out) const {
  std::vector<value_view> views;
  views.reserve(children.size());
  for (stream const& c : children) views.push_back({c.data, c.type});
  decode(n, in, std::span<value_view const>(views), out_size, side, out);
}

void leaf_def::encode_view(node const& n, byte_view in, value_type type,
                           bytes& out) const {
  stream s{scratch::take(in.size()), type};
  if (!in.empty()) std::memcpy(s.data.data(), in.data(), in.size());
  try {
    encode(n, s, out);
  } catch (...) {
    scratch::give(std::move(s.data));
    throw;
  }
  scratch::give(std::move(s.data));
}

void leaf_def::check_payload(node const& /*n*/, value_type /*in*/,
                             size_t /*payload_size*/,
                             size_t /*out_size*/) const {}

void leaf_def::decode_siblings(std::span<decode_job const> jobs) const {
  for (decode_job const& j : jobs) {
    decode(*j.n, j.in, j.payload, j.out_size, j.out);
  }
}

// Defined in codec/ops/all_ops.cpp and codec/leaves/all_leaves.cpp.
std::span<op_def const* const> all_ops() noexcept;
std::span<leaf_def const* const> all_leaves() noexcept;

op_def const* find_op(opcode op) noexcept {
  for (op_def const* d : all_ops()) {
    if (d->code() == op) return d;
  }
  return nullptr;
}

leaf_def const* find_leaf(opcode op) noexcept {
  for (leaf_def const* d : all_leaves()) {
    if (d->code() == op) return d;
  }
  return nullptr;
}

op_def const& op_for(opcode op) {
  op_def const* d = find_op(op);
  if (d == nullptr) fail(errc::bad_program, "unknown operator opcode");
  return *d;
}

std::vector<child_slice> concatenated_children(op_def const& op, node const& n,
                                               byte_view in, value_type type) {
  std::vector<value_type> const types = op.child_types(n, type);
  byte_reader none{byte_view{}};
  std::vector<size_t> const sizes = op.child_sizes(n, type, in.size(), none);
  fail_if(sizes.size() != types.size() || types.size() != n.children.size(),
          errc::bad_program, "operator gave wrong number of child sizes");
  std::vector<child_slice> out;
  out.reserve(sizes.size());
  size_t at = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    fail_if(sizes[i] > in.size() - at || sizes[i] % types[i].width != 0,
            errc::bad_program, "child sizes do not tile the value");
    out.push_back({in.subspan(at, sizes[i]), types[i]});
    at += sizes[i];
  }
  fail_if(at != in.size(), errc::bad_program,
          "child sizes do not tile the value");
  return out;
}

leaf_def const& leaf_for(opcode op) {
  leaf_def const* d = find_leaf(op);
  if (d == nullptr) fail(errc::bad_program, "unknown leaf opcode");
  return *d;
}

std::string_view opcode_name(opcode op) noexcept {
  if (op_def const* d = find_op(op)) return d->name();
  if (leaf_def const* d = find_leaf(op)) return d->name();
  static thread_local std::array<char, 8> buf;
  int const v = static_cast<uint8_t>(op);
  buf = {'o',
         'p',
         '#',
         static_cast<char>('0' + v / 100),
         static_cast<char>('0' + v / 10 % 10),
         static_cast<char>('0' + v % 10)};
  return {buf.data(), 6};
}

}  // namespace brevis::codec
