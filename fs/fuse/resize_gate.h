#pragma once
// Keeps a file's reads and its truncates apart until their replies are sent.
//
// Why: with the writeback cache the kernel trusts its own idea of a file's
// size, and fills a READ reply that comes back short with zeros up to it.
// It learns the new size of a truncate only from the SETATTR reply, so a
// read answered between the daemon's cut and that reply returned zeros
// where the file had bytes (a stock passthrough does the same). A read
// holds the gate until its reply is written, and a truncate holds it alone
// from before the cut until its own reply is written: a read then sees the
// bytes before the cut, or the kernel has been told the new size first.
//
// Truncates go first: a waiting truncate stops new reads from entering,
// so a steady stream of reads cannot hold it off.

#include <condition_variable>
#include <cstddef>
#include <memory>
#include <mutex>

namespace brevis::fs {

class resize_gate {
 public:
  /// One side's hold on a gate, released when destroyed. It keeps the gate
  /// (and whatever owns it: an aliasing shared_ptr) alive.
  class hold {
   public:
    hold() = default;
    hold(hold&&) noexcept = default;
    hold& operator=(hold&& other) noexcept {
      if (this != &other) {
        release();
        gate_ = std::move(other.gate_);
        resizing_ = other.resizing_;
      }
      return *this;
    }
    hold(hold const&) = delete;
    hold& operator=(hold const&) = delete;
    ~hold() { release(); }

   private:
    friend class resize_gate;
    hold(std::shared_ptr<resize_gate> gate, bool resizing)
        : gate_(std::move(gate)), resizing_(resizing) {}
    void release() noexcept {
      if (gate_) gate_->leave(resizing_);
      gate_.reset();
    }
    std::shared_ptr<resize_gate> gate_;
    bool resizing_ = false;
  };

  /// Waits while a truncate holds the gate or waits for it.
  static hold enter_read(std::shared_ptr<resize_gate> gate) {
    {
      std::unique_lock lk(gate->mu_);
      gate->cv_.wait(lk, [&] { return gate->resizers_ == 0; });
      ++gate->readers_;
    }
    return {std::move(gate), false};
  }
  /// Waits until no read and no other truncate holds the gate.
  static hold enter_resize(std::shared_ptr<resize_gate> gate) {
    {
      std::unique_lock lk(gate->mu_);
      ++gate->resizers_;  // from now on, new reads wait
      gate->cv_.wait(lk,
                     [&] { return gate->readers_ == 0 && !gate->resizing_; });
      gate->resizing_ = true;
    }
    return {std::move(gate), true};
  }

 private:
  void leave(bool resizing) noexcept {
    {
      std::lock_guard lk(mu_);
      if (resizing) {
        resizing_ = false;
        --resizers_;
      } else {
        --readers_;
      }
    }
    cv_.notify_all();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  size_t readers_ = 0;     // reads holding the gate
  size_t resizers_ = 0;    // truncates holding it or waiting for it
  bool resizing_ = false;  // a truncate holds it
};

}  // namespace brevis::fs
