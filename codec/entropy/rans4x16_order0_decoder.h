#pragma once
// A decoder for htscodecs' 4-way order-0 rANS streams (the format of
// CRAM 3.1's rANS Nx16, order 0, without the flag and size header), made
// for small streams: the library's decoder fills three 4096-entry tables
// slot by slot on every call, which was most of its cost for the streams
// of a few KB that small checkpoints are made of. Here the slot-to-symbol
// table is filled a run per symbol and frequency and start are looked up by
// symbol. It decodes the library's streams to the same bytes; it is
// stricter on malformed ones (it never reads past the stream).

#include <cstddef>
#include <cstdint>

#include "codec/core/bytes.h"

namespace brevis::codec::rans4x16_order0 {

/// Decodes `body` (the frequency table, four states and the renormalisation
/// words) into exactly `out_size` bytes at `out`; throws errc::corrupt or
/// errc::truncated when the stream is malformed.
void decode(byte_view body, size_t out_size, uint8_t* out);

}  // namespace brevis::codec::rans4x16_order0
