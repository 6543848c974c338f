#include "codec/dsl/interpreter.h"

#include <algorithm>
#include <cstring>

#include "codec/dsl/operator.h"
#include "codec/dsl/scratch.h"

namespace brevis::codec {
namespace {

size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) v >>= 7, ++n;
  return n;
}

// Appends a leaf's coded value, after its length: room for the length is
// guessed from the input's (a coded value is rarely so much smaller that
// its length takes fewer varint bytes); a wrong guess moves the value.
template <typename Encode>
void encode_leaf(size_t in_size, bytes& payload, Encode&& encode) {
  size_t const at = payload.size();
  size_t const room = varint_size(in_size);
  payload.resize(at + room);
  try {
    encode();
  } catch (...) {
    payload.resize(at);
    throw;
  }
  size_t const length = payload.size() - at - room;
  size_t const need = varint_size(length);
  auto const gap = payload.begin() + static_cast<std::ptrdiff_t>(at);
  if (need < room) {
    payload.erase(gap, gap + static_cast<std::ptrdiff_t>(room - need));
  } else if (need > room) {
    payload.insert(gap, need - room, uint8_t{0});
  }
  uint64_t v = length;
  for (size_t i = 0; i + 1 < need; ++i, v >>= 7) {
    payload[at + i] = static_cast<uint8_t>(v | 0x80);
  }
  payload[at + need - 1] = static_cast<uint8_t>(v);
}

// What the intermediate values of one chunk may take together (see
// decode_budget): the decoder refuses a payload that asks for more, and the
// encoder a program that would need more (its chunk then falls back, rather
// than writing a payload no decoder accepts).
class budget {
 public:
  explicit budget(size_t out_size) : left_(decode_budget(out_size)) {}
  void take(size_t n, char const* what) {
    fail_if(n > left_, errc::limit, what);
    left_ -= n;
  }

 private:
  size_t left_;
};

constexpr char const* encode_over_budget =
    "program expands beyond the decoder budget";
constexpr char const* decode_over_budget =
    "payload expands beyond decoder budget";

void encode_node(node const& n, stream const& in, bytes& payload, budget& mem);

void encode_children(node const& n, std::vector<stream>& kids, bytes& payload,
                     budget& mem) {
  fail_if(kids.size() != n.children.size(), errc::bad_program,
          "operator produced a different number of values than children");
  // What decode_node takes for these children before it decodes them
  // (nothing for an operator whose children tile its value).
  if (!op_for(n.op).concatenates()) {
    for (stream const& k : kids) mem.take(k.data.size(), encode_over_budget);
  }
  for (size_t i = 0; i < kids.size(); ++i) {
    encode_node(n.children[i], kids[i], payload, mem);
    scratch::give(std::move(kids[i].data));
  }
}

void encode_node(node const& n, stream const& in, bytes& payload, budget& mem) {
  if (is_leaf(n.op)) {
    leaf_def const& leaf = leaf_for(n.op);
    encode_leaf(in.data.size(), payload, [&] { leaf.encode(n, in, payload); });
    return;
  }
  std::vector<stream> kids;
  op_for(n.op).encode(n, in, kids, payload);  // side data goes first
  encode_children(n, kids, payload, mem);
}

// encode_node of a value held outside a stream (the chunk, or a slice of
// it): an operator that concatenates hands its children slices, others and
// leaves read it in place where they can (op_def::encode_view,
// leaf_def::encode_view).
void encode_node_view(node const& n, byte_view in, value_type type,
                      bytes& payload, budget& mem) {
  if (is_leaf(n.op)) {
    leaf_def const& leaf = leaf_for(n.op);
    encode_leaf(in.size(), payload,
                [&] { leaf.encode_view(n, in, type, payload); });
    return;
  }
  op_def const& op = op_for(n.op);
  if (op.concatenates()) {
    std::vector<child_slice> const kids =
        concatenated_children(op, n, in, type);
    for (size_t i = 0; i < kids.size(); ++i) {
      encode_node_view(n.children[i], kids[i].data, kids[i].type, payload, mem);
    }
    return;
  }
  std::vector<stream> kids;
  op.encode_view(n, in, type, kids, payload);
  encode_children(n, kids, payload, mem);
}

void decode_node(node const& n, value_type in, byte_reader& r, size_t out_size,
                 uint8_t* out, budget& mem) {
  if (is_leaf(n.op)) {
    leaf_def const& leaf = leaf_for(n.op);
    byte_view coded = r.blob(r.remaining(), "leaf payload length");
    leaf.decode(n, in, coded, out_size, out);
    return;
  }
  op_def const& op = op_for(n.op);
  std::vector<value_type> types = op.child_types(n, in);
  fail_if(types.size() != n.children.size(), errc::bad_program,
          "child count does not match operator");
  size_t const side_start = r.position();
  std::vector<size_t> sizes = op.child_sizes(n, in, out_size, r);
  fail_if(sizes.size() != types.size(), errc::corrupt,
          "operator gave wrong number of child sizes");
  byte_view const side = r.consumed_since(side_start);
  if (op.concatenates()) {
    size_t at = 0;
    for (size_t i = 0; i < types.size(); ++i) {
      fail_if(sizes[i] % types[i].width != 0 || sizes[i] > out_size - at,
              errc::corrupt, "child sizes do not tile the value");
      decode_node(n.children[i], types[i], r, sizes[i], out + at, mem);
      at += sizes[i];
    }
    fail_if(at != out_size, errc::corrupt, "child sizes do not tile the value");
    return;
  }
  // Children are decoded into scratch buffers, except raw leaves: their
  // bytes are read where they lie in the payload.
  std::vector<value_view> kids(types.size());
  std::vector<scratch::buffer> held;
  held.reserve(types.size());
  struct give_back {
    std::vector<scratch::buffer>& held;
    ~give_back() {
      for (scratch::buffer& b : held) scratch::give(std::move(b));
    }
  } const returns{held};
  for (size_t i = 0; i < kids.size(); ++i) {
    fail_if(sizes[i] % types[i].width != 0, errc::corrupt,
            "child size is not a whole number of elements");
    mem.take(sizes[i], decode_over_budget);
  }
  // rans_static leaves decode together once all are read: the leaf pairs
  // those whose rounds gain from it (they wait on table lookups, and two
  // streams keep twice as many in flight).
  std::vector<leaf_def::decode_job> deferred;
  for (size_t i = 0; i < kids.size(); ++i) {
    node const& child = n.children[i];
    kids[i].type = types[i];
    if (child.op == opcode::raw) {
      byte_view const coded = r.blob(r.remaining(), "leaf payload length");
      fail_if(coded.size() != sizes[i], errc::corrupt,
              "raw payload size differs from value size");
      kids[i].data = coded;
      continue;
    }
    // A leaf's payload is read, and its size checked, before the value's
    // buffer is taken.
    leaf_def const* const leaf =
        is_leaf(child.op) ? &leaf_for(child.op) : nullptr;
    byte_view coded;
    if (leaf != nullptr) {
      coded = r.blob(r.remaining(), "leaf payload length");
      leaf->check_payload(child, types[i], coded.size(), sizes[i]);
    }
    held.push_back(scratch::take_buffer(sizes[i]));
    uint8_t* const at = held.back().data.get();
    kids[i].data = byte_view(at, sizes[i]);
    if (leaf == nullptr) {
      decode_node(child, types[i], r, sizes[i], at, mem);
    } else if (child.op == opcode::rans_static) {
      deferred.push_back({&child, types[i], coded, sizes[i], at});
    } else {
      leaf->decode(child, types[i], coded, sizes[i], at);
    }
  }
  if (!deferred.empty()) {
    leaf_for(opcode::rans_static).decode_siblings(deferred);
  }
  op.decode(n, in, std::span<value_view const>(kids), out_size, side, out);
}

}  // namespace

void encode_chunk(node const& program, byte_view input, bytes& payload) {
  budget mem(input.size());
  encode_node_view(program, input, bytes_type, payload, mem);
}

// 64 bytes per byte of a chunk's first MiB, 16 past it. The encoder's
// programs take at most 3.7 x the chunk on the corpus (2.5 x on chunks of 1
// MiB or more); a forged 64 MiB chunk of nested `runs` (tests/data/bad) got
// 4 GiB with 64 per byte throughout, and gets about 1 GiB.
size_t decode_budget(size_t out_size) {
  constexpr size_t mib = size_t{1} << 20;
  if (out_size <= mib) return 64 * out_size + mib;
  return 65 * mib + 16 * (out_size - mib);
}

void decode_chunk(node const& program, byte_view payload, size_t out_size,
                  uint8_t* out) {
  byte_reader r(payload);
  budget mem(out_size);
  decode_node(program, bytes_type, r, out_size, out, mem);
  fail_if(!r.empty(), errc::corrupt, "trailing bytes after chunk payload");
}

bool roundtrips(node const& program, byte_view input) {
  bytes payload;
  try {
    encode_chunk(program, input, payload);
  } catch (error const& e) {
    if (e.code() == errc::domain || e.code() == errc::limit) return false;
    throw;
  }
  bytes back = scratch::take(input.size());
  decode_chunk(program, payload, back.size(), back.data());
  bool const same = std::equal(back.begin(), back.end(), input.begin());
  scratch::give(std::move(back));
  return same;
}

}  // namespace brevis::codec
