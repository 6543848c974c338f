#include "fs/pipeline/release_frontier.h"

namespace brevis::fs {

release_frontier::release_frontier(std::span<range const> chunks,
                                   uint64_t batch, uint64_t max_ahead)
    : chunks_(chunks.begin(), chunks.end()),
      batch_(batch),
      max_ahead_(max_ahead),
      state_(chunks.size(), state::pending) {
  if (!chunks_.empty()) dropped_to_ = chunks_.front().begin;
}

std::vector<release_frontier::range> release_frontier::done(size_t i) {
  std::vector<range> out;
  std::lock_guard lk(mu_);
  if (i >= state_.size() || state_[i] != state::pending) return out;
  state_[i] = state::done;
  if (i != next_) {
    ahead_ += chunks_[i].end - chunks_[i].begin;
  } else {
    // Past i, the done chunks were counted ahead when they finished.
    for (++next_; next_ < state_.size() && state_[next_] != state::pending;
         ++next_) {
      range const& c = chunks_[next_];
      if (state_[next_] == state::done) ahead_ -= c.end - c.begin;
    }
  }
  bool const all = next_ == state_.size();
  uint64_t const frontier = all ? chunks_.back().end : chunks_[next_].begin;
  if (frontier > dropped_to_ && (all || frontier - dropped_to_ >= batch_)) {
    out.push_back({dropped_to_, frontier});
    dropped_to_ = frontier;
  }
  if (ahead_ > max_ahead_) {
    // A slow chunk holds the frontier: drop what finished past it, joining
    // neighbours.
    for (size_t j = next_; j < state_.size(); ++j) {
      if (state_[j] != state::done) continue;
      state_[j] = state::dropped;
      range const& c = chunks_[j];
      if (!out.empty() && out.back().end == c.begin) {
        out.back().end = c.end;
      } else {
        out.push_back(c);
      }
    }
    ahead_ = 0;
  }
  return out;
}

uint64_t release_frontier::held() const {
  std::lock_guard lk(mu_);
  if (state_.empty()) return 0;
  uint64_t const frontier =
      next_ == state_.size() ? chunks_.back().end : chunks_[next_].begin;
  return frontier - dropped_to_ + ahead_;
}

}  // namespace brevis::fs
