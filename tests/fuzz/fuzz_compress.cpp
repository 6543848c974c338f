// Fuzz target: the compressor, end to end. Any file compresses (bad input is
// stored less cleverly, never refused), every program the search picks for
// it codes its chunks back exactly (the writer decodes each payload and
// counts a chunk whose own program failed it as a fault: any fault aborts
// here, though the fallback program would have kept the archive correct),
// and the archive reads back as exactly that file. Slow inputs are bugs as
// well: libFuzzer's -timeout finds work that grows faster than the file.
// Input layout: one byte, then the file. The byte's value modulo 5 picks the
// file name hint as fuzz_parse does (so the parser corpus seeds this target
// too); the value divided by 5, modulo 5, the setup: 0-3 the command line's
// chooser with chunks of 4 KiB, 16 KiB, 64 KiB or 1 MiB (its search tuned
// to that chunk size, as `compress --chunk-size` does), 4 the store's
// chooser with the store's 1 MiB chunks.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

#include "codec/container/archive.h"
#include "codec/core/error.h"
#include "codec/search/search_chooser.h"

namespace {

using namespace brevis::codec;

constexpr uint32_t chunk_sizes[] = {min_chunk_size, 16u << 10, 64u << 10,
                                    default_chunk_size};

std::unique_ptr<program_chooser> cli_for(uint32_t chunk) {
  search_chooser_options o;
  o.search.chunk_size = chunk;
  return make_search_chooser(o);
}

program_chooser const& cli_chooser(size_t setup) {
  static std::unique_ptr<program_chooser> const choosers[] = {
      cli_for(chunk_sizes[0]), cli_for(chunk_sizes[1]), cli_for(chunk_sizes[2]),
      cli_for(chunk_sizes[3])};
  return *choosers[setup];
}

[[noreturn]] void fail(char const* what, std::string const& why) {
  std::string const line = std::string("fuzz_compress: ") + what + ": " + why;
  std::fputs((line + "\n").c_str(), stderr);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(uint8_t const* data, size_t size) {
  if (size == 0) return 0;
  static constexpr std::string_view hints[] = {
      "", "model.safetensors", "model.pt", "model.gguf", "array.npy"};
  static std::unique_ptr<program_chooser> const store = make_store_chooser();
  std::string_view const hint = hints[data[0] % std::size(hints)];
  size_t const setup = (data[0] / 5) % 5;
  bool const by_store = setup == 4;
  uint32_t const chunk = by_store ? default_chunk_size : chunk_sizes[setup];
  program_chooser const& chooser = by_store ? *store : cli_chooser(setup);
  byte_view const file(data + 1, size - 1);

  bytes archive;
  try {
    archive_writer w(file, hint, chooser, chunk);
    archive = write_all(w);
    archive_writer::fallback_counts const f = w.fallbacks();
    if (f.faulted != 0) fail("a chosen program faulted", f.first_fault);
  } catch (error const& e) {
    fail("compression refused the file", e.what());
  }
  bytes back(file.size());
  try {
    archive_reader const reader{byte_view(archive)};
    if (reader.original_size() != file.size()) fail("read back", "its size");
    if (!back.empty()) reader.read(0, back.size(), back.data());
  } catch (error const& e) {
    fail("its archive does not read", e.what());
  }
  if (!std::equal(back.begin(), back.end(), file.begin(), file.end())) {
    fail("read back", "other bytes");
  }
  return 0;
}
