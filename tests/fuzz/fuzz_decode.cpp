// Fuzz target: any bytes opened as an archive and read in full. The only
// acceptable failure is a codec::error; crashes, sanitizer reports, hangs and
// unbounded allocations are bugs.
#include <cstddef>
#include <cstdint>

#include "codec/container/archive.h"

namespace {

// A forged index may declare many large chunks that tiny payloads (refs,
// constant leaves) legitimately expand; cap the work per input.
constexpr uint64_t max_decoded = 64u << 20;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(uint8_t const* data, size_t size) {
  using namespace brevis::codec;
  try {
    archive_reader r(byte_view(data, size));
    uint64_t decoded = 0;
    bytes buf;
    for (size_t i = 0; i < r.chunks().size(); ++i) {
      chunk_entry const& c = r.chunks()[i];
      if (decoded + c.length > max_decoded) break;
      decoded += c.length;
      buf.resize(c.length);
      r.decode_chunk(i, buf.data());
    }
    if (r.original_size() <= (1u << 20)) {
      buf.resize(r.original_size());
      r.read(0, buf.size(), buf.data());
      if (buf.size() > 2) r.read(1, buf.size() - 2, buf.data());
    }
  } catch (error const&) {
  }
  return 0;
}
