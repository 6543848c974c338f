#include <malloc.h>

#include "src/commands.h"
#include "src/huge_heap.h"

int main(int argc, char** argv) {
  // glibc hands freed blocks above a moving threshold back to the kernel, so
  // the megabyte-sized buffers of every chunk and every candidate came back
  // as fresh pages: page faults cost ~10% of compression. A fixed threshold
  // keeps them in the heap for reuse (memory stays at its peak until exit,
  // which for a command line tool is what it would reach anyway).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  brevis::cli::reserve_huge_heap(size_t{128} << 20);
  return brevis::cli::run_cli(argc, argv);
}
