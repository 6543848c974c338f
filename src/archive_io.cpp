#include "src/archive_io.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "codec/core/checksum.h"
#include "codec/core/error.h"
#include "src/buffer_ring.h"
#include "src/decode_workers.h"
#include "src/parallel.h"

namespace brevis::cli {
namespace {

struct decoded {
  std::unique_ptr<uint8_t[]> data;
  size_t length = 0;
};

}  // namespace

codec::archive_reader open_archive(input const& in) {
  if (!in.streams()) return codec::archive_reader(in.data());
  return codec::archive_reader(
      [&in](uint64_t offset, size_t length, uint8_t* out) {
        read_at(in, offset, length, out);
      },
      static_cast<uint64_t>(in.st.st_size));
}

void decode_all(codec::archive_reader const& reader, unsigned threads,
                std::function<void(codec::byte_view)> const& sink,
                progress& bar, whole_file_check whole) {
  auto const chunks = reader.chunks();
  // The reader validates the index; the CLI still refuses to write a file
  // whose chunks do not tile it exactly, and bounds each allocation.
  uint64_t pos = 0;
  size_t longest = 0;
  for (auto const& c : chunks) {
    if (c.offset != pos) {
      codec::fail(codec::errc::corrupt, "chunk table does not tile the file");
    }
    if (c.length > codec::max_chunk_size) {
      codec::fail(codec::errc::limit, "chunk larger than the chunk size limit");
    }
    pos += c.length;
    longest = std::max<size_t>(longest, c.length);
  }
  if (pos != reader.original_size()) {
    codec::fail(codec::errc::corrupt, "chunk table does not tile the file");
  }

  codec::xxh3_stream hash;
  uint64_t done = 0;
  buffer_ring buffers(longest);
  // Below 2 MiB the whole decode takes a few ms on one thread, and starting
  // TBB's workers (loading libtbb, fs/pipeline/tbb_on_demand.cpp, and its
  // threads) costs ~2 ms of CPU and ~160 page faults, more than it saves
  // even in wall time: facemesh-detection-full.bf16.pt (1.1 MB) 5.3 ms CPU
  // at -T1, 6.8 ms at -T2; faceboxes.bf16.pt (2.1 MB) 6.1 and 8.3 ms.
  constexpr uint64_t serial_below = uint64_t{2} << 20;
  unsigned const workers =
      pos < serial_below
          ? 1
          : decode_workers(threads, longest, decode_memory_limit());
  ordered_run(
      workers, chunks.size(),
      [&](size_t i) {
        decoded d{buffers.take(), chunks[i].length};
        reader.decode_chunk(i, d.data.get());
        return d;
      },
      [&](decoded& d) {
        codec::byte_view const b(d.data.get(), d.length);
        if (whole == whole_file_check::check) hash.update(b);
        sink(b);
        done += d.length;
        bar.update(done);
        buffers.give(std::move(d.data));
      });
  if (whole == whole_file_check::check &&
      hash.digest() != reader.original_checksum()) {
    codec::fail(codec::errc::checksum,
                "whole-file checksum mismatch (archive is corrupt)");
  }
}

}  // namespace brevis::cli
