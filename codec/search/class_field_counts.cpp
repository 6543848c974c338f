#include "codec/search/class_field_counts.h"

#include <array>

#include "codec/core/bytes.h"
#include "codec/core/error.h"

namespace brevis::codec::search {
namespace {

// The pass, for a field of Mask + 1 values at Shift: constants, so that
// the loop keeps everything in registers (with them read from memory, it
// took 2.5 ns an element). Four elements a 64-bit load, each lane's
// counters reached by a pointer of their own (its class's, in its copy):
// an element is a shift and mask of its lane, its column's pointer and an
// increment. (With the class's offset and the copy added to each element's
// field, the pass was 92 M instructions of blazepose-heavy.bf16's compress
// -T1, 71 M so; with four 16-bit loads instead of one, 74 M: g++ shifted
// each in a 16-bit register, then widened it.)
template <unsigned Shift, unsigned Mask, bool Mantissa>
void count_fields(uint8_t const* w, size_t rows, size_t cols, bool by_rows,
                  uint8_t const* map, field_counts& out) {
  constexpr size_t cells = size_t{Mask} + 1;
  constexpr size_t low_cells = size_t{1} << Shift;
  constexpr uint64_t low_mask = low_cells - 1;
  size_t const copy = out.classes.size() / 2;
  size_t const low_copy = out.mantissa.size() / 2;
  // Element j's counters: its class c's, in the copy of j's parity.
  auto field_of = [&](unsigned c, size_t j) {
    return out.classes.data() + (j & 1) * copy + c * cells;
  };
  auto low_of = [&](unsigned c, size_t j) {
    return out.mantissa.data() + (j & 1) * low_copy + c * low_cells;
  };
  using lanes = std::array<uint32_t*, 4>;
  auto four = [](uint32_t* const* f, uint32_t* const* l, uint64_t x) {
    ++f[0][(x >> Shift) & Mask];
    ++f[1][(x >> (16 + Shift)) & Mask];
    ++f[2][(x >> (32 + Shift)) & Mask];
    ++f[3][x >> (48 + Shift)];
    if constexpr (Mantissa) {
      ++l[0][x & low_mask];
      ++l[1][(x >> 16) & low_mask];
      ++l[2][(x >> 32) & low_mask];
      ++l[3][(x >> 48) & low_mask];
    }
  };
  auto one = [](uint32_t* f, uint32_t* l, uint32_t v) {
    ++f[(v >> Shift) & Mask];
    if constexpr (Mantissa) ++l[v & low_mask];
  };
  if (by_rows) {
    for (size_t r = 0; r < rows; ++r) {
      uint8_t const* row = w + r * cols * 2;
      lanes const f = {field_of(map[r], 0), field_of(map[r], 1),
                       field_of(map[r], 0), field_of(map[r], 1)};
      lanes l = {nullptr, nullptr, nullptr, nullptr};
      if constexpr (Mantissa) {
        l[0] = l[2] = low_of(map[r], 0);
        l[1] = l[3] = low_of(map[r], 1);
      }
      size_t j = 0;
      for (; j + 4 <= cols; j += 4) {
        four(f.data(), l.data(), load_le<uint64_t>(row + 2 * j));
      }
      for (; j < cols; ++j) one(f[0], l[0], load_le<uint16_t>(row + 2 * j));
    }
    return;
  }
  // Each column's pointers, computed once a tensor, in buffers the thread
  // reuses.
  static thread_local std::vector<uint32_t*> field_at;
  static thread_local std::vector<uint32_t*> low_at;
  field_at.resize(cols);
  low_at.assign(cols, nullptr);
  for (size_t j = 0; j < cols; ++j) {
    field_at[j] = field_of(map[j], j);
    if constexpr (Mantissa) low_at[j] = low_of(map[j], j);
  }
  uint32_t* const* const f = field_at.data();
  uint32_t* const* const l = low_at.data();
  for (size_t r = 0; r < rows; ++r) {
    uint8_t const* row = w + r * cols * 2;
    size_t j = 0;
    for (; j + 4 <= cols; j += 4) {
      four(f + j, l + j, load_le<uint64_t>(row + 2 * j));
    }
    for (; j < cols; ++j) one(f[j], l[j], load_le<uint16_t>(row + 2 * j));
  }
}

}  // namespace

field_counts& class_field_counts(uint8_t const* w, size_t rows, size_t cols,
                                 bool by_rows, std::span<uint8_t const> map,
                                 unsigned k, unsigned shift, unsigned mask,
                                 bool mantissa) {
  bool const bf16_field = shift == 7 && mask == 0x1FF;
  bool const fp16_field = shift == 8 && mask == 0xFF;
  fail_if(!bf16_field && !fp16_field, errc::domain,
          "class_field_counts: only bf16's (7, 0x1FF) and fp16's (8, 0xFF) "
          "fields are counted");
  size_t const cells = size_t{k} * (mask + 1);
  static thread_local field_counts out;
  out.classes.assign(2 * cells, 0);
  size_t const low_cells = mantissa ? size_t{k} << shift : 0;
  out.mantissa.assign(2 * low_cells, 0);
  auto run = [&]<unsigned Shift, unsigned Mask>() {
    if (mantissa) {
      count_fields<Shift, Mask, true>(w, rows, cols, by_rows, map.data(), out);
    } else {
      count_fields<Shift, Mask, false>(w, rows, cols, by_rows, map.data(), out);
    }
  };
  if (bf16_field) {
    run.template operator()<7, 0x1FF>();
  } else {
    run.template operator()<8, 0xFF>();
  }
  uint32_t* const field = out.classes.data();
  for (size_t i = 0; i < cells; ++i) field[i] += field[cells + i];
  uint32_t* const low = out.mantissa.data();
  for (size_t i = 0; i < low_cells; ++i) low[i] += low[low_cells + i];
  return out;
}

}  // namespace brevis::codec::search
