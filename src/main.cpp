#include <malloc.h>

#include <cstddef>
#include <string_view>

#include "src/commands.h"
#include "src/huge_heap.h"

int main(int argc, char** argv) {
  // The heap on huge pages (huge_heap.h), reserved up front. The mount
  // daemon's heap holds its decoded chunks and its compression's buffers:
  // its default budgets (256 MiB each; larger ones go past the
  // reservation) and the 128 MiB allowance beyond them. Past a
  // reservation the heap grows on 4 KiB pages: eight threads of random
  // 128 KiB reads through the mount, with 128 MiB reserved, took ~5,000
  // faults past it. Only what is touched is backed.
  bool const mounting = argc > 1 && std::string_view(argv[1]) == "mount";
  size_t const reserve = (mounting ? size_t{640} : size_t{128}) << 20;
  // glibc hands freed blocks above a moving threshold back to the kernel, so
  // the megabyte-sized buffers of every chunk and every candidate came back
  // as fresh pages: page faults cost ~10% of compression. A fixed threshold
  // keeps them in the heap for reuse (memory stays at its peak until exit,
  // which for a command line tool is what it would reach anyway), and one
  // above the reservation keeps that from going back at once. So an idle
  // daemon keeps what it freed, up to its budgets' peak: the memory the
  // mount's limit (cache + pipeline + 128 MiB) grants it anyway.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, static_cast<int>(reserve + (size_t{128} << 20)));
  brevis::cli::reserve_huge_heap(reserve);
  return brevis::cli::run_cli(argc, argv);
}
