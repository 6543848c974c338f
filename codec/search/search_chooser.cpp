#include "codec/search/search_chooser.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "codec/choose/entropy_terms.h"
#include "codec/choose/histogram.h"
#include "codec/choose/literals.h"
#include "codec/choose/shared_tables.h"
#include "codec/choose/work_clock.h"
#include "codec/entropy/rans_static.h"
#include "codec/search/classes_candidate.h"
#include "codec/search/closed_form.h"
#include "codec/search/production.h"
#include "codec/search/roles.h"
#include "codec/search/segment.h"
#include "codec/search/wide_lanes.h"

namespace brevis::codec {
namespace {

using search::find_program;
using search::prior;
using search::region_input;
using search::search_result;

node trivial_program(byte_view data) {
  if (data.empty()) return make_leaf(opcode::raw);
  return data.front() == 0 ? make_leaf(opcode::zero)
                           : make_leaf(opcode::constant);
}

// Whether the search may view the region as 16-bit lanes as a whole (its
// static table is then costed from the region's histogram).
bool wants_root_histogram(region const& r) {
  unsigned const w = dtype_width(r.type);
  return w == 2 || (r.type == dtype::none && r.length >= (64u << 10));
}

// The entropy in bytes of values with these counts (their sum `n`).
double entropy_bytes(std::span<uint64_t const> counts, uint64_t& n) {
  n = 0;
  double terms = 0;
  for (uint64_t c : counts) n += c, terms += c_log2_c(c);
  return entropy_from_terms(n, terms) / 8;
}

// The mantissa leaf of a bf16 program (view<u16:bf16> of bitfields:7:9 or
// fields) that an entropy coder closes, or nullptr.
node* entropy_coded_mantissa(node& program) {
  if (program.op != opcode::view || program.params.size() != 2 ||
      program.params[0] != 2 ||
      program.params[1] != static_cast<uint64_t>(meaning::bf16) ||
      program.children.empty()) {
    return nullptr;
  }
  node& e = program.children[0];
  node* leaf = nullptr;
  if (e.op == opcode::bitfields && e.params == std::vector<uint64_t>{7, 9} &&
      e.children.size() == 2) {
    leaf = &e.children[0];
  } else if (e.op == opcode::fields && e.children.size() == 3) {
    leaf = &e.children[2];
  }
  if (leaf == nullptr ||
      (leaf->op != opcode::rans_static && leaf->op != opcode::rans0)) {
    return nullptr;
  }
  return leaf;
}

// Gives a bf16 program's entropy-coded mantissa to the bits leaf where that
// costs at most packed_mantissa_margin of the region's estimated bytes
// (its payload less the mantissa's entropy: a bound, rANS costs more).
// `mantissa_counts` is the mantissas' histogram when the caller has it;
// otherwise they are counted. A function of the bytes alone (the store's
// dedup).
void pack_mantissa(byte_view data, uint64_t const* mantissa_counts,
                   node& program, choice_record& how) {
  node* const leaf = entropy_coded_mantissa(program);
  if (leaf == nullptr || how.estimated_bytes <= 0) return;
  std::array<uint64_t, 128> counted{};
  if (mantissa_counts == nullptr) {
    for (size_t i = 0; i + 1 < data.size(); i += 2) ++counted[data[i] & 127];
    mantissa_counts = counted.data();
  }
  uint64_t n = 0;
  double const entropy =
      entropy_bytes(std::span<uint64_t const>(mantissa_counts, 128), n);
  double const cost = static_cast<double>(n) * 7 / 8 - entropy;
  if (cost > packed_mantissa_margin * how.estimated_bytes) return;
  *leaf = make_leaf(opcode::bits, {7});
  how.estimated_bytes += cost;
}

// --fixed: one program per dtype, byte planes + rANS (what the byte-grouping
// compressors do), no measurement.
node fixed_program(region const& r) {
  unsigned const w = dtype_width(r.type);
  if (r.kind != region_kind::tensor || w <= 1) return make_leaf(opcode::rans0);
  std::vector<node> planes(w, make_leaf(opcode::rans0));
  return make_op(
      opcode::view, {w, static_cast<uint64_t>(search::meaning_of(r.type))},
      {make_op(opcode::planes, {}, std::move(planes)), make_leaf(opcode::raw)});
}

// The search for one file (or, per region, for any file).
class search_file_chooser final : public recording_chooser {
  // A region the closed form decides, until settle_closed_forms().
  struct pending {
    region const* r;
    search::closed_form_parts parts;
    double ms = 0;  // work_clock.h: choosing it
  };
  // What analyse() found of a region.
  struct analysis {
    bool closed = false;            // the closed form decides it
    std::optional<pending> settle;  // and settle_closed_forms() chooses it
  };

 public:
  search_file_chooser(search_chooser_options const& opt, byte_view file,
                      std::span<region const> regions)
      : opt_(opt) {
    if (opt_.sharing == table_sharing::per_file && !regions.empty()) {
      literals_ = literal_regions(regions);
      double const t0 = work_clock_ms();
      // The gate and the closed form's costs read the marginals the tables
      // compute, while they are at hand. The hook runs on the tables' loop
      // threads: each region's analysis goes to a slot of its own, and they
      // are gathered in file order afterwards.
      std::vector<analysis> analysed(regions.size());
      tables_.emplace(
          file, regions,
          [&](size_t i, region const& r, sparse_hist const& h,
              float16_marginals const& mg) {
            analysed[i] = analyse(file, r, h, mg);
          },
          opt_.parallel);
      for (size_t i = 0; i < regions.size(); ++i) {
        if (analysed[i].closed) closed_.insert(regions[i].offset);
        if (analysed[i].settle)
          pending_.push_back(std::move(*analysed[i].settle));
      }
      settle_closed_forms(file);
      double const t1 = work_clock_ms();
      if (opt_.prior == prior_kind::learned) learn(file, regions);
      find_roles(file, regions);
      release_answered_histograms();
      double const t2 = work_clock_ms();
      if (std::getenv("BREVIS_SEARCH_DEBUG")) {
        std::fprintf(stderr, "tables %.1f ms, learning %.1f ms\n", t1 - t0,
                     t2 - t1);
      }
    }
  }

  bool choose_recorded(region const& r, byte_view data, node& program,
                       choice_record& how) const override {
    double const start = work_clock_ms();
    if (data.empty() || all_bytes_equal(data)) {
      program = trivial_program(data);
      return true;
    }
    if (data.size() == r.length && literals_.contains(r.offset)) {
      program = literal_program(data);  // coded in the index (literals.h)
      how.estimated_bytes = static_cast<double>(data.size());
      return true;
    }
    if (data.size() <= 16) {  // nothing beats the bytes themselves
      program = make_leaf(opcode::raw);
      how.estimated_bytes = static_cast<double>(data.size());
      return true;
    }
    if (opt_.search.how == search::strategy::fixed) {
      program = fixed_program(r);
      return true;
    }
    bool const whole = data.size() == r.length;
    if (whole) {
      if (auto it = settled_.find(r.offset); it != settled_.end()) {
        program = it->second.program;
        how = it->second.how;
        return true;
      }
    }
    if (whole && closed_form(r, data, program, how)) {
      how.ms = work_clock_ms() - start;
      if (std::getenv("BREVIS_SEARCH_DEBUG")) {
        std::fprintf(stderr, "%s %zu: %s closed form %.2f ms est %.0f\n",
                     r.name.c_str(), data.size(), program_text(program).c_str(),
                     how.ms, how.estimated_bytes);
      }
      return true;
    }
    if (whole) {
      auto it = learned_.find(r.offset);
      if (it != learned_.end()) {  // searched while learning the prior
        program = it->second.program;
        how.estimated_bytes = it->second.estimated_bytes;
        how.expansions = static_cast<uint32_t>(it->second.expansions);
        how.ms = it->second.ms;
        how.coding_ms = coding_ms(r, program, it->second.table_ms);
        return true;
      }
    }
    search_result const* seed = nullptr;
    if (whole) {
      auto it = seeds_.find(search::role_of(r));
      if (it != seeds_.end()) seed = it->second;
    }
    if (whole && seed == nullptr) {
      if (auto it = roles_.find(search::role_of(r)); it != roles_.end()) {
        role_entry& e = *it->second;
        // The role's first region is searched once, by whichever region
        // needs it first; the others check its program on their own.
        std::call_once(e.once, [&] {
          e.first = run(e.first_region, e.data, prior_, opt_.search, nullptr);
        });
        if (e.first_region.offset == r.offset) {
          program = e.first.program;
          how.estimated_bytes = e.first.estimated_bytes;
          how.expansions = static_cast<uint32_t>(e.first.expansions);
          how.ms = work_clock_ms() - start;
          how.coding_ms = coding_ms(r, program, e.first.table_ms);
          return true;
        }
        seed = &e.first;
      }
    }
    search_result res = run(r, data, prior_, opt_.search, seed);
    program = std::move(res.program);
    how.estimated_bytes = res.estimated_bytes;
    if (opt_.pack_mantissas) pack_mantissa(data, nullptr, program, how);
    how.expansions = static_cast<uint32_t>(res.expansions);
    how.ms = work_clock_ms() - start;
    how.coding_ms = coding_ms(r, program, res.table_ms);
    if (std::getenv("BREVIS_SEARCH_DEBUG")) {
      std::fprintf(stderr, "%s %zu: %s exp %u %.2f ms est %.0f\n",
                   r.name.c_str(), data.size(), program_text(program).c_str(),
                   how.expansions, how.ms, how.estimated_bytes);
    }
    return true;
  }

  std::vector<uint64_t> cut_points(region const& r,
                                   byte_view data) const override {
    if (!opt_.segment || r.type != dtype::none ||
        opt_.search.how == search::strategy::fixed) {
      return {};
    }
    return search::statistics_cuts(data);
  }

  std::string summary() const override {
    if (prior_.uniform()) return {};
    char head[96];
    std::snprintf(head, sizeof head,
                  "learned prior (%zu programs): most likely productions\n",
                  prior_.programs_learned());
    return head + prior_.summary();
  }

 private:
  // The closed-form choice of a whole bf16/fp16 tensor (closed_form.h),
  // when its gate lets it, without the file's tables (the store's per-region
  // choice; a file's are settled with its tables).
  bool closed_form(region const& r, byte_view data, node& program,
                   choice_record& how) const {
    if (!opt_.closed_form || tables_) return false;
    if (file_tables::shared_kind(r) < 0) return false;
    double const count_start = work_clock_ms();
    sparse_hist const own = sparse_histogram(data);
    double const own_count_ms = work_clock_ms() - count_start;
    // The marginals once, for the gate and the program.
    float16_marginals own_marginals;
    float16_marginals const* marginals = nullptr;
    if (!own.empty() && data.size() % 2 == 0) {
      own_marginals = float16_marginals_of(own, search::meaning_of(r.type));
      marginals = &own_marginals;
    }
    region_input const in{
        .info = r,
        .data = data,
        .root_hist = &own,
        .marginals = marginals,
        .chunk_size = opt_.search.chunk_size,
        .wide_static_from = opt_.wide_static_margin > 0
                                ? uint64_t{1} << opt_.wide_lanes_log2
                                : 0,
        .wide_static_margin = opt_.wide_static_margin,
        .small_table_margin = opt_.small_table_margin};
    auto choice = search::closed_form_program(in, false);
    if (!choice) return false;
    program = std::move(choice->program);
    how.estimated_bytes = choice->estimated_bytes;
    how.expansions = 0;
    if (opt_.pack_mantissas && marginals != nullptr &&
        marginals->fields.size() == 3 && marginals->fields[2].size() == 128) {
      pack_mantissa(data, marginals->fields[2].data(), program, how);
    }
    how.coding_ms =
        uses_static_table(program) ? choice->table_ms + own_count_ms : 0;
    return true;
  }

  // Reads a bf16/fp16 region while the file's tables count it: its gate
  // and, where the gate lets the closed form decide it, the costs of the
  // closed form's candidates that the shared tables do not change. Called
  // on several regions at once: it changes nothing of the chooser's.
  analysis analyse(byte_view file, region const& r, sparse_hist const& h,
                   float16_marginals const& mg) const {
    if (!opt_.closed_form || h.empty() || r.offset + r.length > file.size()) {
      return {};
    }
    double const start = work_clock_ms();
    byte_view const data = file.subspan(r.offset, r.length);
    region_input const in{.info = r,
                          .data = data,
                          .root_hist = &h,
                          .marginals = &mg,
                          .chunk_size = opt_.search.chunk_size};
    search::gate_reason g = search::closed_form_gate(in);
    if (alphabet_settles(in, g, mg)) g = search::gate_reason::none;
    if (g != search::gate_reason::none) {
      if (std::getenv("BREVIS_SEARCH_DEBUG")) {
        std::fprintf(stderr, "%s: searched (%s)\n", r.name.c_str(),
                     search::gate_reason_name(g).data());
      }
      return {};
    }
    analysis a;
    a.closed = true;
    // choose() answers these before the closed form: nothing to settle.
    bool const all_equal =
        h.size() == 1 && (h.front().first & 255) == (h.front().first >> 8);
    if (literals_.contains(r.offset) || all_equal) return a;
    a.settle =
        pending{&r, search::closed_form_costs(in, mg), work_clock_ms() - start};
    return a;
  }

  // Whether a region the gate sent to the search for its alphabet alone
  // (gate reason `g`) is the closed form's after all: few values with no
  // order to exploit leave a palette nothing to win over the closed form's
  // own table (on the corpus's bf16 files the search chose the closed
  // form's program for all 172 such tensors); many zeros with no order
  // beyond them leave the search sparse over order-0 leaves, which the
  // closed form costs too (its sparse candidate); and with equal nonzero
  // neighbours, where sparse's mask saves at most sparse_gain_margin of the
  // elements' entropy (the search chose the closed form's program for 44
  // of 46 such tensors, the other two estimated 0.1% and 0.2% smaller).
  static bool alphabet_settles(region_input const& in, search::gate_reason g,
                               float16_marginals const& mg) {
    if (g == search::gate_reason::few_values) {
      return search::closed_form_order_gate(in) == search::gate_reason::none;
    }
    if (g != search::gate_reason::zeros) return false;
    search::gate_reason const order = search::closed_form_order_gate(in);
    if (order == search::gate_reason::none) return true;
    // Equal nonzero neighbours: runs may win, or may not (sparse alone).
    if (order != search::gate_reason::runs) return false;
    auto const floor = search::order0_floor_bytes(in, mg);
    return floor.elements - floor.sparse <= sparse_gain_margin * floor.elements;
  }
  static constexpr double sparse_gain_margin = 0.003;

  // The closed form's choice of every region analyse() kept, against the
  // file's shared tables, then their static tables built: encoding work,
  // timed by the CPU clock (work_clock.h) a range of regions at a time and
  // shared out by bytes. Both loops run through opt_.parallel.
  void settle_closed_forms(byte_view file) {
    std::vector<search::closed_form_choice> chosen(pending_.size());
    std::vector<char> builds(pending_.size(), 0);  // a byte a region: threads
    for_ranges(opt_.parallel, pending_.size(), [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        pending& p = pending_[i];
        region const& r = *p.r;
        double const start = work_clock_ms();
        region_input const in{.info = r,
                              .data = file.subspan(r.offset, r.length),
                              .tables = &*tables_,
                              .root_hist = tables_->histogram_of(r.offset),
                              .chunk_size = opt_.search.chunk_size};
        chosen[i] = search::closed_form_decide(in, std::move(p.parts));
        p.ms += work_clock_ms() - start;
        builds[i] = has_empty_table(chosen[i].program) ? 1 : 0;
      }
    });
    uint64_t built_bytes = 0;
    for (size_t i = 0; i < chosen.size(); ++i) {
      if (builds[i]) built_bytes += pending_[i].r->length;
    }
    std::atomic<double> build_ms{0};
    for_ranges(opt_.parallel, chosen.size(), [&](size_t begin, size_t end) {
      double const build_start = thread_cpu_ms();
      for (size_t i = begin; i < end; ++i) {
        if (!builds[i]) continue;
        region const& r = *pending_[i].r;
        search::build_closed_form_tables(chosen[i],
                                         *tables_->histogram_of(r.offset),
                                         search::meaning_of(r.type));
      }
      build_ms += thread_cpu_ms() - build_start;
    });
    for (size_t i = 0; i < chosen.size(); ++i) {
      region const& r = *pending_[i].r;
      double const own_build = builds[i]
                                   ? build_ms * static_cast<double>(r.length) /
                                         static_cast<double>(built_bytes)
                                   : 0;
      settled& e = settled_[r.offset];
      e.program = std::move(chosen[i].program);
      e.how.estimated_bytes = chosen[i].estimated_bytes;
      e.how.expansions = 0;
      e.how.ms = pending_[i].ms;
      e.how.coding_ms = coding_ms(r, e.program, own_build);
    }
    pending_.clear();
    pending_.shrink_to_fit();
  }

  static bool has_empty_table(node const& n) {
    if (n.op == opcode::rans_static && n.blob.empty()) return true;
    return std::any_of(n.children.begin(), n.children.end(),
                       [](node const& c) { return has_empty_table(c); });
  }

  // Time (work_clock.h) of the choice `program` of region `r` that was
  // encoding work, by one rule for the closed form's and the search's
  // programs. Where the program codes with static tables, they were built
  // from the region's histogram (its own, its marginals, or the file table
  // it contributed to), which is then the count the coder needs, as rANS
  // order 0 counts its input while it encodes: that count, the winner's
  // table building (`own_ms`: closed_form_choice::table_ms or
  // search_result::table_ms, with the count when the region counted its
  // own) and its share of a file table's. Where no static table codes it,
  // counting was choosing alone; so is every candidate's costing.
  double coding_ms(region const& r, node const& program, double own_ms) const {
    if (!uses_static_table(program)) return 0;
    double ms = own_ms;
    if (tables_) {
      ms += tables_->count_ms(r.offset);
      if (auto const use = tables_->table_for(r.offset)) {
        if (contains_leaf(program, *use->leaf)) ms += use->build_ms;
      }
    }
    return ms;
  }

  static bool uses_static_table(node const& n) {
    if (n.op == opcode::rans_static && !n.blob.empty()) return true;
    return std::any_of(n.children.begin(), n.children.end(),
                       [](node const& c) { return uses_static_table(c); });
  }

  static bool contains_leaf(node const& n, node const& leaf) {
    if (n == leaf) return true;
    return std::any_of(n.children.begin(), n.children.end(),
                       [&](node const& c) { return contains_leaf(c, leaf); });
  }

  // A seed (a sibling's search) is trusted without a search where its
  // decisions replay with the same statistics. .pt storages too, whose role
  // is their dtype and length: unrelated tensors share a length, but their
  // statistics then differ and they are searched (on the corpus, 164 files:
  // 430,545,321 -> 430,545,093 B; blazepose-detector.bf16.pt 21 of its 31
  // searched storages replay a sibling's program).
  search_result run(region const& r, byte_view data, prior const& p,
                    search::search_options const& o,
                    search_result const* seed) const {
    sparse_hist own;
    sparse_hist const* hist = nullptr;
    bool const whole = data.size() == r.length;
    if (tables_ && whole) hist = tables_->histogram_of(r.offset);
    if (hist == nullptr && wants_root_histogram(r)) {
      own = sparse_histogram(data);
      hist = &own;
    }
    region_input const in{.info = r,
                          .data = data,
                          .tables = tables_ && whole ? &*tables_ : nullptr,
                          .root_hist = hist,
                          .chunk_size = o.chunk_size,
                          .small_table_margin = opt_.small_table_margin};
    search::search_options so = o;
    if (opt_.sharing == table_sharing::per_region) so.time_ms = 0;
    std::span<search::decision const> seed_decisions;
    if (seed != nullptr) seed_decisions = seed->decisions;
    return find_program(in, p, so, seed ? &seed->program : nullptr,
                        opt_.sibling_margin, seed_decisions);
  }

  // Searches a deterministic sample of the file's tensors with a uniform
  // prior and a wider budget, and learns the prior from the winners: the
  // first tensor of up to learn_regions roles, spread over the file.
  void learn(byte_view file, std::span<region const> regions) {
    std::vector<region const*> firsts, others;
    std::unordered_map<std::string, bool> seen;
    for (region const& r : regions) {
      // (Not a run of small tensors written as one: a concatenation of
      // roles, whose program says little about any.)
      if (r.kind != region_kind::tensor || r.length < (4u << 10) ||
          r.tensors > 1 || r.offset + r.length > file.size() ||
          closed_.contains(r.offset)) {
        continue;
      }
      bool const fresh = seen.emplace(search::role_of(r), true).second;
      (fresh ? firsts : others).push_back(&r);
    }
    // Few roles: other tensors, evenly spread, fill the sample.
    size_t const want =
        std::min(opt_.learn_regions, firsts.size() + others.size());
    if (firsts.size() > want) {
      std::vector<region const*> spread;
      for (size_t i = 0; i < want; ++i) {
        spread.push_back(firsts[i * firsts.size() / want]);
      }
      firsts = std::move(spread);
    }
    size_t const extra = want - firsts.size();
    for (size_t j = 0; j < extra; ++j) {
      firsts.push_back(others[j * others.size() / extra]);
    }
    std::sort(
        firsts.begin(), firsts.end(),
        [](region const* a, region const* b) { return a->offset < b->offset; });
    firsts.erase(std::unique(firsts.begin(), firsts.end()), firsts.end());
    size_t const n = firsts.size();
    search::search_options wide = opt_.search;
    wide.budget *= std::max<size_t>(1, opt_.learn_budget);
    wide.small_region_budget *= std::max<size_t>(1, opt_.learn_budget);
    wide.time_ms *= static_cast<double>(std::max<size_t>(1, opt_.learn_budget));
    prior const uniform;
    for (size_t i = 0; i < n; ++i) {
      region const& r = *firsts[i];
      byte_view const data = file.subspan(r.offset, r.length);
      if (all_bytes_equal(data)) continue;
      double const start = work_clock_ms();
      // A sibling of a region learned before starts from its program, as
      // outside the sample: where the statistics match it replays, and its
      // decisions count again without a second wide search (age.fp32's six
      // sampled tensors of two roles: 48 expansions, the uniform prior's
      // siblings 12).
      std::string const role = search::role_of(r);
      auto const sibling = seeds_.find(role);
      search_result const* seed =
          sibling != seeds_.end() ? sibling->second : nullptr;
      search_result res = run(r, data, uniform, wide, seed);
      res.ms = work_clock_ms() - start;
      if (std::getenv("BREVIS_SEARCH_DEBUG")) {
        std::fprintf(stderr, "learn %s %zu: %s exp %zu %.2f ms est %.0f\n",
                     r.name.c_str(), data.size(),
                     program_text(res.program).c_str(), res.expansions, res.ms,
                     res.estimated_bytes);
      }
      prior_.learn(res.decisions);
      auto const [it, fresh] = learned_.emplace(r.offset, std::move(res));
      if (!seeds_.contains(role)) seeds_[role] = &it->second;
    }
  }

  // The first region (in file order) of every role of two regions or more
  // that the learning sample did not seed: its siblings start from its
  // program.
  void find_roles(byte_view file, std::span<region const> regions) {
    if (!opt_.search.trust_seed) return;
    std::unordered_map<std::string, std::pair<region const*, size_t>> seen;
    for (region const& r : regions) {
      // Small ones too: a replay of the sibling's program costs less than
      // their search and coded as well on the corpus.
      if (r.kind != region_kind::tensor || r.offset + r.length > file.size()) {
        continue;
      }
      auto [it, fresh] = seen.try_emplace(search::role_of(r), &r, 0);
      ++it->second.second;
    }
    for (auto const& [role, first] : seen) {
      if (first.second < 2 || seeds_.contains(role)) continue;
      auto e = std::make_unique<role_entry>();
      e->first_region = *first.first;
      e->data = file.subspan(first.first->offset, first.first->length);
      roles_.emplace(role, std::move(e));
    }
  }

  // Regions the closed form or the learning answered never read their
  // histograms again, but a role's first region, whose search a sibling
  // may run: freed, the rest were most of the chooser's memory while the
  // file is encoded (ckpt-300m: 55 of its 99 MB of heap).
  void release_answered_histograms() {
    std::unordered_set<uint64_t> firsts;
    for (auto const& [role, e] : roles_) firsts.insert(e->first_region.offset);
    auto const release = [&](uint64_t offset) {
      if (!firsts.contains(offset)) tables_->release_histogram(offset);
    };
    for (uint64_t offset : closed_) release(offset);
    for (auto const& [offset, result] : learned_) release(offset);
  }

  struct role_entry {
    region first_region;  // a copy: the writer keeps no `regions`
    byte_view data;
    std::once_flag once;
    search_result first;  // the first region's search
  };

  search_chooser_options opt_;
  // role -> its first region; filled by for_file, then only read (each
  // entry's search runs once, under its flag)
  std::unordered_map<std::string, std::unique_ptr<role_entry>> roles_;
  std::optional<file_tables> tables_;
  std::unordered_set<uint64_t> literals_;  // region offsets (per file only)
  std::unordered_set<uint64_t> closed_;    // offsets the closed form decides
  // Regions the closed form decides, between analyse() and
  // settle_closed_forms().
  std::vector<pending> pending_;
  struct settled {
    node program;
    choice_record how;
  };
  std::unordered_map<uint64_t, settled> settled_;  // region offset
  prior prior_;
  // role -> a learned region's search (in learned_)
  std::unordered_map<std::string, search_result const*> seeds_;
  std::unordered_map<uint64_t, search_result> learned_;  // region offset
};

class search_chooser final : public program_chooser {
 public:
  explicit search_chooser(search_chooser_options const& opt)
      : opt_(opt), per_region_(opt, {}, {}) {}

  node choose(region const& r, byte_view data) const override {
    return per_region_.choose(r, data);
  }
  bool choose_recorded(region const& r, byte_view data, node& program,
                       choice_record& how) const override {
    return per_region_.choose_recorded(r, data, program, how);
  }
  std::vector<uint64_t> cut_points(region const& r,
                                   byte_view data) const override {
    return per_region_.cut_points(r, data);
  }

  // (Literals likewise live in per-file archives alone.)
  bool joins_small_tensors() const override {
    return opt_.sharing != table_sharing::per_region;
  }

  std::unique_ptr<program_chooser> for_file(
      byte_view file, std::span<region const> regions) const override {
    if (opt_.sharing == table_sharing::per_region ||
        opt_.search.how == search::strategy::fixed) {
      return nullptr;
    }
    return std::make_unique<search_file_chooser>(opt_, file, regions);
  }

 private:
  search_chooser_options opt_;
  search_file_chooser per_region_;
};

}  // namespace

std::unique_ptr<program_chooser> make_search_chooser(
    search_chooser_options const& opt) {
  if (opt.pack_mantissas && opt.sharing != table_sharing::per_region) {
    // Per file, regions settled by the file's tables, the learning or their
    // role would keep their entropy-coded mantissas.
    throw std::invalid_argument("pack_mantissas is per-region choosing only");
  }
  if ((opt.wide_static_margin > 0 || opt.small_table_margin > 0) &&
      opt.sharing != table_sharing::per_region) {
    // The file's closed forms are settled with its tables, without them.
    throw std::invalid_argument(
        "wide_static_margin and small_table_margin are per-region choosing "
        "only");
  }
  std::unique_ptr<program_chooser> chooser =
      std::make_unique<search_chooser>(opt);
  if (opt.classes && opt.search.how != search::strategy::fixed) {
    chooser = search::with_classes(std::move(chooser), opt.search.chunk_size);
  }
  if (opt.wide_lanes_log2 < rans_static::wide_from_log2) {
    chooser = search::with_wide_lanes(std::move(chooser), opt.wide_lanes_log2);
  }
  return chooser;
}

search_chooser_options store_chooser_options() {
  search_chooser_options o;
  o.sharing = table_sharing::per_region;
  o.search.budget = store_search_budget;
  o.pack_mantissas = true;
  o.wide_lanes_log2 = store_wide_lanes_log2;
  o.wide_static_margin = store_wide_static_margin;
  o.small_table_margin = store_small_table_margin;
  return o;
}

std::unique_ptr<program_chooser> make_store_chooser() {
  return make_search_chooser(store_chooser_options());
}

}  // namespace brevis::codec
