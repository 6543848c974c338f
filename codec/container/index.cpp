#include "codec/container/index.h"

#include <zstd.h>

#include <algorithm>
#include <optional>
#include <string>

#include "codec/container/format.h"
#include "codec/core/checksum.h"
#include "codec/core/zstd_context.h"

namespace brevis::codec::brv {
namespace {

// Counts are bounded both by a fixed limit and by how many of the smallest
// entries the rest of the index could hold, so a forged count fails before
// anything is allocated for it.
uint64_t read_count(byte_reader& r, uint64_t limit, uint64_t min_entry,
                    char const* what) {
  uint64_t const n = r.varint_max(limit, what);
  if (n > r.remaining() / min_entry) {
    fail(errc::corrupt, std::string(what) + " " + std::to_string(n) +
                            " does not fit in the index");
  }
  return n;
}

bool known_dtype(uint8_t t) { return t <= 15 || (t >= 64 && t < 128); }

void put_region(bytes& out, region_entry const& e) {
  put_u8(out, static_cast<uint8_t>(e.info.kind));
  put_u8(out, static_cast<uint8_t>(e.info.type));
  put_varint(out, e.info.length);
  put_blob(out, as_bytes(e.info.name));
  put_varint(out, e.info.shape.size());
  for (uint64_t d : e.info.shape) put_varint(out, d);
  put_varint(out, e.program);
}

region_entry get_region(byte_reader& r, uint64_t offset,
                        uint64_t program_count) {
  region_entry e;
  uint8_t const kind = r.u8();
  fail_if(kind > 1, errc::corrupt, "unknown region kind");
  e.info.kind = static_cast<region_kind>(kind);
  uint8_t const type = r.u8();
  fail_if(!known_dtype(type), errc::corrupt, "unknown region dtype");
  e.info.type = static_cast<dtype>(type);
  e.info.offset = offset;
  e.info.length = r.varint();
  byte_view name = r.blob(max_name_length, "region name length");
  e.info.name.assign(name.begin(), name.end());
  uint64_t const rank = r.varint_max(max_rank, "region rank");
  e.info.shape.resize(rank);
  for (uint64_t& d : e.info.shape) d = r.varint();
  uint64_t const program = r.varint();
  fail_if(program >= program_count, errc::corrupt,
          "region names a program outside the program table");
  e.program = static_cast<uint32_t>(program);
  return e;
}

// Choice record (FORMAT.md, 3.3.4): u8 present, then the estimate in bytes,
// the expansions and the microseconds spent, as varints.
void put_choice(bytes& out, std::optional<choice_record> const& how) {
  put_u8(out, how ? 1 : 0);
  if (!how) return;
  put_varint(out, static_cast<uint64_t>(std::max(0.0, how->estimated_bytes)));
  put_varint(out, how->expansions);
  put_varint(out, static_cast<uint64_t>(std::max(0.0, how->ms * 1000)));
}

std::optional<choice_record> get_choice(byte_reader& r) {
  uint8_t const present = r.u8();
  fail_if(present > 1, errc::corrupt, "choice record flag is not 0 or 1");
  if (present == 0) return std::nullopt;
  choice_record how;
  how.estimated_bytes = static_cast<double>(r.varint());
  how.expansions = static_cast<uint32_t>(
      r.varint_max(UINT32_MAX, "choice record expansions"));
  how.ms = static_cast<double>(r.varint()) / 1000;
  return how;
}

}  // namespace

void fit_region_entry(region& r) {
  cut_name(r.name, max_name_length);
  if (r.shape.size() > max_rank) r.shape.clear();
}

bytes encode_index(archive_index const& index) {
  bytes out;
  put_varint(out, index.original_size);
  put_le<uint64_t>(out, index.original_checksum);
  put_varint(out, index.programs.size());
  for (node const& p : index.programs) put_blob(out, serialize_program(p));
  put_varint(out, index.regions.size());
  for (region_entry const& e : index.regions) put_region(out, e);
  put_varint(out, index.chunks.size());
  for (chunk_entry const& c : index.chunks) {
    put_varint(out, c.length);
    put_varint(out, c.region);
    put_u8(out, c.is_ref       ? chunk_flag_ref
                : c.in_program ? chunk_flag_in_program
                               : 0);
    if (c.in_program) continue;  // bytes and checksum follow from the index
    if (c.is_ref) {
      put_varint(out, c.ref_offset);
    } else {
      put_varint(out, c.program);
      put_varint(out, c.payload_length);
    }
    put_le<uint64_t>(out, c.checksum);
  }
  if (index.choice_records) {
    for (region_entry const& e : index.regions) put_choice(out, e.how);
  }
  return out;
}

archive_index decode_index(byte_view data, uint32_t chunk_size,
                           uint64_t payload_area, bool choice_records) {
  byte_reader r(data);
  archive_index x;
  x.original_size = r.varint();
  x.original_checksum = r.le<uint64_t>();

  uint64_t const nprograms =
      read_count(r, max_programs, min_program_entry, "program count");
  x.programs.reserve(nprograms);
  for (uint64_t i = 0; i < nprograms; ++i) {
    byte_view p = r.blob(max_program_length, "program length");
    x.programs.push_back(parse_program(p));
  }

  uint64_t const nregions =
      read_count(r, max_regions, min_region_entry, "region count");
  x.regions.reserve(nregions);
  uint64_t offset = 0;
  for (uint64_t i = 0; i < nregions; ++i) {
    x.regions.push_back(get_region(r, offset, nprograms));
    uint64_t const len = x.regions.back().info.length;
    fail_if(len > x.original_size - offset, errc::corrupt,
            "regions extend past the original size");
    offset += len;
  }
  fail_if(offset != x.original_size, errc::corrupt,
          "regions do not cover the original exactly");

  uint64_t const nchunks =
      read_count(r, UINT64_MAX, min_chunk_entry, "chunk count");
  x.chunks.reserve(nchunks);
  offset = 0;
  uint64_t payload = 0;
  uint32_t cur_region = 0;
  for (uint64_t i = 0; i < nchunks; ++i) {
    chunk_entry c;
    c.offset = offset;
    uint64_t const len = r.varint();
    fail_if(len == 0 || len > chunk_size, errc::corrupt,
            "chunk length is zero or above the chunk size");
    c.length = static_cast<uint32_t>(len);
    uint64_t const reg = r.varint();
    fail_if(reg >= nregions || reg < cur_region, errc::corrupt,
            "chunk region is out of range or out of order");
    cur_region = static_cast<uint32_t>(reg);
    c.region = cur_region;
    region const& g = x.regions[cur_region].info;
    fail_if(offset < g.offset || len > g.offset + g.length - offset,
            errc::corrupt, "chunk is not inside its region");
    uint8_t const flags = r.u8();
    fail_if((flags & ~(chunk_flag_ref | chunk_flag_in_program)) != 0,
            errc::reserved_nonzero, "reserved chunk flag bits are set");
    c.is_ref = (flags & chunk_flag_ref) != 0;
    c.in_program = (flags & chunk_flag_in_program) != 0;
    if (c.in_program) {
      fail_if(c.is_ref, errc::corrupt, "chunk is both a ref and in-program");
      // The bytes are a slice of the region's literal blob, covered by the
      // index checksum; the chunk checksum is computed, not stored.
      c.program = x.regions[cur_region].program;
      node const& p = x.programs[c.program];
      fail_if(p.op != opcode::literal || !p.children.empty(), errc::corrupt,
              "in-program chunk's region program is not a literal leaf");
      uint64_t const at = offset - g.offset;
      fail_if(at > p.blob.size() || len > p.blob.size() - at, errc::corrupt,
              "in-program chunk reaches past its literal blob");
      c.payload_offset = header_size + payload;
      c.payload_length = 0;
      c.checksum = xxh3(byte_view(p.blob).subspan(at, len));
      offset += len;
      x.chunks.push_back(c);
      continue;
    }
    if (c.is_ref) {
      c.ref_offset = r.varint();
      fail_if(len > offset || c.ref_offset > offset - len, errc::corrupt,
              "chunk ref does not point strictly backward");
      c.program = x.regions[cur_region].program;
      c.payload_offset = header_size + payload;
    } else {
      uint64_t const prog = r.varint();
      fail_if(prog >= nprograms, errc::corrupt,
              "chunk names a program outside the program table");
      c.program = static_cast<uint32_t>(prog);
      c.payload_length = r.varint();
      fail_if(c.payload_length > payload_area - payload, errc::corrupt,
              "chunk payloads extend past the payload area");
      c.payload_offset = header_size + payload;
      payload += c.payload_length;
    }
    c.checksum = r.le<uint64_t>();
    offset += len;  // <= original_size: each chunk lies inside a region
    x.chunks.push_back(c);
  }
  if (choice_records) {
    x.choice_records = true;
    for (region_entry& e : x.regions) e.how = get_choice(r);
  }
  fail_if(!r.empty(), errc::corrupt, "trailing bytes after the index");
  fail_if(offset != x.original_size, errc::corrupt,
          "chunk lengths do not add up to the original size");
  fail_if(payload != payload_area, errc::corrupt,
          "chunk payloads do not fill the payload area");

  // A ref's source must be stored chunks only, so decoding follows at most
  // one ref. Prefix counts of refs check each source range in O(log n).
  std::vector<uint64_t> refs_before(x.chunks.size() + 1, 0);
  for (size_t i = 0; i < x.chunks.size(); ++i) {
    refs_before[i + 1] = refs_before[i] + (x.chunks[i].is_ref ? 1 : 0);
  }
  auto chunk_at = [&](uint64_t pos) {  // index of the chunk holding pos
    auto it = std::upper_bound(
        x.chunks.begin(), x.chunks.end(), pos,
        [](uint64_t p, chunk_entry const& c) { return p < c.offset; });
    return static_cast<size_t>(it - x.chunks.begin()) - 1;
  };
  for (chunk_entry const& c : x.chunks) {
    if (!c.is_ref) continue;
    size_t const first = chunk_at(c.ref_offset);
    size_t const last = chunk_at(c.ref_offset + c.length - 1);
    fail_if(refs_before[last + 1] != refs_before[first], errc::corrupt,
            "chunk ref points at another ref");
  }
  return x;
}

namespace {

/// One zstd frame (RFC 8878, 3.1.1) holding `content` in raw blocks: a
/// 128 KiB window, the content size in 8 bytes, no checksum.
bytes raw_zstd_frame(byte_view content) {
  constexpr size_t block_max = 128u << 10;
  bytes out;
  out.reserve(content.size() + content.size() / block_max * 3 + 16);
  put_le<uint32_t>(out, 0xFD2FB528u);  // magic
  out.push_back(0xC0);                 // 8-byte content size, windowed
  out.push_back(0x38);                 // window 2^(10 + 7) = 128 KiB
  put_le<uint64_t>(out, content.size());
  size_t pos = 0;
  do {
    size_t const size = std::min(block_max, content.size() - pos);
    bool const last = pos + size == content.size();
    // Block header: last flag, type 0 (raw), size; 3 bytes little endian.
    uint32_t const header = (last ? 1u : 0u) | static_cast<uint32_t>(size) << 3;
    out.push_back(static_cast<uint8_t>(header));
    out.push_back(static_cast<uint8_t>(header >> 8));
    out.push_back(static_cast<uint8_t>(header >> 16));
    out.insert(out.end(), content.begin() + static_cast<ptrdiff_t>(pos),
               content.begin() + static_cast<ptrdiff_t>(pos + size));
    pos += size;
  } while (pos < content.size());
  return out;
}

}  // namespace

bytes pack_index(byte_view index, uint64_t payload_bytes) {
  // Names, shapes and checksums of small-tensor files weigh like their data:
  // where the index outweighs the payload, the slowest level pays (age.bf16
  // .pt, 65 KB: 557 bytes, which keep it below xz -6). Elsewhere it does
  // not: 19 took 10 ms on a 28 KB index against 0.3 at 9, 41% of
  // compressing a 97 KB file. Over the corpus, 9 instead of 19 for the 25
  // files whose index weighed an eighth of the payload or more (the rule of
  // 15d8def) gives up 15.5 KB of 430 MB with every file still below xz -6
  // and zstd -19, and saves ~0.6 s of index CPU (loaded box). The indexes
  // of 128 KiB or more (large checkpoints', mostly their tables, which zstd
  // shrinks by a fifth at any level) take 3: against 7, the 9 corpus files
  // with such indexes grow 17 KB (0.013-0.058% each), and
  // blazepose-detector.fp16's 152 KB index takes ~0.5 ms instead of ~1.6
  // plus a smaller context to page in.
  int const level = index.size() >= payload_bytes ? 19
                    : index.size() < (128u << 10) ? 9
                                                  : 3;
  bytes out(ZSTD_compressBound(index.size()));
  size_t const n = ZSTD_compressCCtx(thread_zstd_cctx(), out.data(), out.size(),
                                     index.data(), index.size(), level);
  fail_if(ZSTD_isError(n), errc::domain, "zstd failed on the index");
  out.resize(n);
  // The decoder refuses an index that expands past its bound; an index of
  // many identical entries (a sparse file's zero chunks) would, so it is
  // stored in raw blocks instead.
  if (index.size() > max_index_expansion * n + (64u << 10)) {
    return raw_zstd_frame(index);
  }
  return out;
}

bytes unpack_index(byte_view stored) {
  unsigned long long const size =
      ZSTD_getFrameContentSize(stored.data(), stored.size());
  fail_if(size == ZSTD_CONTENTSIZE_ERROR || size == ZSTD_CONTENTSIZE_UNKNOWN,
          errc::corrupt, "index is not a zstd frame with its content size");
  fail_if(size > max_index_length ||
              size > max_index_expansion * stored.size() + (64u << 10),
          errc::limit, "decompressed index is larger than the decoder accepts");
  fail_if(ZSTD_findFrameCompressedSize(stored.data(), stored.size()) !=
              stored.size(),
          errc::corrupt, "index is not exactly one zstd frame");
  bytes out(size);
  size_t const n = ZSTD_decompressDCtx(
      thread_zstd_dctx(), out.data(), out.size(), stored.data(), stored.size());
  fail_if(ZSTD_isError(n) || n != size, errc::corrupt,
          "index zstd frame is damaged");
  return out;
}

}  // namespace brevis::codec::brv
