#include "fs/pipeline/tbb_worker_names.h"

#include <tbb/task_scheduler_observer.h>

#include "codec/core/thread_name.h"

namespace brevis::fs {
namespace {

// Observes the arena of the thread that made it (oneTBB's observers are
// per arena: a job's thread has an arena of its own).
class worker_names final : public tbb::task_scheduler_observer {
 public:
  worker_names() { observe(true); }
  ~worker_names() override { observe(false); }
  worker_names(worker_names const&) = delete;
  worker_names& operator=(worker_names const&) = delete;
  worker_names(worker_names&&) = delete;
  worker_names& operator=(worker_names&&) = delete;

  void on_scheduler_entry(bool is_worker) override {
    if (is_worker) codec::name_this_thread("brevis-tbb");
  }
};

}  // namespace

void name_tbb_workers_of_this_thread() {
  // Ends with the thread, while oneTBB is still there (its record of the
  // observer goes once every thread has left the arena: tests/lsan.supp).
  thread_local worker_names const names;
}

}  // namespace brevis::fs
