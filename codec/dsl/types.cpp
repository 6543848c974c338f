#include "codec/dsl/types.h"

namespace brevis::codec {

unsigned meaning_width(meaning m) noexcept {
  switch (m) {
    case meaning::bf16:
    case meaning::fp16:
      return 2;
    case meaning::fp32:
      return 4;
    case meaning::fp64:
      return 8;
    case meaning::f8e4m3:
    case meaning::f8e5m2:
      return 1;
    case meaning::none:
    case meaning::sint:
    case meaning::uint:
      return 0;
  }
  return 0;
}

bool is_float(meaning m) noexcept {
  switch (m) {
    case meaning::bf16:
    case meaning::fp16:
    case meaning::fp32:
    case meaning::fp64:
    case meaning::f8e4m3:
    case meaning::f8e5m2:
      return true;
    default:
      return false;
  }
}

std::string type_name(value_type t) {
  std::string s = "u";
  s += std::to_string(8 * t.width);
  switch (t.kind) {
    case meaning::none:
      break;
    case meaning::bf16:
      s += ":bf16";
      break;
    case meaning::fp16:
      s += ":fp16";
      break;
    case meaning::fp32:
      s += ":fp32";
      break;
    case meaning::fp64:
      s += ":fp64";
      break;
    case meaning::f8e4m3:
      s += ":f8e4m3";
      break;
    case meaning::f8e5m2:
      s += ":f8e5m2";
      break;
    case meaning::sint:
      s += ":int";
      break;
    case meaning::uint:
      s += ":uint";
      break;
  }
  return s;
}

}  // namespace brevis::codec
