#pragma once
// Sibling roles: tensors with the same dtype, the same name once its digits
// are removed (layers.3.mlp.weight and layers.17.mlp.weight) and the same
// shape play the same role, and usually want the same program. Tensors of
// unknown shape (.pt storages, named data/N) stand in their length.

#include <string>

#include "codec/parse/region.h"

namespace brevis::codec::search {

/// The role of a tensor region; empty for opaque regions.
std::string role_of(region const& r);

}  // namespace brevis::codec::search
