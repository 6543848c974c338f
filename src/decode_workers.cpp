#include "src/decode_workers.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "codec/container/archive.h"
#include "codec/dsl/interpreter.h"

namespace brevis::cli {
namespace {

// The limit a cgroup file states, in bytes ("max" and unreadable: none).
uint64_t cgroup_limit(char const* path) {
  std::ifstream in(path);
  std::string v;
  if (!(in >> v) || v.empty() || v == "max") return UINT64_MAX;
  try {
    return std::stoull(v);
  } catch (...) {  // not a number: no limit read
    return UINT64_MAX;
  }
}

}  // namespace

uint64_t decode_memory_limit() {
  constexpr uint64_t gib = uint64_t{1} << 30;
  uint64_t memory = UINT64_MAX;
  long const pages = ::sysconf(_SC_PHYS_PAGES);
  long const page = ::sysconf(_SC_PAGESIZE);
  if (pages > 0 && page > 0) {
    memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  }
  // A container's limit, well below the host's memory (cgroup v2, v1).
  memory = std::min(memory, cgroup_limit("/sys/fs/cgroup/memory.max"));
  memory = std::min(
      memory, cgroup_limit("/sys/fs/cgroup/memory/memory.limit_in_bytes"));
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    memory = std::min<uint64_t>(memory, as.rlim_cur);
  }
  if (memory == UINT64_MAX) return gib;
  return std::max(gib, memory / 4);
}

unsigned decode_workers(unsigned threads, uint64_t longest, uint64_t memory) {
  // Callers refuse longer chunks before; one decode at a time if not.
  if (longest > codec::max_chunk_size) return 1;
  // The bound on intermediates, the payload read in, and the two output
  // buffers a decode keeps in flight.
  uint64_t const each =
      codec::decode_budget(static_cast<size_t>(longest)) + 3 * longest;
  uint64_t const fit = memory / each;
  return static_cast<unsigned>(
      std::clamp<uint64_t>(fit, 1, std::max(threads, 1u)));
}

}  // namespace brevis::cli
