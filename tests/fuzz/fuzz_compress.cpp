// Fuzz target: the compressor, end to end. Any file compresses (bad input is
// stored less cleverly, never refused) and its archive reads back as exactly
// that file; the programs the search picks for bytes it has never seen must
// roundtrip. Input layout: one byte, then the file. The byte's value modulo
// 5 picks the file name hint as fuzz_parse does (so the parser corpus seeds
// this target too); the rest picks the chunk size and the chooser (the
// command line's, with per-file tables and the learned prior, or the
// store's, per region). Slow inputs are bugs as well: libFuzzer's -timeout
// finds choosing that grows faster than the file.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string_view>

#include "codec/container/archive.h"
#include "codec/core/error.h"
#include "codec/search/search_chooser.h"

extern "C" int LLVMFuzzerTestOneInput(uint8_t const* data, size_t size) {
  using namespace brevis::codec;
  if (size == 0) return 0;
  static constexpr std::string_view hints[] = {
      "", "model.safetensors", "model.pt", "model.gguf", "array.npy"};
  static constexpr uint32_t chunk_sizes[] = {min_chunk_size, 16u << 10,
                                             64u << 10, default_chunk_size};
  static std::unique_ptr<program_chooser> const cli = make_search_chooser();
  static std::unique_ptr<program_chooser> const store = make_store_chooser();
  unsigned const pick = data[0];
  std::string_view const hint = hints[pick % std::size(hints)];
  uint32_t const chunk = chunk_sizes[(pick / 5) % std::size(chunk_sizes)];
  program_chooser const& chooser = (pick / 20) % 2 == 0 ? *cli : *store;
  byte_view const file(data + 1, size - 1);

  bytes archive;
  try {
    archive = write_archive(file, hint, chooser, chunk);
  } catch (...) {
    std::abort();  // a file the compressor refused
  }
  bytes back(file.size());
  try {
    archive_reader const reader{byte_view(archive)};
    if (reader.original_size() != file.size()) std::abort();
    if (!back.empty()) reader.read(0, back.size(), back.data());
  } catch (...) {
    std::abort();  // an archive of its own the reader refused
  }
  if (!std::equal(back.begin(), back.end(), file.begin(), file.end())) {
    std::abort();
  }
  return 0;
}
