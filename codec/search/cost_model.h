#pragma once
// Payload cost of closing a value with a leaf: measured by encoding the
// value's sample (scaled to the region), or estimated from histograms
// (entropy coders, static tables, whose tables are not built). Cached per
// (value, leaf), so that the many partial programs sharing a value pay for
// it once.

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "codec/dsl/program.h"
#include "codec/search/production.h"

namespace brevis::codec::search {

class cost_model {
 public:
  explicit cost_model(region_input const& in) : in_(in) {}

  /// Payload bits for the part of the region this value stands for (its
  /// sample scaled by `scale`); infinity when the leaf cannot code it.
  /// `value_hash` identifies the sample's bytes and type.
  double payload_bits(value_info const& v, uint64_t value_hash, double scale,
                      node const& leaf, std::string_view production);

  /// Program bytes a leaf adds (its blob; a shared table's share).
  double blob_bits(node const& leaf, std::string_view production) const;

  size_t trials() const { return trials_; }

 private:
  region_input const& in_;
  // (value hash, leaf hash) -> unscaled bits, or exact bits (scale 1)
  std::unordered_map<uint64_t, std::pair<double, bool>> cache_;
  size_t trials_ = 0;
};

/// Identifies a value: its sample bytes and type.
uint64_t value_hash(stream const& s);

}  // namespace brevis::codec::search
