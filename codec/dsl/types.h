#pragma once
// Types of the values that flow through a program. A value is a byte buffer
// read as little-endian lanes of `width` bytes (1, 2, 4 or 8); `meaning` says
// what the lanes hold, which decides the operators that apply (only floats
// have `fields`, for instance). Width 1 with meaning none is plain `bytes`.

#include <cstdint>
#include <string>

#include "codec/core/bytes.h"

namespace brevis::codec {

/// What the lanes of a value hold. Stored in programs: never renumber.
enum class meaning : uint8_t {
  none = 0,  // raw bytes or unsigned integers of no known kind
  bf16 = 1,
  fp16 = 2,
  fp32 = 3,
  fp64 = 4,
  f8e4m3 = 5,
  f8e5m2 = 6,
  sint = 7,  // two's complement integers
  uint = 8,  // unsigned integers, counts, indices, float fields
};

struct value_type {
  uint8_t width = 1;  // lane width in bytes: 1, 2, 4 or 8
  meaning kind = meaning::none;

  friend bool operator==(value_type, value_type) = default;
};

inline constexpr value_type bytes_type{1, meaning::none};

inline bool valid_width(uint64_t w) {
  return w == 1 || w == 2 || w == 4 || w == 8;
}

/// Lane width that a meaning requires, or 0 when any width goes.
unsigned meaning_width(meaning m) noexcept;
bool is_float(meaning m) noexcept;

/// Mantissa bits of float meaning `m` (the `fields` operator's third
/// child), or 0 for a meaning that is not a float.
constexpr unsigned float_mantissa_bits(meaning m) noexcept {
  switch (m) {
    case meaning::bf16:
      return 7;
    case meaning::fp16:
      return 10;
    case meaning::fp32:
      return 23;
    case meaning::fp64:
      return 52;
    case meaning::f8e4m3:
      return 3;
    case meaning::f8e5m2:
      return 2;
    default:
      return 0;
  }
}
/// "u8", "u16:bf16", "u32:fp32", "u8:int" ...
std::string type_name(value_type t);

/// A value flowing through a program: its bytes and its type. The size of
/// `data` is always a multiple of `type.width`.
struct stream {
  bytes data;
  value_type type;

  size_t count() const { return data.size() / type.width; }
};

/// A value held elsewhere (a decoder's scratch buffer, or a raw leaf's bytes
/// in the payload): what an operator's decode reads its children from.
struct value_view {
  byte_view data;
  value_type type;

  size_t count() const { return data.size() / type.width; }
};

}  // namespace brevis::codec
