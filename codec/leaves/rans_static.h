#pragma once
// The rans_static leaf: static order-0 rANS over 8- or 16-bit lanes with its
// frequency table in the node's blob (stored once per tensor in the program,
// not once per chunk). See codec/entropy/rans_static.h for the coder.

#include <cstddef>
#include <cstdint>
#include <span>

#include "codec/dsl/program.h"
#include "codec/dsl/types.h"
#include "codec/entropy/rans_static.h"

namespace brevis::codec {

/// A rans_static leaf whose table fits the symbols (lanes of `width` bytes, 1
/// or 2) of `sample_or_whole_value`. Values with symbols the sample lacks
/// will not encode (errc::domain). Throws errc::domain on an empty sample or
/// a width other than 1 or 2.
node make_rans_static(stream const& sample_or_whole_value, unsigned width);

/// How many coders the leaf has built from its nodes' table blobs, in this
/// process (it keeps the last few it built; for tests of that cache).
uint64_t rans_static_coders_built();

/// The precision (log2) for a table of `symbols` symbols coding `count`
/// symbols: 2^10..2^16, growing with both.
unsigned rans_static_scale_for(size_t symbols, uint64_t count);
inline constexpr size_t fast_table_symbols = 256;
inline constexpr unsigned fast_table_scale = 12;
inline constexpr double fast_table_margin = 0.001;

/// The quantized, normalized table make_rans_static chooses for a histogram
/// (2^(8 width) entries), at precision rans_static_scale_for; or for
/// alphabets of up to fast_table_symbols symbols at 2^fast_table_scale,
/// whose tables decode faster, unless that codes more than
/// fast_table_margin larger.
rans_static::table choose_rans_static_table(std::span<uint64_t const> hist);
/// The same from the present symbols (increasing) and their counts (> 0).
rans_static::table choose_rans_static_table(std::span<uint32_t const> symbols,
                                            std::span<uint64_t const> counts);

/// choose_rans_static_table's table with its blob
/// (serialize_rans_static_table's), serialized once: choosing between two
/// precisions serializes both, and the winner's blob is kept.
struct rans_static_choice {
  rans_static::table table;
  bytes blob;
};
rans_static_choice choose_rans_static(std::span<uint64_t const> hist);
rans_static_choice choose_rans_static(std::span<uint32_t const> symbols,
                                      std::span<uint64_t const> counts);

/// Estimated coded size in bits of a value with histogram `hist`: payload
/// plus the table blob. Throws errc::domain on an empty histogram.
double estimate_rans_static_bits(std::span<uint64_t const> hist);

/// Estimated bytes of the blob of a table with these symbols (increasing)
/// and frequencies (not yet quantized), without building it: its symbol set
/// and codes exactly, their packing by their entropy.
double estimate_rans_static_blob_bytes(std::span<uint32_t const> symbols,
                                       std::span<uint32_t const> freqs);

/// The same for the table of a histogram (present symbols, increasing, and
/// their counts, summing to `total`) at precision 2^scale, its frequencies
/// proportional to the counts (at least 1), in one pass without building
/// them. With `payload_bits`, also the payload under those frequencies
/// (framing included): the histogram's whole cost in the same pass.
double estimate_rans_static_blob_bytes(
    std::span<std::pair<uint32_t, uint32_t> const> hist, uint64_t total,
    unsigned scale, double* payload_bits = nullptr);

/// The nearest table the blob can hold: frequencies kept to 4-5 significant
/// bits, one (the first largest) taking the remainder. Throws errc::domain
/// unless the frequencies sum to 2^scale. (Not always idempotent: where a
/// symbol rounds up past the remainder, quantizing again takes that one.)
rans_static::table quantize_rans_static_table(rans_static::table const& t);

/// The quantized table of these symbols (increasing) and counts (> 0) at
/// precision 2^scale: quantize_rans_static_table of their normalization,
/// the optimal one (rans_static::normalize) for alphabets of up to
/// exact_table_symbols symbols, the near one (rans_static::normalize_near)
/// above, where the quantization moves frequencies more than that loses.
inline constexpr size_t exact_table_symbols = 256;
rans_static::table quantized_rans_static_table(
    std::span<uint32_t const> symbols, std::span<uint64_t const> counts,
    unsigned scale);

/// The blob format (see rans_static.cpp). Throws errc::domain unless `t` is
/// quantized (at most one frequency the codes cannot hold).
bytes serialize_rans_static_table(rans_static::table const& t);
/// Parses and validates a blob for symbols of `width` bytes; throws
/// errc::corrupt (or errc::truncated) when it is malformed.
rans_static::table parse_rans_static_table(byte_view blob, unsigned width);
/// The number of symbols of a blob's table (for symbols of `width` bytes),
/// from its symbol set alone: not its frequency codes, most of a large
/// table's blob. Throws as parse_rans_static_table does on a malformed set.
size_t rans_static_table_symbols(byte_view blob, unsigned width);

}  // namespace brevis::codec
