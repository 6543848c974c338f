#include "codec/choose/shared_tables.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <map>

#include "codec/choose/entropy_terms.h"
#include "codec/choose/work_clock.h"
#include "codec/leaves/rans_static.h"

namespace brevis::codec {

namespace {

// A table is kept when the tensors it serves save this much more than its
// blob costs.
constexpr double keep_factor = 1.1;

struct member {
  uint64_t offset = 0;
  sparse_hist hist;
  unsigned median = 0;  // of its values' exponents: its group
  double own = 0;       // its own best coding, by entropy estimates
  // What a shared table can save it at most: its coding under any table
  // costs its entropy and the coder's framing at least.
  double most_saved = 0;
};

// The median exponent of a member's values and its own best coding
// (estimate_own_table_bytes, estimate_planes_bytes: the least), from its
// marginals: no second pass over its histogram (fp16's have tens of
// thousands of symbols).
std::pair<unsigned, double> median_and_own(float16_marginals const& mg,
                                           size_t distinct) {
  std::vector<uint64_t> const& e = mg.fields[1];
  uint64_t const n = mg.count;
  unsigned median = static_cast<unsigned>(e.size() - 1);
  uint64_t acc = 0;
  for (unsigned i = 0; i < e.size(); ++i) {
    acc += e[i];
    if (2 * acc >= n) {
      median = i;
      break;
    }
  }
  double plane_terms = 0, present = 0;
  for (size_t b = 0; b < 256; ++b) {
    plane_terms += c_log2_c(mg.planes[0][b]) + c_log2_c(mg.planes[1][b]);
    present += (mg.planes[0][b] > 0) + (mg.planes[1][b] > 0);
  }
  double const planes = (2 * c_log2_c(n) - plane_terms) / 8 + 0.7 * present;
  double const own_table = entropy_from_terms(n, mg.terms) / 8 +
                           0.5 * static_cast<double>(distinct) + 40;
  return {median, std::min(planes, own_table)};
}

// Bytes the members save under a table whose code lengths (bits per
// symbol) are `sym_bits` against their own best coding: the sum over
// the members it serves. `single` (a one-symbol table) codes in 0 bytes.
// Optionally each member's bits under the table and the users.
double shared_gain(std::vector<member> const& members,
                   std::vector<double> const& sym_bits, bool single,
                   std::vector<double>* member_bits = nullptr,
                   size_t* users = nullptr) {
  double gain = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    double bits = 32.0 * rans_static::lanes;
    for (auto const& [s, c] : members[i].hist) {
      bits += static_cast<double>(c) * sym_bits[s];
    }
    if (single) bits = 0;
    if (member_bits != nullptr) member_bits->push_back(bits);
    double const own = members[i].own;
    if (bits / 8 < own) {
      gain += own - bits / 8;
      if (users != nullptr) ++*users;
    }
  }
  return gain;
}

}  // namespace

file_tables::file_tables(byte_view file, std::span<region const> regions,
                         region_hook const& hook,
                         parallel_ranges const& parallel) {
  std::vector<size_t> counted;  // indices in `regions`
  uint64_t counted_bytes = 0;
  for (size_t i = 0; i < regions.size(); ++i) {
    region const& r = regions[i];
    if (shared_kind(r) < 0 || r.length <= 16 ||
        r.offset + r.length > file.size()) {
      continue;
    }
    counted.push_back(i);
    counted_bytes += r.length;
  }
  // Every region's count, then its marginals and the hook, a range of
  // regions at a time. The counts are timed in batches, one a range (two
  // reads of the CPU clock, see work_clock.h), their sum shared out by
  // bytes (a count is one pass over them): the coders' input where a
  // static table wins.
  std::vector<member> counts(counted.size());
  std::atomic<double> count_total{0};
  for_ranges(parallel, counted.size(), [&](size_t begin, size_t end) {
    double const count_start = thread_cpu_ms();
    for (size_t j = begin; j < end; ++j) {
      region const& r = regions[counted[j]];
      counts[j].offset = r.offset;
      counts[j].hist = sparse_histogram(file.subspan(r.offset, r.length));
    }
    count_total += thread_cpu_ms() - count_start;
    // Reused by every region of the thread: fresh marginals (11 KiB for
    // bf16) would page in new memory here (3 faults of 10-15 us a tensor).
    thread_local float16_marginals mg;
    for (size_t j = begin; j < end; ++j) {
      region const& r = regions[counted[j]];
      member& m = counts[j];
      float16_marginals_into(
          m.hist, shared_kind(r) == 0 ? meaning::bf16 : meaning::fp16, mg);
      auto const [median, own] = median_and_own(mg, m.hist.size());
      m.median = median;
      m.own = own;
      m.most_saved =
          std::max(0.0, own - entropy_from_terms(mg.count, mg.terms) / 8 -
                            4.0 * rans_static::lanes);
      if (hook) hook(counted[j], r, m.hist, mg);
    }
  });
  // Tensors of a dtype whose values have the same median exponent tend to
  // share a distribution: one table per such group (members in file order).
  std::map<std::pair<int, unsigned>, std::vector<member>> groups;
  for (size_t j = 0; j < counted.size(); ++j) {
    region const& r = regions[counted[j]];
    count_ms_[r.offset] = count_total * static_cast<double>(r.length) /
                          static_cast<double>(counted_bytes);
    groups[{shared_kind(r), counts[j].median}].push_back(std::move(counts[j]));
  }
  // Read only at the groups' symbols; kept by the thread for its next file.
  thread_local std::vector<double> sym_bits(65536);
  // Reused by every group (and by the thread's next file): fp16 groups have
  // tens of thousands of symbols, and growing a fresh one each would page in
  // new memory at every step.
  thread_local sparse_hist group;
  std::vector<sparse_hist const*> parts;
  for (auto& [key, members] : groups) {
    if (members.size() < 2) continue;
    // The group's count: what its table is built from (encoding work, as
    // building it is, where the table is kept: shared_table::build_ms).
    double const group_start = thread_cpu_ms();
    // Summed in histogram16's counters (the thread's own, paged in once by
    // whatever it counted before): no 1 MiB of fresh counters and flags a
    // file.
    parts.clear();
    for (member const& m : members) parts.push_back(&m.hist);
    sum_histograms16(parts, group);
    double const group_ms = thread_cpu_ms() - group_start;
    // Most groups (fp16's: tens of thousands of symbols) are not kept:
    // their gain is estimated from the group's histogram (the table's
    // code lengths in closed form), and only a group that may be kept
    // gets its table built and its gain checked exactly. Its blob first:
    // where no table can save the members that much, no pass over them,
    // nor code lengths. (A one-symbol table codes in no bytes, framing
    // neither.)
    double const blob_bytes = estimate_table_blob_bytes(group);
    bool const single_symbol = group.size() == 1;
    double most_saved = 0;
    for (member const& m : members) most_saved += m.most_saved;
    if (!single_symbol && most_saved < 0.9 * keep_factor * blob_bytes) {
      continue;
    }
    estimate_table_code_lengths(group, sym_bits);
    // (On the blazepose files the estimated gain ran up to a few percent
    // above the exact one and the estimated blob within 10% of the built
    // one: the 0.9 margin skipped no group the exact check kept.)
    if (shared_gain(members, sym_bits, single_symbol) <
        0.9 * keep_factor * blob_bytes) {
      continue;
    }
    double const build_start = thread_cpu_ms();
    std::vector<uint32_t> symbols;
    std::vector<uint64_t> counts;
    symbols.reserve(group.size()), counts.reserve(group.size());
    for (auto const& [s, c] : group) symbols.push_back(s), counts.push_back(c);
    rans_static_choice chosen = choose_rans_static(symbols, counts);
    rans_static::table const& tab = chosen.table;
    node n = make_leaf(opcode::rans_static);
    n.blob = std::move(chosen.blob);
    double const build_ms = group_ms + (thread_cpu_ms() - build_start);
    for (size_t i = 0; i < tab.symbols.size(); ++i) {
      sym_bits[tab.symbols[i]] =
          tab.scale - std::log2(static_cast<double>(tab.freqs[i]));
    }
    // Keep the table only when the tensors it would serve save more than
    // it costs, by entropy estimates against their own best coding.
    std::vector<double> member_bits;
    size_t users = 0;
    double const gain = shared_gain(members, sym_bits, tab.symbols.size() == 1,
                                    &member_bits, &users);
    if (users == 0 || gain < keep_factor * static_cast<double>(n.blob.size())) {
      continue;
    }
    double const share =
        static_cast<double>(n.blob.size()) / static_cast<double>(users);
    for (size_t i = 0; i < members.size(); ++i) {
      table_of_[members[i].offset] = {tables_.size(), member_bits[i] / 8};
    }
    tables_.push_back(shared_table{std::move(n), share,
                                   build_ms / static_cast<double>(users)});
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

std::optional<file_tables::use> file_tables::table_for(
    uint64_t region_offset) const {
  auto it = table_of_.find(region_offset);
  if (it == table_of_.end()) return std::nullopt;
  shared_table const& t = tables_[it->second.first];
  return use{&t.leaf, t.blob_share, it->second.second, t.build_ms};
}

double file_tables::count_ms(uint64_t region_offset) const {
  auto it = count_ms_.find(region_offset);
  return it == count_ms_.end() ? 0 : it->second;
}

sparse_hist const* file_tables::histogram_of(uint64_t region_offset) const {
  auto it = hist_of_.find(region_offset);
  return it == hist_of_.end() ? nullptr : &it->second;
}

void file_tables::release_histogram(uint64_t region_offset) {
  hist_of_.erase(region_offset);
}

}  // namespace brevis::codec
