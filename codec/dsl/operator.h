#pragma once
// The interface every operator and every leaf implements, and the registry
// that finds them by opcode. One operator per file in codec/ops/, one leaf per
// file in codec/leaves/; each file defines a function returning its instance,
// listed once in codec/dsl/registry.cpp.
//
// Contract for operators: for every input x in the operator's domain,
//   decode(child_sizes(...), encode(x)) == x, bit for bit.
// encode throws errc::domain when x is outside the domain (the caller then
// falls back to another program). Decoding reads untrusted bytes: child_sizes
// and decode validate everything they read and throw errc::corrupt or
// errc::limit, never read or write out of bounds, and never allocate more
// than a small multiple of the output size.

#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/dsl/program.h"
#include "codec/dsl/types.h"

namespace brevis::codec {

class op_def {
 public:
  op_def() = default;
  op_def(op_def const&) = delete;
  op_def& operator=(op_def const&) = delete;
  virtual ~op_def() = default;
  virtual opcode code() const = 0;
  virtual std::string_view name() const = 0;

  /// Checks the node's params and blob against the input type and returns
  /// the types of the values it produces, one per child. Throws
  /// errc::bad_program when the node is ill-formed or ill-typed.
  virtual std::vector<value_type> child_types(node const& n,
                                              value_type in) const = 0;

  /// Splits `in` into child values (appended to `out`, in child order).
  /// Anything the decoder needs beyond the output size (a count, say) is
  /// appended to `side`, which the payload stores before the children.
  virtual void encode(node const& n, stream const& in, std::vector<stream>& out,
                      bytes& side) const = 0;
  /// encode() of an input of type `type` held outside a stream (a slice of
  /// the chunk, under a view at a program's root). The default copies it
  /// into a stream; operators that read their input once (fields, planes)
  /// read it in place, saving a copy of the chunk.
  virtual void encode_view(node const& n, byte_view in, value_type type,
                           std::vector<stream>& out, bytes& side) const;

  /// Given the size in bytes of this node's output, reads this node's side
  /// data from `side` and returns the byte size of each child.
  virtual std::vector<size_t> child_sizes(node const& n, value_type in,
                                          size_t out_size,
                                          byte_reader& side) const = 0;

  /// Rebuilds this node's output (`out_size` bytes, written to `out`) from
  /// its children, whose sizes are those child_sizes returned.
  /// `side` is the same side data again (the interpreter re-reads it).
  /// Children are views: a raw leaf's bytes stay in the payload.
  virtual void decode(node const& n, value_type in,
                      std::span<value_view const> children, size_t out_size,
                      byte_view side, uint8_t* out) const = 0;
  /// decode() of children held in streams (tests, tools).
  void decode(node const& n, value_type in, std::span<stream const> children,
              size_t out_size, byte_view side, uint8_t* out) const;

  /// True when decode only writes the children's bytes one after the other
  /// (view, split): the interpreter then decodes the children straight into
  /// the output, saving a copy and a buffer, and does not call decode. Such
  /// an operator writes no side data, and child_sizes gives the sizes from
  /// the output size alone: encoding then hands the children slices of the
  /// input, and does not call encode.
  virtual bool concatenates() const { return false; }
};

class leaf_def {
 public:
  leaf_def() = default;
  leaf_def(leaf_def const&) = delete;
  leaf_def& operator=(leaf_def const&) = delete;
  virtual ~leaf_def() = default;
  virtual opcode code() const = 0;
  virtual std::string_view name() const = 0;

  /// Checks params and blob against the input type; throws errc::bad_program.
  virtual void check(node const& n, value_type in) const = 0;

  /// Appends the payload that codes `in`. Throws errc::domain when the leaf
  /// cannot code it (a constant leaf on varying data, say).
  virtual void encode(node const& n, stream const& in, bytes& out) const = 0;
  /// encode() of a value of type `type` held outside a stream (a slice of
  /// the chunk, under a view at a program's root). The default copies it
  /// into a stream; leaves that only read their input's bytes (raw,
  /// rans_static, zstd) code it in place, saving a copy of the chunk. Not
  /// the htscodecs leaves: its vector coders read a few bytes past their
  /// input (harmless in a heap buffer, a crash at the end of a mapped file).
  virtual void encode_view(node const& n, byte_view in, value_type type,
                           bytes& out) const;

  /// Checks, before the interpreter takes the value's buffer, that a payload
  /// of `payload_size` bytes can decode `out_size` bytes; throws
  /// errc::corrupt (or bad_program for bad params). Leaves whose payload size
  /// follows from the value's (bits) check it here; the default checks
  /// nothing and decode() finds a bad payload.
  virtual void check_payload(node const& n, value_type in, size_t payload_size,
                             size_t out_size) const;

  /// Decodes exactly `out_size` bytes from `payload` into `out`.
  virtual void decode(node const& n, value_type in, byte_view payload,
                      size_t out_size, uint8_t* out) const = 0;

  /// The arguments of one decode() call.
  struct decode_job {
    node const* n;
    value_type in;
    byte_view payload;
    size_t out_size;
    uint8_t* out;
  };
  /// decode() of values of this leaf (siblings, which the interpreter has
  /// in hand together): the default decodes each in turn; leaves whose
  /// decode waits on memory (rans_static) may overlap them.
  virtual void decode_siblings(std::span<decode_job const> jobs) const;
};

/// The operator or leaf for an opcode, or nullptr if there is none.
op_def const* find_op(opcode op) noexcept;
leaf_def const* find_leaf(opcode op) noexcept;
/// The operator or leaf for an opcode; throws errc::bad_program when there is
/// none (the interpreter's lookups, where an unknown opcode is bad input).
op_def const& op_for(opcode op);
leaf_def const& leaf_for(opcode op);
/// One child's part of a value under an operator that concatenates
/// (op_def::concatenates): a slice of the value, and its type.
struct child_slice {
  byte_view data;
  value_type type;
};
/// The children's slices of `in` under `op` (which concatenates), checked to
/// tile it exactly; throws errc::bad_program when they do not.
std::vector<child_slice> concatenated_children(op_def const& op, node const& n,
                                               byte_view in, value_type type);
/// Name of an opcode ("planes"), or "op#NN" when unknown.
std::string_view opcode_name(opcode op) noexcept;

}  // namespace brevis::codec
