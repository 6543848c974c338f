#pragma once
// oneTBB's worker threads named `brevis-tbb` as they join the arena of the
// thread that runs a compression job (its graphs run in that thread's
// arena), so that `top -H` and perf tell them from the daemon's own
// threads (codec/core/thread_name.h).

namespace brevis::fs {

/// From now until this thread ends, workers that join its arena name
/// themselves. Called before the thread's first graph: it also sets up the
/// thread's arena, which the graphs then join. Repeated calls on one
/// thread do nothing more.
void name_tbb_workers_of_this_thread();

}  // namespace brevis::fs
