#include "codec/dsl/program.h"

#include "codec/dsl/operator.h"

namespace brevis::codec {
namespace {

void serialize_node(node const& n, bytes& out) {
  put_u8(out, static_cast<uint8_t>(n.op));
  put_varint(out, n.params.size());
  for (uint64_t p : n.params) put_varint(out, p);
  put_blob(out, n.blob);
  put_varint(out, n.children.size());
  for (node const& c : n.children) serialize_node(c, out);
}

node parse_node(byte_reader& r, size_t depth, size_t& count) {
  fail_if(depth >= max_program_depth, errc::limit, "program nests too deep");
  fail_if(++count > max_program_nodes, errc::limit,
          "program has too many nodes");
  node n;
  n.op = static_cast<opcode>(r.u8());
  size_t const nparams = r.varint_max(max_program_params, "parameter count");
  n.params.resize(nparams);
  for (uint64_t& p : n.params) p = r.varint();
  byte_view blob = r.blob(max_program_blob, "program blob length");
  n.blob.assign(blob.begin(), blob.end());
  size_t const nchildren = r.varint_max(max_program_nodes, "child count");
  n.children.reserve(nchildren);
  for (size_t i = 0; i < nchildren; ++i) {
    n.children.push_back(parse_node(r, depth + 1, count));
  }
  return n;
}

void check_node(node const& n, value_type in, size_t depth) {
  fail_if(depth >= max_program_depth, errc::limit, "program nests too deep");
  fail_if(n.params.size() > max_program_params, errc::limit,
          "too many parameters");
  if (is_leaf(n.op)) {
    leaf_def const& leaf = leaf_for(n.op);
    fail_if(!n.children.empty(), errc::bad_program, "a leaf has children");
    leaf.check(n, in);
    return;
  }
  op_def const& op = op_for(n.op);
  std::vector<value_type> types = op.child_types(n, in);
  fail_if(types.size() != n.children.size(), errc::bad_program,
          "child count does not match operator");
  for (size_t i = 0; i < types.size(); ++i) {
    check_node(n.children[i], types[i], depth + 1);
  }
}

void text_node(node const& n, std::string& out) {
  out += opcode_name(n.op);
  for (uint64_t p : n.params) {
    out += ':';
    out += std::to_string(p);
  }
  if (!n.blob.empty()) {
    out += '[';
    out += std::to_string(n.blob.size());
    out += "B]";
  }
  if (n.children.empty()) return;
  out += '(';
  for (size_t i = 0; i < n.children.size(); ++i) {
    if (i > 0) out += ", ";
    text_node(n.children[i], out);
  }
  out += ')';
}

}  // namespace

void serialize_program(node const& root, bytes& out) {
  serialize_node(root, out);
}

bytes serialize_program(node const& root) {
  bytes out;
  serialize_node(root, out);
  return out;
}

node parse_program(byte_view data, value_type input) {
  byte_reader r(data);
  size_t count = 0;
  node root = parse_node(r, 0, count);
  fail_if(!r.empty(), errc::bad_program, "trailing bytes after program");
  check_node(root, input, 0);
  return root;
}

void check_program(node const& root, value_type input) {
  check_node(root, input, 0);
}

std::string program_text(node const& root) {
  std::string out;
  text_node(root, out);
  return out;
}

node make_leaf(opcode op, std::vector<uint64_t> params) {
  node n;
  n.op = op;
  n.params = std::move(params);
  return n;
}

node make_op(opcode op, std::vector<uint64_t> params, std::vector<node> kids) {
  node n;
  n.op = op;
  n.params = std::move(params);
  n.children = std::move(kids);
  return n;
}

}  // namespace brevis::codec
