#pragma once
// A one-line progress display on stderr ("\rNAME  45%  123.4 MB/s"), shown
// only when stderr is a terminal, the job is large enough to be worth it and
// the user did not ask for quiet. Redraws at most ten times a second.
// @note Not thread-safe: update() is called from the serial output stage.

#include <chrono>
#include <cstdint>
#include <string>

namespace brevis::cli {

/// Inputs above this size get a progress line (when on a terminal).
inline constexpr uint64_t progress_threshold = 32ull << 20;

class progress {
 public:
  /// `total` is the size the percentage refers to (original bytes).
  progress(std::string label, uint64_t total, bool quiet);
  ~progress();
  progress(progress const&) = delete;
  progress& operator=(progress const&) = delete;

  void update(uint64_t done);
  /// Erases the line (before a summary or error is printed).
  void finish();

 private:
  using clock = std::chrono::steady_clock;
  std::string label_;
  uint64_t total_;
  bool enabled_;
  bool drawn_ = false;
  clock::time_point start_ = clock::now();
  clock::time_point last_{};
};

/// "1.50 MiB"-style sizes for messages.
std::string human_size(uint64_t bytes);

}  // namespace brevis::cli
