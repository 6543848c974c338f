#include "codec/search/wide_lanes.h"

#include <utility>

#include "codec/choose/chooser_decorator.h"
#include "codec/entropy/rans_static.h"

namespace brevis::codec::search {

void set_wide_lanes(node& program, unsigned log2) {
  // Above 16 (no such parameter): the default.
  if (program.op == opcode::rans_static) {
    program.params.clear();
    if (log2 < rans_static::wide_from_log2) program.params.push_back(log2);
  }
  for (node& child : program.children) set_wide_lanes(child, log2);
}

namespace {

class wide_lanes_chooser final : public chooser_decorator {
 public:
  wide_lanes_chooser(std::unique_ptr<program_chooser> inner, unsigned log2)
      : chooser_decorator(std::move(inner)), log2_(log2) {}

  // The estimate stays the inner chooser's (wide_lanes.h).
  bool choose_recorded(region const& r, byte_view data, node& program,
                       choice_record& how) const override {
    bool const recorded = inner().choose_recorded(r, data, program, how);
    set_wide_lanes(program, log2_);
    return recorded;
  }

 private:
  std::unique_ptr<program_chooser> rewrap(
      std::unique_ptr<program_chooser> inner) const override {
    return std::make_unique<wide_lanes_chooser>(std::move(inner), log2_);
  }

  unsigned log2_;
};

}  // namespace

std::unique_ptr<program_chooser> with_wide_lanes(
    std::unique_ptr<program_chooser> inner, unsigned log2) {
  return std::make_unique<wide_lanes_chooser>(std::move(inner), log2);
}

}  // namespace brevis::codec::search
