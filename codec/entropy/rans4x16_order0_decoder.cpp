#include "codec/entropy/rans4x16_order0_decoder.h"

#include <array>
#include <cstring>

#include "codec/core/error.h"

namespace brevis::codec::rans4x16_order0 {
namespace {

constexpr unsigned total_bits = 12;
constexpr uint32_t total = 1u << total_bits;
constexpr uint32_t slot_mask = total - 1;
constexpr uint32_t lower_bound = 1u << 15;  // states renormalise below this

class reader {
 public:
  explicit reader(byte_view in) : in_(in) {}
  size_t at() const { return at_; }
  bool has(size_t n) const { return in_.size() - at_ >= n; }
  uint8_t peek() const {
    fail_if(!has(1), errc::truncated, "rans4x16: truncated table");
    return in_[at_];
  }
  uint8_t byte() {
    uint8_t const c = peek();
    ++at_;
    return c;
  }
  // 7-bit groups, most significant first, the high bit set on all but the
  // last (the library's var_get_u32).
  uint32_t varint() {
    uint64_t v = 0;
    for (int n = 0; n < 5; ++n) {
      uint8_t const c = byte();
      v = v << 7 | (c & 0x7f);
      if ((c & 0x80) == 0) {
        fail_if(v > UINT32_MAX, errc::corrupt, "rans4x16: varint too large");
        return static_cast<uint32_t>(v);
      }
    }
    fail(errc::corrupt, "rans4x16: varint too long");
  }

 private:
  byte_view in_;
  size_t at_ = 0;
};

// The alphabet: symbols in increasing order ended by a 0 byte; a symbol
// followed by its successor starts a run whose length (the symbols after
// that successor) comes next. Read as the library's decode_alphabet reads
// it, so any list it accepts means the same symbols here.
std::array<bool, 256> read_alphabet(reader& r) {
  std::array<bool, 256> present{};
  unsigned sym = r.byte();
  unsigned run = 0;
  do {
    present[sym] = true;
    if (run == 0 && sym + 1 == r.peek()) {
      sym = r.byte();
      run = r.byte();
    } else if (run != 0) {
      --run;
      ++sym;
      fail_if(sym > 255, errc::corrupt, "rans4x16: alphabet run past 255");
    } else {
      sym = r.byte();
    }
  } while (sym != 0);
  return present;
}

// One 32-bit entry a slot: the slot's symbol (high 8 bits), its
// frequency (low 12) and its offset in the symbol's run (the 12 between),
// so a step looks its symbol up with one dependent load, not two (slot ->
// symbol -> frequency and start): 1.52 -> 1.18 ns a symbol on 16 KB
// streams, 2.80 -> 2.11 on 1 KB ones (the fill vectorises; no memset).
// A stream of one symbol (frequency 2^12, which 12 bits cannot hold) has
// no table: its states never move, so it decodes to that symbol repeated.
// The slots are not zeroed: read_model writes every one (the frequencies,
// scaled, sum to 2^12) or sets only_symbol, and zeroing 16 KiB would cost a
// 1 KB stream's decode over again.
// NOLINTNEXTLINE(cppcoreguidelines-pro-type-member-init)
struct model {
  std::array<uint32_t, total> slot;
  int only_symbol = -1;
};

// Frequencies follow the alphabet, one varint per symbol; they sum to a
// power of two of at most 2^12 and are scaled up to 2^12 (the library's
// normalise_freq_shift).
void read_model(reader& r, model& m) {
  std::array<bool, 256> const present = read_alphabet(r);
  std::array<uint32_t, 256> freq{};
  uint64_t sum = 0;
  for (unsigned s = 0; s < 256; ++s) {
    if (!present[s]) continue;
    freq[s] = r.varint();
    fail_if(freq[s] > total, errc::corrupt, "rans4x16: frequency too large");
    sum += freq[s];
  }
  fail_if(sum == 0 || sum > total || (sum & (sum - 1)) != 0, errc::corrupt,
          "rans4x16: frequencies do not sum to a power of two");
  unsigned shift = 0;
  while ((sum << shift) < total) ++shift;
  uint32_t at = 0;
  for (unsigned s = 0; s < 256; ++s) {
    uint32_t const f = freq[s] << shift;
    if (f == total) {
      m.only_symbol = static_cast<int>(s);
      return;
    }
    uint32_t const first = f | s << 24;
    uint32_t* const run = m.slot.data() + at;
    for (uint32_t j = 0; j < f; ++j) run[j] = first + (j << total_bits);
    at += f;
  }
}

}  // namespace

void decode(byte_view body, size_t out_size, uint8_t* out) {
  reader r(body);
  model m;
  read_model(r, m);
  fail_if(!r.has(16), errc::truncated, "rans4x16: truncated states");
  uint8_t const* p = body.data() + r.at();
  uint8_t const* const end = body.data() + body.size();
  uint32_t state[4];
  for (uint32_t& x : state) {
    std::memcpy(&x, p, 4);  // little-endian, as x86
    p += 4;
    fail_if(x < lower_bound, errc::corrupt, "rans4x16: state out of range");
  }
  if (m.only_symbol >= 0) {
    std::memset(out, m.only_symbol, out_size);
    return;
  }
  uint32_t const* const slots = m.slot.data();
  auto const step = [slots](uint32_t& x) {
    uint32_t const e = slots[x & slot_mask];
    x = (e & slot_mask) * (x >> total_bits) + (e >> total_bits & slot_mask);
    return static_cast<uint8_t>(e >> 24);
  };
  // Arithmetic, not ?: (which GCC compiles to a branch, mispredicted on
  // about every other renormalization: 2.9 ns a symbol in a real checkpoint's
  // exponent planes).
  auto const renorm = [](uint32_t& x, uint8_t const*& at) {
    uint16_t w;
    std::memcpy(&w, at, 2);
    uint32_t const low = x < lower_bound;
    x = (x << (low << 4)) | (w & (0u - low));
    at += low << 1;
  };
  // The states live in locals and each group's bytes are stored after its
  // steps: a byte store may alias anything, and would otherwise force the
  // states and tables to be reloaded.
  uint32_t x0 = state[0];
  uint32_t x1 = state[1];
  uint32_t x2 = state[2];
  uint32_t x3 = state[3];
  size_t i = 0;
  // Four symbols read at most 8 bytes: unchecked while 8 remain.
  for (; i + 4 <= out_size && end - p >= 8; i += 4) {
    uint8_t const s0 = step(x0);
    uint8_t const s1 = step(x1);
    uint8_t const s2 = step(x2);
    uint8_t const s3 = step(x3);
    renorm(x0, p);
    renorm(x1, p);
    renorm(x2, p);
    renorm(x3, p);
    uint32_t const group = uint32_t{s0} | uint32_t{s1} << 8 |
                           uint32_t{s2} << 16 | uint32_t{s3} << 24;
    std::memcpy(out + i, &group, 4);
  }
  state[0] = x0;
  state[1] = x1;
  state[2] = x2;
  state[3] = x3;
  for (; i < out_size; ++i) {
    uint32_t& x = state[i & 3];
    out[i] = step(x);
    if (x < lower_bound) {
      fail_if(end - p < 2, errc::truncated, "rans4x16: truncated stream");
      renorm(x, p);
    }
  }
}

}  // namespace brevis::codec::rans4x16_order0
