#pragma once
// torch.save zip archives (.pt/.bin/.pth): stored entries `*/data/<N>` are
// tensor storages; their element types come from the pickle `*/data.pkl`.

#include <map>
#include <string>
#include <vector>

#include "codec/parse/region.h"

namespace brevis::codec {

bool looks_like_zip(byte_view file) noexcept;

/// Parses a torch.save zip; throws brevis::codec::error when the zip is
/// malformed or has no `*/data.pkl`.
parsed_file parse_pytorch_zip(byte_view file);

/// A storage the pickle refers to by persistent id.
struct pickle_storage {
  dtype type = dtype::none;  // none for untyped or unknown storage classes
  uint64_t numel = 0;        // elements, as the pickle declares
  uint32_t views = 0;        // tensors rebuilt over this storage
  /// The one tensor's shape when exactly one tensor views the whole storage
  /// contiguously from offset 0; empty otherwise.
  std::vector<uint64_t> shape;
};

/// Scans a pickle (protocol <= 5, as torch writes it) for persistent ids
/// ('storage', <torch storage class>, key, location, numel) and maps each key
/// to its storage, with the shape of the tensor rebuilt over it (see
/// pickle_storage::shape). Never executes anything; stops quietly at the first
/// opcode it does not understand and returns what it found up to there.
std::map<std::string, pickle_storage> scan_pickle_storages(byte_view pickle);

}  // namespace brevis::codec
