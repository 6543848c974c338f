// Fuzz target: one program and one payload, straight into the interpreter
// (no archive framing, no checksums in the way). Input layout:
//   varint program_length, program bytes, varint out_size, payload bytes.
// The only acceptable failure is a codec::error. When a payload decodes, the
// decoded bytes must also roundtrip through the same program (or be outside
// its domain): an encoder and decoder that disagree are a bug too.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "codec/dsl/interpreter.h"
#include "codec/dsl/program.h"

namespace {

constexpr uint64_t max_out_size = 1u << 20;
// Re-encoding is slow for some leaves (zstd:22): only small outputs.
constexpr uint64_t max_reencode_size = 64u << 10;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(uint8_t const* data, size_t size) {
  using namespace brevis::codec;
  node program;
  bytes out;
  try {
    byte_reader r(byte_view(data, size));
    byte_view const text = r.blob(r.remaining(), "program length");
    uint64_t const out_size = r.varint();
    if (out_size > max_out_size) return 0;
    byte_view const payload = r.rest();
    program = parse_program(text);
    out.resize(out_size);
    decode_chunk(program, payload, out.size(), out.data());
  } catch (error const&) {
    return 0;
  }
  if (out.size() > max_reencode_size) return 0;
  bytes again;
  try {
    encode_chunk(program, out, again);
  } catch (error const& e) {
    // An encoder may only refuse: the input is outside an operator's
    // domain, or its values would pass the decoder's budget (FORMAT.md 5.2).
    if (e.code() == errc::domain || e.code() == errc::limit) return 0;
    std::abort();
  }
  bytes back(out.size());
  try {
    decode_chunk(program, again, back.size(), back.data());
  } catch (error const&) {
    std::abort();  // the encoder wrote a payload its decoder rejects
  }
  if (!std::equal(back.begin(), back.end(), out.begin(), out.end())) {
    std::abort();
  }
  return 0;
}
