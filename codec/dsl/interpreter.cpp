#include "codec/dsl/interpreter.h"

#include <algorithm>
#include <cstring>

#include "codec/dsl/operator.h"
#include "codec/dsl/scratch.h"

namespace brevis::codec {
namespace {

void encode_node(node const& n, stream const& in, bytes& payload) {
  if (is_leaf(n.op)) {
    leaf_def const& leaf = leaf_for(n.op);
    bytes coded = scratch::take(in.data.size());
    coded.clear();
    leaf.encode(n, in, coded);
    put_blob(payload, coded);
    scratch::give(std::move(coded));
    return;
  }
  op_def const& op = op_for(n.op);
  std::vector<stream> kids;
  op.encode(n, in, kids, payload);  // side data goes first
  fail_if(kids.size() != n.children.size(), errc::bad_program,
          "operator produced a different number of values than children");
  for (size_t i = 0; i < kids.size(); ++i) {
    encode_node(n.children[i], kids[i], payload);
    scratch::give(std::move(kids[i].data));
  }
}

// Bounds what a hostile payload can make the decoder allocate: all
// intermediate values of one chunk together stay under this many bytes.
class budget {
 public:
  explicit budget(size_t out_size) : left_(64 * out_size + (1u << 20)) {}
  void take(size_t n) {
    fail_if(n > left_, errc::limit, "payload expands beyond decoder budget");
    left_ -= n;
  }

 private:
  size_t left_;
};

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
  std::vector<stream> kids(types.size());
  for (size_t i = 0; i < kids.size(); ++i) {
    fail_if(sizes[i] % types[i].width != 0, errc::corrupt,
            "child size is not a whole number of elements");
    mem.take(sizes[i]);
    kids[i].type = types[i];
    kids[i].data = scratch::take(sizes[i]);  // the child's decoder fills it
  }
  for (size_t i = 0; i < kids.size(); ++i) {
    decode_node(n.children[i], types[i], r, sizes[i], kids[i].data.data(), mem);
  }
  op.decode(n, in, kids, out_size, side, out);
  for (stream& k : kids) scratch::give(std::move(k.data));
}

}  // namespace

void encode_chunk(node const& program, byte_view input, bytes& payload) {
  stream root{scratch::take(input.size()), bytes_type};
  if (!input.empty()) std::memcpy(root.data.data(), input.data(), input.size());
  encode_node(program, root, payload);
  scratch::give(std::move(root.data));
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
    if (e.code() == errc::domain) return false;
    throw;
  }
  bytes back = scratch::take(input.size());
  decode_chunk(program, payload, back.size(), back.data());
  bool const same = std::equal(back.begin(), back.end(), input.begin());
  scratch::give(std::move(back));
  return same;
}

}  // namespace brevis::codec
