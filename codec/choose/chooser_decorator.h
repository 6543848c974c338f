#pragma once
// A chooser wrapped around another (the classes candidate, the store's wide
// lanes): it changes the inner chooser's programs and passes the rest on.

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "codec/choose/chooser.h"

namespace brevis::codec {

/// Cut points, joins and the summary are the inner chooser's, and for_file()
/// wraps the inner chooser's one for the file the same way (rewrap()).
/// Subclasses override choose_recorded().
class chooser_decorator : public recording_chooser {
 public:
  explicit chooser_decorator(std::unique_ptr<program_chooser> inner)
      : inner_(std::move(inner)) {}

  std::vector<uint64_t> cut_points(region const& r,
                                   byte_view data) const override {
    return inner_->cut_points(r, data);
  }
  bool joins_small_tensors() const override {
    return inner_->joins_small_tensors();
  }
  std::string summary() const override { return inner_->summary(); }

  std::unique_ptr<program_chooser> for_file(
      byte_view file, std::span<region const> regions) const override {
    auto inner = inner_->for_file(file, regions);
    if (!inner) return nullptr;
    return rewrap(std::move(inner));
  }

 protected:
  program_chooser const& inner() const { return *inner_; }
  /// This decorator, with the same settings, around `inner`.
  virtual std::unique_ptr<program_chooser> rewrap(
      std::unique_ptr<program_chooser> inner) const = 0;

 private:
  std::unique_ptr<program_chooser> inner_;
};

}  // namespace brevis::codec
