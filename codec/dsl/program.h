#pragma once
// A program: a tree of operators whose leaves are entropy coders. Each node
// names its operator by opcode, carries integer parameters and an optional
// parameter blob (a static frequency table, say), and has one child per value
// its operator produces. Programs are serialized compactly (FORMAT.md, 4) and
// are self-contained: program + payload + interpreter rebuild the bytes.

#include <cstdint>
#include <string>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/dsl/types.h"

namespace brevis::codec {

/// Operator and leaf opcodes. Stored in archives: never renumber.
enum class opcode : uint8_t {
  // Operators (value -> child values).
  view = 1,        // bytes -> elems<T>, tail bytes
  fields = 2,      // float elems -> sign, exponent, mantissa
  planes = 3,      // elems<uN> -> N byte streams
  delta = 4,       // x[i] - x[i-1]
  xor_prev = 5,    // x[i] ^ x[i-1]
  xor_row = 6,     // x[i] ^ x[i-cols]
  transpose = 7,   // rows x cols -> cols x rows, tail kept
  palette = 8,     // elems -> dictionary, indices
  runs = 9,        // elems -> run values, run lengths
  low_zero = 10,   // elems with k low zero bits -> narrower elems
  split = 11,      // bytes -> head, tail at an offset
  bitfields = 12,  // elems -> one stream per bit field
  bitplanes = 13,  // elems<uN> -> 8N bit planes
  map = 14,        // zigzag, xor-const, add-const, rotate
  repeat = 15,     // periodic elems -> one period
  sparse = 16,     // elems -> nonzero mask, nonzero elems
  classes = 17,    // elems -> one value per class of positions
  // Leaves (value -> payload bytes).
  raw = 64,
  zero = 65,
  constant = 66,
  rans0 = 67,        // htscodecs rANS 4x16 order 0
  rans1 = 68,        // htscodecs rANS 4x16 order 1
  zstd = 69,         // zstd(level)
  rans_static = 70,  // rANS with a static table held in the program blob
  literal = 71,      // the bytes in the program blob; payload: their offset
  bits = 72,         // b-bit values packed, no entropy coder
};

inline bool is_leaf(opcode op) { return static_cast<uint8_t>(op) >= 64; }

struct node {
  opcode op = opcode::raw;
  std::vector<uint64_t> params;
  bytes blob;
  std::vector<node> children;

  friend bool operator==(node const&, node const&) = default;
};

/// Decoder limits for programs (FORMAT.md, 4.3).
inline constexpr size_t max_program_depth = 16;
inline constexpr size_t max_program_nodes = 256;
inline constexpr size_t max_program_params = 16;
inline constexpr size_t max_program_blob = 1u << 20;

/// Appends the serialized program.
void serialize_program(node const& root, bytes& out);
bytes serialize_program(node const& root);
/// Parses a program and type-checks it against `input` (the root's value
/// type, bytes for a chunk). Throws errc::bad_program, errc::truncated or
/// errc::limit.
node parse_program(byte_view data, value_type input = bytes_type);
/// Type-checks a program built in memory; throws errc::bad_program.
void check_program(node const& root, value_type input = bytes_type);

/// Readable text: `view<u16:bf16>(rans_static, raw)`.
std::string program_text(node const& root);

/// Builders for readable construction in code and tests.
node make_leaf(opcode op, std::vector<uint64_t> params = {});
node make_op(opcode op, std::vector<uint64_t> params, std::vector<node> kids);

}  // namespace brevis::codec
