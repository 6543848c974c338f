#include "src/huge_heap.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

#include "codec/core/huge_pages.h"

namespace brevis::cli {

void reserve_huge_heap(size_t bytes) {
  // glibc grows the heap by a request plus M_TOP_PAD: a block larger than
  // the heap's free top makes it take `bytes` at once (M_TRIM_THRESHOLD
  // above `bytes` keeps them from going back to the kernel).
  size_t const block = size_t{1} << 20;
  mallopt(M_TOP_PAD, static_cast<int>(bytes));
  void* const p = std::malloc(block);
  mallopt(M_TOP_PAD, 128 << 10);  // glibc's default again
  if (p == nullptr) return;
  auto const at = reinterpret_cast<uintptr_t>(p);
  auto const end = reinterpret_cast<uintptr_t>(::sbrk(0));
  // Only the brk heap: a block mmap'ed (sbrk refused) lies elsewhere.
  if (end <= at || end - at < 2 * block) {
    std::free(p);
    return;
  }
  // Huge pages from the first boundary past what malloc has written (the
  // free top's header follows the block): a page touched before the advice
  // keeps its 2 MiB range on small pages. Left so, the first range served
  // the first buffers and took 450 of decompress's 800 faults.
  uintptr_t const huge = (at + block + 64 + codec::huge_page_size - 1) /
                         codec::huge_page_size * codec::huge_page_size;
  if (!codec::advise_huge_pages(reinterpret_cast<void*>(huge), end - huge)) {
    std::free(p);
    return;
  }
  // The block grows in place to end just before `huge` and stays allocated
  // (untouched, so it costs no memory): the free top, which later blocks are
  // cut from, then starts on the boundary and its header sits below it.
  void* const kept = std::realloc(p, huge - at - sizeof(size_t));
  (void)kept;  // kept for good; if glibc moved it, the old block was freed
}

void share_main_arena() { mallopt(M_ARENA_MAX, 1); }

}  // namespace brevis::cli
