#pragma once
// Runs produce(i) for i in [0, count) in parallel and consume(result) in
// order of i, with at most `tokens` items in flight (bounded memory): the
// shape of both compression and decompression.
//
// Stage bodies never throw into oneTBB: a cancelled pipeline does not
// destroy the items it holds (they would leak), so errors travel downstream
// as exception_ptr, the input stage stops, and the first error is rethrown
// after the pipeline drained.

#include <tbb/parallel_pipeline.h>

#include <atomic>
#include <cstddef>
#include <exception>
#include <memory>

namespace brevis::fs {

template <typename Produce, typename Consume>
void ordered_pipeline(size_t count, size_t tokens, Produce&& produce,
                      Consume&& consume) {
  using result = decltype(produce(size_t{0}));
  struct item {
    size_t index = 0;
    std::shared_ptr<result> value;  // copyable token, as oneTBB expects
    std::exception_ptr error;
  };
  std::atomic<bool> failed{false};
  std::exception_ptr first_error;
  size_t next = 0;
  tbb::parallel_pipeline(
      tokens < 1 ? 1 : tokens,
      tbb::make_filter<void, size_t>(
          tbb::filter_mode::serial_in_order,
          [&](tbb::flow_control& fc) -> size_t {
            if (next == count || failed.load(std::memory_order_relaxed)) {
              fc.stop();
              return 0;
            }
            return next++;
          }) &
          tbb::make_filter<size_t, item>(
              tbb::filter_mode::parallel,
              [&](size_t i) {
                item it;
                it.index = i;
                if (failed.load(std::memory_order_relaxed)) return it;
                try {
                  it.value = std::make_shared<result>(produce(i));
                } catch (...) {
                  it.error = std::current_exception();
                }
                return it;
              }) &
          tbb::make_filter<item, void>(
              tbb::filter_mode::serial_in_order, [&](item const& it) {
                if (first_error) return;
                try {
                  if (it.error) std::rethrow_exception(it.error);
                  if (!it.value) return;  // skipped after a failure
                  consume(*it.value);
                } catch (...) {
                  first_error = std::current_exception();
                  failed.store(true, std::memory_order_relaxed);
                }
              }));
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace brevis::fs
