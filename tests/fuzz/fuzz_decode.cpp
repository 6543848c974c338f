// Fuzz target: any bytes opened as an archive and read in full, twice: held
// in memory, and through a read function as the CLI reads files and pipes
// (its own path: payloads and the index are read into buffers, not viewed
// in place). The only acceptable failure is a codec::error; crashes,
// sanitizer reports, hangs and unbounded allocations are bugs.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codec/container/archive.h"
#include "codec/core/error.h"

namespace {

using namespace brevis::codec;

// A forged index may declare many large chunks that tiny payloads (refs,
// constant leaves) legitimately expand; cap the work per input.
constexpr uint64_t max_decoded = 64u << 20;

void read_all(archive_reader const& r) {
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
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(uint8_t const* data, size_t size) {
  try {
    read_all(archive_reader(byte_view(data, size)));
  } catch (error const&) {
  }
  try {
    archive_reader::read_fn const read_at =
        [data, size](uint64_t offset, size_t length, uint8_t* out) {
          fail_if(offset > size || length > size - offset, errc::truncated,
                  "read past the end of the archive");
          if (length > 0) std::memcpy(out, data + offset, length);
        };
    read_all(archive_reader(read_at, size));
  } catch (error const&) {
  }
  return 0;
}
