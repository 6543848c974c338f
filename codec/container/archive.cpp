#include "codec/container/archive.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>

#include "codec/choose/small_tensors.h"
#include "codec/container/format.h"
#include "codec/container/index.h"
#include "codec/core/checksum.h"
#include "codec/dsl/interpreter.h"
#include "codec/dsl/scratch.h"
#include "codec/ops/classes.h"

namespace brevis::codec {
namespace {

// Fuzz builds skip the checksum verdicts so the fuzzer reaches the index
// parser and the interpreter behind them (zstd does the same); the checks
// are still computed, only their failure is ignored.
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
constexpr bool enforce_checksums = false;
#else
constexpr bool enforce_checksums = true;
#endif

void check_chunk_size(uint32_t chunk_size) {
  if (chunk_size < min_chunk_size || chunk_size > max_chunk_size) {
    fail(errc::limit, "chunk size " + std::to_string(chunk_size) +
                          " is outside [" + std::to_string(min_chunk_size) +
                          ", " + std::to_string(max_chunk_size) + "]");
  }
}

std::vector<region_entry> to_entries(std::vector<region> regions) {
  std::vector<region_entry> out(regions.size());
  for (size_t i = 0; i < regions.size(); ++i) {
    out[i].info = std::move(regions[i]);
    brv::fit_region_entry(out[i].info);
  }
  return out;
}

// Cuts regions where the chooser says their statistics change; the parts
// keep the region's kind, dtype and name (the shape no longer applies).
std::vector<region> cut_regions(byte_view file, std::vector<region> regions,
                                program_chooser const& chooser) {
  std::vector<region> out;
  out.reserve(regions.size());
  for (region& g : regions) {
    std::vector<uint64_t> const cuts =
        chooser.cut_points(g, file.subspan(g.offset, g.length));
    uint64_t at = 0;
    for (uint64_t c : cuts) {
      if (c <= at || c >= g.length) continue;  // keep the regions valid
      region part = g;
      part.offset = g.offset + at;
      part.length = c - at;
      part.shape.clear();
      out.push_back(std::move(part));
      at = c;
    }
    if (at > 0) {
      g.shape.clear();
      g.length -= at;
      g.offset += at;
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- writer

archive_writer::archive_writer(byte_view file, std::string_view name,
                               program_chooser const& chooser,
                               uint32_t chunk_size)
    : archive_writer(file, parse_regions(file, name).regions, chooser,
                     chunk_size) {}

archive_writer::archive_writer(byte_view file, std::vector<region> regions,
                               program_chooser const& chooser,
                               uint32_t chunk_size)
    : file_(file), chooser_(chooser), chunk_size_(chunk_size) {
  check_chunk_size(chunk_size);
  fail_if(!regions_cover(regions, file.size()), errc::corrupt,
          "regions do not cover the file exactly");
  regions = cut_regions(file, std::move(regions), chooser);
  if (chooser.joins_small_tensors()) {
    regions = join_small_tensors(file, std::move(regions), chunk_size);
  }
  file_chooser_ = chooser.for_file(file, regions);
  regions_ = to_entries(std::move(regions));
  chosen_.assign(regions_.size(), fallback_program());
  chunk_sums_.resize(regions_.size());
  programs_.push_back(fallback_program());
}

void archive_writer::choose_program(size_t r) {
  region const& g = regions_.at(r).info;
  choose_program(r, file_.subspan(g.offset, g.length));
}

void archive_writer::choose_program(size_t r, byte_view bytes) {
  region const& g = regions_.at(r).info;
  fail_if(bytes.size() != g.length, errc::corrupt,
          "a region's bytes differ in length from the region");
  // A file's chooser may know regions by where they lie in the file.
  if (file_chooser_) bytes = file_.subspan(g.offset, g.length);
  program_chooser const& c = file_chooser_ ? *file_chooser_ : chooser_;
  node p;
  choice_record how;
  bool const recorded = c.choose_recorded(g, bytes, p, how);
  try {
    check_program(p);
  } catch (error const&) {
    p = fallback_program();  // encode() must never fail: keep to the safe one
  }
  chosen_[r] = std::move(p);
  hash_chunks(r, bytes);
  if (!recorded) return;
  if (!record_times_) how.ms = 0;
  regions_[r].how = how;
}

uint32_t archive_writer::region_chunk_step(size_t r) const {
  uint32_t const width = std::max(1u, dtype_width(regions_[r].info.type));
  return chunk_step(chosen_[r], width, chunk_size_);
}

void archive_writer::hash_chunks(size_t r, byte_view bytes) {
  region const& g = regions_[r].info;
  region_sums& sums = chunk_sums_[r];
  sums.step = region_chunk_step(r);
  sums.of.clear();
  for (uint64_t done = 0; done < g.length; done += sums.step) {
    uint64_t const length = std::min<uint64_t>(sums.step, g.length - done);
    sums.of.push_back(xxh3(bytes.subspan(done, length)));
  }
}

void archive_writer::plan_chunks(file_hash whole_file) {
  // Deduplicate programs; there are few, so a linear search does.
  for (size_t r = 0; r < regions_.size(); ++r) {
    auto it = std::find(programs_.begin(), programs_.end(), chosen_[r]);
    if (it == programs_.end()) it = programs_.insert(it, chosen_[r]);
    regions_[r].program = static_cast<uint32_t>(it - programs_.begin());
  }

  // Cut regions into element-aligned chunks; a chunk equal to an earlier
  // one becomes a ref to it.
  chunks_.clear();
  in_program_region_.clear();
  std::unordered_map<uint64_t, size_t> first_seen;  // key: xxh3 ^ length
  // The file's checksum in the same pass, while each chunk is in cache: the
  // chunks tile the file in order.
  xxh3_stream whole;
  bool const hash_file = whole_file == file_hash::compute;
  for (size_t r = 0; r < regions_.size(); ++r) {
    // Regions choose_program did not reach (cancelled) are hashed here.
    if (chunk_sums_[r].step != region_chunk_step(r)) {
      hash_chunks(
          r, file_.subspan(regions_[r].info.offset, regions_[r].info.length));
    }
    region const& g = regions_[r].info;
    // A literal program holding exactly the region's bytes: append() stores
    // its chunks in the index alone (no payload, checksum or ref needed).
    // Writers of their own (the store) code them as usual.
    node const& p = programs_[regions_[r].program];
    bool const in_program =
        p.op == opcode::literal && p.children.empty() &&
        p.blob.size() == g.length &&
        std::equal(p.blob.begin(), p.blob.end(),
                   file_.begin() + static_cast<std::ptrdiff_t>(g.offset));
    in_program_region_.push_back(in_program);
    uint32_t const step = chunk_sums_[r].step;
    std::vector<uint64_t> const& sums = chunk_sums_[r].of;
    for (uint64_t done = 0; done < g.length;) {
      chunk_entry c;
      c.offset = g.offset + done;
      c.length =
          static_cast<uint32_t>(std::min<uint64_t>(step, g.length - done));
      c.region = static_cast<uint32_t>(r);
      c.program = regions_[r].program;
      byte_view data = file_.subspan(c.offset, c.length);
      c.checksum = sums[done / step];
      if (hash_file) whole.update(data);
      if (in_program) {  // cheaper than a ref
        chunks_.push_back(c);
        done += c.length;
        continue;
      }
      uint64_t const key =
          c.checksum ^ (uint64_t{c.length} * 0x9e3779b97f4a7c15);
      auto [it, fresh] = first_seen.emplace(key, chunks_.size());
      if (!fresh) {
        chunk_entry const& e = chunks_[it->second];
        if (e.length == c.length && e.checksum == c.checksum &&
            std::memcmp(file_.data() + e.offset, data.data(), c.length) == 0) {
          c.is_ref = true;
          c.ref_offset = e.offset;
        }
      }
      chunks_.push_back(c);
      done += c.length;
    }
  }
  whole_checksum_.reset();
  if (hash_file) whole_checksum_ = whole.digest();
}

bytes archive_writer::header() const {
  bytes h(brv::header_size, 0);  // reserved fields stay zero
  std::memcpy(h.data(), brv::magic.data(), brv::magic.size());
  h[4] = brv::version_major;
  h[5] = brv::version_minor;
  bool const records = std::any_of(regions_.begin(), regions_.end(),
                                   [](region_entry const& e) { return e.how; });
  store_le<uint16_t>(h.data() + 6,
                     brv::header_flag_index_zstd |
                         (records ? brv::header_flag_choice_records : 0));
  store_le<uint32_t>(h.data() + 8, chunk_size_);
  return h;
}

bool archive_writer::try_encode(size_t chunk, uint32_t program, byte_view in,
                                bytes& payload) const {
  payload.clear();
  try {
    encode_chunk(programs_[program], in, payload);
  } catch (error const& e) {
    // A refusal is the program's answer to values it was not chosen for;
    // anything else is an operator's fault. The fallback still gives a
    // correct archive either way.
    if (is_refusal(e.code())) {
      refused_.fetch_add(1, std::memory_order_relaxed);
    } else {
      note_fault(chunk, program, e.what());
    }
    return false;
  }
  if (!verify_) return true;
  // Decoding costs about as much as encoding did; the buffer is reused.
  // Any failure here is a fault: the encoder wrote what the decoder
  // refuses.
  bool same = false;
  try {
    bytes back = scratch::take(in.size());
    decode_chunk(programs_[program], payload, back.size(), back.data());
    same = std::equal(back.begin(), back.end(), in.begin());
    scratch::give(std::move(back));
  } catch (error const& e) {
    note_fault(chunk, program,
               std::string("its payload does not decode: ") + e.what());
    return false;
  }
  verified_.fetch_add(1, std::memory_order_relaxed);
  if (!same) note_fault(chunk, program, "its payload decoded back wrong");
  return same;
}

void archive_writer::note_fault(size_t chunk, uint32_t program,
                                std::string_view what) const {
  std::scoped_lock lk(fault_mu_);
  if (faulted_++ > 0) return;
  std::string text = program_text(programs_[program]);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  first_fault_ = "chunk " + std::to_string(chunk) + ", program " + text + ": " +
                 std::string(what);
}

archive_writer::fallback_counts archive_writer::fallbacks() const {
  std::scoped_lock lk(fault_mu_);
  return {refused_.load(std::memory_order_relaxed), faulted_, first_fault_};
}

encoded_chunk archive_writer::encode(size_t i) const {
  chunk_entry const& c = chunks_.at(i);
  return encode(i, file_.subspan(c.offset, c.length));
}

encoded_chunk archive_writer::encode(size_t i, byte_view in) const {
  chunk_entry const& c = chunks_.at(i);
  fail_if(in.size() != c.length, errc::corrupt,
          "a chunk's bytes differ in length from the chunk");
  encoded_chunk out;
  out.index = i;
  out.program = c.program;
  if (c.is_ref) return out;
  // A payload larger than the chunk is replaced, so this is all it needs;
  // a reused buffer saves paging in a fresh one per chunk (see recycle).
  out.payload = scratch::take_empty(c.length);
  bool ok = c.program != 0 && try_encode(i, c.program, in, out.payload);
  if (ok && out.payload.size() < c.length) return out;
  // Not encodable, or it did not shrink: use the fallback when it is smaller.
  bytes fallback;
  encode_chunk(programs_[0], in, fallback);
  if (!ok || fallback.size() < out.payload.size()) {
    out.payload = std::move(fallback);
    out.program = 0;
  }
  return out;
}

byte_view archive_writer::append(encoded_chunk const& c) {
  fail_if(c.index != appended_ || c.index >= chunks_.size(), errc::corrupt,
          "chunks must be appended once each, in order");
  chunk_entry& e = chunks_[c.index];
  fail_if(e.is_ref && !c.payload.empty(), errc::corrupt,
          "a ref chunk has no payload");
  if (!e.is_ref && in_program_region_[e.region]) {
    // Its bytes are in the region's program, whatever encode() chose (a
    // fallback for a region of a byte or two): drop the payload.
    e.in_program = true;
    e.program = regions_[e.region].program;
    e.payload_offset = brv::header_size + written_;
    e.payload_length = 0;
    ++appended_;
    return {};
  }
  e.program = c.program;
  e.payload_offset = brv::header_size + written_;
  e.payload_length = c.payload.size();
  written_ += c.payload.size();
  ++appended_;
  return c.payload;
}

void archive_writer::recycle(encoded_chunk&& c) {
  scratch::give(std::move(c.payload));
}

bytes archive_writer::finish() {
  fail_if(appended_ != chunks_.size(), errc::corrupt,
          "finish() before every chunk was appended");
  brv::archive_index x;
  x.original_size = file_.size();
  x.original_checksum = whole_checksum_ ? *whole_checksum_ : xxh3(file_);
  x.regions = regions_;
  x.programs = programs_;
  x.chunks = chunks_;
  x.choice_records = std::any_of(regions_.begin(), regions_.end(),
                                 [](region_entry const& e) { return e.how; });
  bytes out = brv::pack_index(brv::encode_index(x), written_);
  uint64_t const index_length = out.size();
  bytes checked = header();
  put_bytes(checked, out);
  put_le<uint64_t>(out, brv::header_size + written_);
  put_le<uint64_t>(out, index_length);
  put_le<uint64_t>(out, xxh3(checked));
  put_bytes(out, brv::end_magic);
  return out;
}

bytes write_all(archive_writer& w) {
  for (size_t r = 0; r < w.region_count(); ++r) w.choose_program(r);
  w.plan_chunks();
  bytes out = w.header();
  for (size_t i = 0; i < w.chunk_count(); ++i) {
    put_bytes(out, w.append(w.encode(i)));
  }
  put_bytes(out, w.finish());
  return out;
}

bytes write_archive(byte_view file, std::string_view name,
                    program_chooser const& chooser, uint32_t chunk_size) {
  archive_writer w(file, name, chooser, chunk_size);
  return write_all(w);
}

// ---------------------------------------------------------------- reader

archive_reader::archive_reader(byte_view archive)
    : archive_reader(
          [archive](uint64_t offset, size_t length, uint8_t* out) {
            fail_if(offset > archive.size() || length > archive.size() - offset,
                    errc::truncated, "read past the end of the archive");
            if (length > 0) std::memcpy(out, archive.data() + offset, length);
          },
          archive.size()) {
  memory_ = archive;
}

archive_reader::archive_reader(read_fn read_at, uint64_t archive_size)
    : read_at_(std::move(read_at)) {
  using namespace brv;
  fail_if(archive_size < header_size, errc::truncated,
          "archive is shorter than its header");
  uint8_t h[header_size];
  read_at_(0, header_size, h);
  fail_if(std::memcmp(h, magic.data(), magic.size()) != 0, errc::bad_magic,
          "not a brevis archive (bad magic)");
  if (h[4] != version_major) {
    fail(errc::unsupported_version,
         "archive format version " + std::to_string(h[4]) + "." +
             std::to_string(h[5]) + " is not supported (this decoder reads " +
             std::to_string(version_major) + ".x)");
  }
  uint16_t const flags = load_le<uint16_t>(h + 6);
  fail_if((flags & ~brv::known_header_flags) != 0, errc::reserved_nonzero,
          "reserved header flags are not zero");
  fail_if(load_le<uint32_t>(h + 12) != 0, errc::reserved_nonzero,
          "header reserved field is not zero");
  chunk_size_ = load_le<uint32_t>(h + 8);
  check_chunk_size(chunk_size_);

  fail_if(archive_size < header_size + trailer_size, errc::truncated,
          "archive is shorter than its header and trailer");
  uint8_t t[trailer_size];
  read_at_(archive_size - trailer_size, trailer_size, t);
  fail_if(std::memcmp(t + 24, end_magic.data(), end_magic.size()) != 0,
          errc::truncated, "archive trailer is missing (cut short?)");
  uint64_t const index_offset = load_le<uint64_t>(t);
  uint64_t const index_length = load_le<uint64_t>(t + 8);
  uint64_t const index_sum = load_le<uint64_t>(t + 16);
  uint64_t const index_end = archive_size - trailer_size;
  fail_if(index_offset < header_size || index_offset > index_end ||
              index_length != index_end - index_offset,
          errc::corrupt, "trailer does not locate the index");
  fail_if(index_length > max_index_length, errc::limit,
          "index is larger than the decoder accepts");

  // The index checksum covers the header too, so no header field that
  // passed the checks above can be silently wrong.
  bytes buf(header_size + index_length);
  std::memcpy(buf.data(), h, header_size);
  read_at_(index_offset, index_length, buf.data() + header_size);
  fail_if(xxh3(buf) != index_sum && enforce_checksums, errc::checksum,
          "index checksum mismatch");

  byte_view stored = byte_view(buf).subspan(header_size);
  bytes unpacked;
  if (flags & header_flag_index_zstd) {
    unpacked = unpack_index(stored);
    stored = unpacked;
  }
  archive_index x =
      decode_index(stored, chunk_size_, index_offset - header_size,
                   (flags & header_flag_choice_records) != 0);
  original_size_ = x.original_size;
  original_checksum_ = x.original_checksum;
  regions_ = std::move(x.regions);
  programs_ = std::move(x.programs);
  chunks_ = std::move(x.chunks);
}

void archive_reader::decode_stored(chunk_entry const& c, uint8_t* out) const {
  if (c.in_program) {  // decode_index checked the slice lies in the blob
    bytes const& blob = programs_[c.program].blob;
    uint64_t const at = c.offset - regions_[c.region].info.offset;
    std::memcpy(out, blob.data() + at, c.length);
    return;
  }
  if (!memory_.empty()) {  // decode in place: no copy of the payload
    fail_if(c.payload_offset > memory_.size() ||
                c.payload_length > memory_.size() - c.payload_offset,
            errc::truncated, "payload past the end of the archive");
    codec::decode_chunk(programs_[c.program],
                        memory_.subspan(c.payload_offset, c.payload_length),
                        c.length, out);
    return;
  }
  // Uninitialized: the read fills it (a reused `bytes` zero-filled each
  // growth from one payload's length to a longer one's).
  scratch::buffer payload = scratch::take_buffer(c.payload_length);
  read_at_(c.payload_offset, c.payload_length, payload.data.get());
  codec::decode_chunk(programs_[c.program],
                      byte_view(payload.data.get(), c.payload_length), c.length,
                      out);
  scratch::give(std::move(payload));
}

void archive_reader::decode_chunk(size_t i, uint8_t* out) const {
  fail_if(i >= chunks_.size(), errc::corrupt, "chunk index out of range");
  chunk_entry const& c = chunks_[i];
  try {
    if (c.is_ref) {
      // decode_index checked that the source holds stored chunks only.
      read(c.ref_offset, c.length, out);
    } else {
      decode_stored(c, out);
    }
  } catch (error const& e) {
    fail(e.code(), "chunk " + std::to_string(i) + ": " + e.what());
  }
  if (xxh3(byte_view(out, c.length)) != c.checksum && enforce_checksums) {
    fail(errc::checksum, "chunk " + std::to_string(i) + " (original bytes " +
                             std::to_string(c.offset) + ".." +
                             std::to_string(c.offset + c.length) +
                             "): checksum mismatch");
  }
}

std::pair<size_t, size_t> archive_reader::chunks_covering(
    uint64_t offset, uint64_t length) const {
  fail_if(offset > original_size_ || length > original_size_ - offset,
          errc::limit, "range extends past the end of the original");
  if (length == 0) return {0, 0};
  auto holding = [this](uint64_t pos) {
    auto it = std::upper_bound(
        chunks_.begin(), chunks_.end(), pos,
        [](uint64_t p, chunk_entry const& c) { return p < c.offset; });
    return static_cast<size_t>(it - chunks_.begin()) - 1;
  };
  return {holding(offset), holding(offset + length - 1) + 1};
}

void archive_reader::read(uint64_t offset, size_t length, uint8_t* out) const {
  auto [first, last] = chunks_covering(offset, length);
  for (size_t i = first; i < last; ++i) {
    chunk_entry const& c = chunks_[i];
    uint64_t const from = std::max(offset, c.offset);
    uint64_t const to = std::min(offset + length, c.offset + c.length);
    uint8_t* dst = out + (from - offset);
    if (from == c.offset && to == c.offset + c.length) {
      decode_chunk(i, dst);
    } else {
      // A part of a chunk (a small random read): the whole chunk decodes
      // into this thread's reused buffer, not a fresh zero-filled one.
      bytes whole = scratch::take(c.length);
      try {
        decode_chunk(i, whole.data());
      } catch (...) {
        scratch::give(std::move(whole));
        throw;
      }
      std::memcpy(dst, whole.data() + (from - c.offset), to - from);
      scratch::give(std::move(whole));
    }
  }
  if (offset == 0 && length == original_size_ &&
      xxh3(byte_view(out, length)) != original_checksum_ && enforce_checksums) {
    fail(errc::checksum, "whole-file checksum mismatch");
  }
}

}  // namespace brevis::codec
