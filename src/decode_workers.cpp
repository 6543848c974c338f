#include "src/decode_workers.h"

#include <unistd.h>

#include <algorithm>

#include "codec/dsl/interpreter.h"

namespace brevis::cli {

uint64_t decode_memory_limit() {
  constexpr uint64_t gib = uint64_t{1} << 30;
  long const pages = ::sysconf(_SC_PHYS_PAGES);
  long const page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return gib;
  return std::max(
      gib, static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) / 4);
}

unsigned decode_workers(unsigned threads, uint64_t longest, uint64_t memory) {
  uint64_t const each =
      codec::decode_budget(static_cast<size_t>(longest)) + 2 * longest;
  uint64_t const fit = memory / std::max<uint64_t>(each, 1);
  return static_cast<unsigned>(
      std::clamp<uint64_t>(fit, 1, std::max(threads, 1u)));
}

}  // namespace brevis::cli
