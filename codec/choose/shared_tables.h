#pragma once
// File-level static tables for 16-bit float tensors: tensors of one dtype
// whose values have the same median exponent share one rans_static table,
// kept when the tensors it serves save more than it costs. The archive
// stores the program once, so each tensor is charged a share of the blob.

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "codec/choose/histogram.h"
#include "codec/core/bytes.h"
#include "codec/core/parallel.h"
#include "codec/dsl/program.h"
#include "codec/parse/region.h"

namespace brevis::codec {

class file_tables {
 public:
  /// What a caller reads of each bf16/fp16 region while its histogram and
  /// marginals are at hand (the marginals are not kept: computing them
  /// again cost a third of choosing the closed form's programs). `index`
  /// is the region's position in the file's regions.
  using region_hook =
      std::function<void(size_t index, region const&, sparse_hist const&,
                         float16_marginals const&)>;

  /// Builds the tables of `file`, whose regions are `regions`, calling
  /// `hook` (if set) once on each bf16/fp16 region. The regions are counted
  /// through `parallel`, so the hook may run on several threads at once;
  /// the tables do not depend on how the loop ran.
  file_tables(byte_view file, std::span<region const> regions,
              region_hook const& hook = {},
              parallel_ranges const& parallel = {});

  struct use {
    node const* leaf;      // the rans_static leaf holding the table
    double blob_share;     // table bytes charged to each tensor using it
    double payload_bytes;  // the whole region's payload under the table
    double build_ms;  // time (work_clock.h) counting its group and building it,
                      // per tensor using it
  };
  /// The table for the region starting at `region_offset`, if any.
  std::optional<use> table_for(uint64_t region_offset) const;
  /// The 16-bit histogram of a bf16/fp16 region (whole), if computed.
  sparse_hist const* histogram_of(uint64_t region_offset) const;
  /// Frees that histogram, for a caller that will not read it again.
  void release_histogram(uint64_t region_offset);

  /// CPU time (work_clock.h's thread_cpu_ms) spent counting the histogram
  /// of the region at `region_offset` (0 when not computed): the count of
  /// every region timed as one batch, shared out by bytes.
  double count_ms(uint64_t region_offset) const;

  /// 0 for bf16 tensors, 1 for fp16 ones, -1 for the rest.
  static int shared_kind(region const& r);

 private:
  // A table and the bytes each of its tensors is charged for it.
  struct shared_table {
    node leaf;
    double blob_share = 0;
    double build_ms = 0;  // per tensor using it
  };
  std::vector<shared_table> tables_;
  // region offset -> shared table, its estimated payload bytes
  std::unordered_map<uint64_t, std::pair<size_t, double>> table_of_;
  std::unordered_map<uint64_t, sparse_hist> hist_of_;  // region offset
  std::unordered_map<uint64_t, double> count_ms_;      // region offset
};

}  // namespace brevis::codec
