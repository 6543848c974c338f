#pragma once
// Runs programs: encode a chunk of original bytes into a payload, decode a
// payload back into exactly the original bytes.
//
// Payload layout (FORMAT.md, 5): the program's nodes in pre-order; an operator
// contributes its side data, a leaf contributes varint(length) and its bytes.

#include "codec/core/bytes.h"
#include "codec/dsl/program.h"

namespace brevis::codec {

/// Appends the payload of `input` under `program` (whose root takes bytes).
/// Throws errc::domain when some operator cannot encode this input.
void encode_chunk(node const& program, byte_view input, bytes& payload);

/// The bytes all intermediate values of a chunk of `out_size` bytes may take
/// together while it decodes (FORMAT.md section 5.2): 64 x out_size + 1 MiB
/// up to 1 MiB, then 16 per further byte.
size_t decode_budget(size_t out_size);

/// Decodes `payload` into `out`, which must hold exactly `out_size` bytes.
/// The program must have passed parse_program or check_program. Throws
/// errc::corrupt, errc::truncated or errc::limit on a bad payload; memory
/// used is bounded by decode_budget(out_size).
void decode_chunk(node const& program, byte_view payload, size_t out_size,
                  uint8_t* out);

/// Encodes then decodes and compares; true when the program roundtrips this
/// input, false when it does not or the encoder refuses it (errc::domain,
/// or errc::limit past the decoder's budget). Used by tests.
bool roundtrips(node const& program, byte_view input);

}  // namespace brevis::codec
