#include "codec/parse/gguf.h"
#include "codec/parse/region.h"

namespace brevis::codec {

unsigned dtype_width(dtype t) noexcept {
  switch (t) {
    case dtype::boolean:
    case dtype::u8:
    case dtype::i8:
    case dtype::f8_e5m2:
    case dtype::f8_e4m3:
      return 1;
    case dtype::i16:
    case dtype::u16:
    case dtype::f16:
    case dtype::bf16:
      return 2;
    case dtype::i32:
    case dtype::u32:
    case dtype::f32:
      return 4;
    case dtype::f64:
    case dtype::i64:
    case dtype::u64:
      return 8;
    default:
      return 0;  // none, gguf blocks and values no build knows
  }
}

std::string dtype_name(dtype t) {
  switch (t) {
    case dtype::none:
      return "-";
    case dtype::boolean:
      return "bool";
    case dtype::u8:
      return "u8";
    case dtype::i8:
      return "i8";
    case dtype::f8_e5m2:
      return "f8_e5m2";
    case dtype::f8_e4m3:
      return "f8_e4m3";
    case dtype::i16:
      return "i16";
    case dtype::u16:
      return "u16";
    case dtype::f16:
      return "f16";
    case dtype::bf16:
      return "bf16";
    case dtype::i32:
      return "i32";
    case dtype::u32:
      return "u32";
    case dtype::f32:
      return "f32";
    case dtype::f64:
      return "f64";
    case dtype::i64:
      return "i64";
    case dtype::u64:
      return "u64";
    default:
      break;
  }
  auto const v = static_cast<unsigned>(t);
  if (v >= static_cast<unsigned>(dtype::gguf_block)) {
    unsigned const ggml = v - static_cast<unsigned>(dtype::gguf_block);
    if (ggml_type_info const* info = ggml_type_lookup(ggml)) {
      return std::string("gguf:") + info->name;
    }
    return "gguf:type" + std::to_string(ggml);
  }
  return "dtype" + std::to_string(v);  // a value from a newer archive
}

}  // namespace brevis::codec
