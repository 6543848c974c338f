#pragma once
// Transparent huge pages for large, long-lived memory. Touching a fresh 4 KiB
// page costs ~10-15 us on a paravirtualized guest (the CLI's machine); a
// 2 MiB huge page is faulted once for 512 of them (8 MiB first touched:
// 1.2 ms of system time advised, 8-11 ms not). With THP in `madvise` mode
// only advised ranges get huge pages; elsewhere advising is harmless.

#include <cstddef>
#include <cstdint>

namespace brevis::codec {

inline constexpr size_t huge_page_size = size_t{2} << 20;

/// Advises the whole huge pages inside [p, p + size) (MADV_HUGEPAGE).
/// Returns false when none fit or the kernel refused (no THP support).
bool advise_huge_pages(void* p, size_t size) noexcept;

/// Sizes up to this get small pages in a page_buffer.
inline constexpr size_t small_buffer_limit = size_t{32} << 10;

/// Anonymous memory of a fixed size, aligned to a huge page and advised
/// huge (up to small_buffer_limit: page-aligned, on small pages), its
/// contents zero until written (RAII, movable). For a buffer a whole input
/// is read into: no zero-fill pass, and no allocator keeps it. Growing
/// maps on huge pages.
/// Errors: the constructor and grow() throw codec::error(errc::io) when
/// mmap fails (grow() then leaves the buffer as it was).
class page_buffer {
 public:
  page_buffer() = default;
  explicit page_buffer(size_t size);
  ~page_buffer();
  page_buffer(page_buffer&& other) noexcept;
  page_buffer& operator=(page_buffer&& other) noexcept;
  page_buffer(page_buffer const&) = delete;
  page_buffer& operator=(page_buffer const&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  /// Grows to `size` bytes (contents kept; may move), for reading a stream
  /// of unknown length. Not while other threads map memory: where the move
  /// fails, older kernels have already unmapped the range it was bound for,
  /// which grow() then unmaps too (the CLI reads its input before any
  /// parallel work on it).
  void grow(size_t size);
  /// Shrinks the size to `size` bytes (no larger than size()); the memory
  /// stays mapped.
  void truncate(size_t size) { size_ = size < size_ ? size : size_; }

 private:
  void release() noexcept;

  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t mapped_ = 0;  // bytes of the mapping, a multiple of the page
};

}  // namespace brevis::codec
