#pragma once
// Histograms of 16-bit lanes and the size estimates built on them, for the
// search's cost model and the file's shared tables: a static table's cost
// follows exactly from the histogram, with no trial encode.

#include <cstdint>
#include <utility>
#include <vector>

#include "codec/core/bytes.h"
#include "codec/dsl/program.h"
#include "codec/entropy/histogram.h"
#include "codec/entropy/rans_static.h"

namespace brevis::codec {

/// Present 16-bit symbols and their counts, in symbol order.
using sparse_hist = sparse_histogram16;

/// Histogram of the 16-bit lanes of `data` (a trailing odd byte ignored).
sparse_hist sparse_histogram(byte_view data);

/// Order-0 entropy of the histogram, in bits (for all its symbols).
double entropy_bits(sparse_hist const& h);

/// Estimated bytes of planes + rans0 for 16-bit lanes: the byte entropies
/// plus about 0.7 bytes of table per distinct byte (measured).
double estimate_planes_bytes(sparse_hist const& h);

/// Estimated bytes of rans_static with the value's own table: the entropy
/// plus about half a byte of table per symbol (measured).
double estimate_own_table_bytes(sparse_hist const& h);

/// Estimated payload bytes of `h` under its own table (own_table_leaf's),
/// framing included, without building the table: frequencies proportional
/// to the counts at the table's precision, at least one each.
double estimate_table_payload_bytes(sparse_hist const& h);

/// Estimated bytes of the blob of `h`'s own table (from its symbol count).
double estimate_table_blob_bytes(sparse_hist const& h);

/// The histograms (dense, indexed by value) of the children of `op`
/// applied to 16-bit elements of meaning `m` whose histogram is `h`: their
/// byte planes (low, high) or float fields (sign, exponent, mantissa), the
/// marginals of h, with no pass over the elements. None for other
/// operators and meanings.
std::vector<std::vector<uint64_t>> split_histogram(sparse_hist const& h,
                                                   opcode op, meaning m);

/// estimate_table_payload_bytes + estimate_table_blob_bytes, in one pass.
double estimate_table_bytes(sparse_hist const& h);

/// A table's estimated costs for `h` (own_table_leaf's table, not built):
/// payload and blob bytes as estimate_table_payload_bytes and
/// estimate_table_blob_bytes give them, and `bits[s]`, for every symbol s of
/// h, its code length in bits (frequencies proportional to the counts, at
/// least one slot each). `bits` holds 2^16 entries; only h's are written.
struct table_estimate {
  double payload_bytes = 0;
  double blob_bytes = 0;
  bool single_symbol = false;  // codes in zero bytes
};
table_estimate estimate_table_code_bits(sparse_hist const& h,
                                        std::vector<double>& bits);

/// The code lengths alone (into `bits`, as estimate_table_code_bits writes
/// them) and the payload bytes: for callers that first check the blob
/// (estimate_table_blob_bytes) and skip the rest when it costs too much.
double estimate_table_code_lengths(sparse_hist const& h,
                                   std::vector<double>& bits);

/// Payload bits of `h` under `t` (symbols of h all in t), framing included.
double table_bits(sparse_hist const& h, rans_static::table const& t);

/// A rans_static leaf with the table of `h` (its own table) and the exact
/// payload bytes it codes the histogram's value in.
struct own_table {
  node leaf;
  double payload_bytes = 0;
};
own_table own_table_leaf(sparse_hist const& h);

/// What order-0 programs of 16-bit floats read of their histogram, in one
/// pass over it: the byte planes' and float fields' histograms (dense, as
/// split_histogram gives them), the sign and exponent together (the
/// element's bits above the mantissa, one bitfields symbol) and a few
/// statistics.
struct float16_marginals {
  std::vector<std::vector<uint64_t>> planes;  // low, high byte
  std::vector<std::vector<uint64_t>> fields;  // sign, exponent, mantissa
  std::vector<uint64_t> sign_exponent;        // element >> mantissa bits
  uint64_t count = 0;                         // elements
  double terms = 0;        // sum of c log2 c over the elements' counts
  uint64_t zeros = 0;      // elements equal to 0
  uint32_t ored = 0;       // every element OR-ed
  bool singleton = false;  // some value occurs once
};

/// The marginals of `h`, the histogram of bf16 or fp16 elements (meaning
/// `m`).
float16_marginals float16_marginals_of(sparse_hist const& h, meaning m);
/// The same into `out`, whose vectors are reused (no fresh memory).
void float16_marginals_into(sparse_hist const& h, meaning m,
                            float16_marginals& out);

/// Regions smaller than this do not pay for a static table of their own.
inline constexpr size_t min_static_table_region = 4u << 10;

}  // namespace brevis::codec
