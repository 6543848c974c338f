#include "codec/choose/shared_tables.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "codec/leaves/rans_static.h"

namespace brevis::codec {

file_tables::file_tables(byte_view file, std::span<region const> regions) {
  // Tensors of a dtype whose values have the same median exponent tend to
  // share a distribution: one table per such group.
  struct member {
    uint64_t offset;
    sparse_hist hist;
  };
  std::map<std::pair<int, unsigned>, std::vector<member>> groups;
  for (region const& r : regions) {
    int const k = shared_kind(r);
    if (k < 0 || r.length <= 16 || r.offset + r.length > file.size()) {
      continue;
    }
    member m{r.offset, sparse_histogram(file.subspan(r.offset, r.length))};
    groups[{k, median_exponent(m.hist, k)}].push_back(std::move(m));
  }
  // Kept zero between groups: the scan below clears what it reads.
  std::vector<uint64_t> total(65536, 0);
  std::vector<double> sym_bits(65536);  // read only at the table's symbols
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    for (member const& m : members) {
      for (auto const& [s, c] : m.hist) total[s] += c;
    }
    // In symbol order by a scan, cheaper than sorting the tens of
    // thousands of symbols of large groups.
    std::vector<uint32_t> symbols;
    std::vector<uint64_t> counts;
    for (uint32_t s = 0; s < total.size(); ++s) {
      if (total[s] == 0) continue;
      symbols.push_back(s);
      counts.push_back(total[s]);
      total[s] = 0;
    }
    rans_static::table const tab = choose_rans_static_table(symbols, counts);
    node n = make_leaf(opcode::rans_static);
    n.blob = serialize_rans_static_table(tab);
    for (size_t i = 0; i < tab.symbols.size(); ++i) {
      sym_bits[tab.symbols[i]] =
          tab.scale - std::log2(static_cast<double>(tab.freqs[i]));
    }
    // Keep the table only when the tensors it would serve save more than
    // it costs, by entropy estimates against their own best coding.
    double gain = 0;
    size_t users = 0;
    std::vector<double> member_bits;
    for (member const& m : members) {
      double const own = std::min(estimate_own_table_bytes(m.hist),
                                  estimate_planes_bytes(m.hist));
      double bits = 32.0 * rans_static::lanes;
      for (auto const& [s, c] : m.hist) {
        bits += static_cast<double>(c) * sym_bits[s];
      }
      if (tab.symbols.size() == 1) bits = 0;
      member_bits.push_back(bits);
      if (bits / 8 < own) gain += own - bits / 8, ++users;
    }
    if (users == 0 || gain < 1.1 * static_cast<double>(n.blob.size())) {
      continue;
    }
    double const share =
        static_cast<double>(n.blob.size()) / static_cast<double>(users);
    for (size_t i = 0; i < members.size(); ++i) {
      table_of_[members[i].offset] = {tables_.size(), member_bits[i] / 8};
    }
    tables_.push_back(shared_table{std::move(n), share});
  }
  // choose() reuses the histograms (same region bytes).
  for (auto& [key, members] : groups) {
    for (member& m : members) hist_of_[m.offset] = std::move(m.hist);
  }
}

// 0 for bf16 tensors, 1 for fp16 ones, -1 for the rest.
int file_tables::shared_kind(region const& r) {
  if (r.kind != region_kind::tensor) return -1;
  return r.type == dtype::bf16 ? 0 : r.type == dtype::f16 ? 1 : -1;
}

unsigned file_tables::median_exponent(sparse_hist const& h, int kind) {
  unsigned const shift = kind == 0 ? 7 : 10;
  unsigned const mask = kind == 0 ? 0xff : 0x1f;
  std::array<uint64_t, 256> e{};
  uint64_t n = 0;
  for (auto const& [s, c] : h) {
    e[(s >> shift) & mask] += c;
    n += c;
  }
  uint64_t acc = 0;
  for (unsigned i = 0; i <= mask; ++i) {
    acc += e[i];
    if (2 * acc >= n) return i;
  }
  return mask;
}

std::optional<file_tables::use> file_tables::table_for(
    uint64_t region_offset) const {
  auto it = table_of_.find(region_offset);
  if (it == table_of_.end()) return std::nullopt;
  shared_table const& t = tables_[it->second.first];
  return use{&t.leaf, t.blob_share, it->second.second};
}

sparse_hist const* file_tables::histogram_of(uint64_t region_offset) const {
  auto it = hist_of_.find(region_offset);
  return it == hist_of_.end() ? nullptr : &it->second;
}

}  // namespace brevis::codec
