// Placeholder candidate chooser: the fallback for every region. The real
// chooser replaces this file.
#include "codec/choose/chooser.h"

namespace brevis::codec {
namespace {

class fallback_chooser final : public program_chooser {
 public:
  node choose(region const&, byte_view) const override {
    return fallback_program();
  }
};

}  // namespace

std::unique_ptr<program_chooser> make_candidate_chooser() {
  return std::make_unique<fallback_chooser>();
}

}  // namespace brevis::codec
