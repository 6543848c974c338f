// oneTBB's library entry points (tbb::detail::r1), loaded on their first
// call instead of at process start.
//
// Why: a brevis run that stays on one thread (every small file, any -T1 run)
// never calls into oneTBB, yet a libtbb.so.12 named in the executable is
// mapped, relocated and initialized by every start: ~30 page faults (its
// static constructors alone write 20 pages), 11 system calls and ~0.3 M
// instructions, a tenth of decompressing a 100 KB checkpoint (issue 2).
// oneTBB's headers reach the library only through the functions below, so
// the executable defines them itself and does not link libtbb; the first
// call dlopens it and resolves every entry point at once.
//
// Each definition repeats the signature oneTBB's headers declare, so a
// header that changed a signature or added an entry point fails the link
// (the real symbol is then undefined), not the run. A library that lacks
// one of the names ends the process with a message on the first call.

#include <dlfcn.h>
#include <tbb/cache_aligned_allocator.h>
#include <tbb/global_control.h>
#include <tbb/info.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>
#include <tbb/task_group.h>
#include <tbb/task_scheduler_observer.h>
#include <tbb/tbb_allocator.h>

#include <cstdio>
#include <cstdlib>

namespace tbb::detail::r1 {
namespace {

// One slot per entry point; names are the Itanium-mangled symbols of
// libtbb.so.12 (oneTBB 2021 interface).
enum entry : unsigned {
  allocate_in_pool,
  allocate_in_pool_for,
  deallocate_to_pool_for,
  initialize_arena,
  initialize_context,
  execution_slot_of,
  notify_waiters_at,
  allocate_memory_of,
  cache_line_size_of,
  max_concurrency_of,
  throw_exception_of,
  execute_and_wait_for,
  set_end_of_input_of,
  deallocate_memory_of,
  parallel_pipeline_of,
  cache_aligned_allocate_of,
  cache_aligned_deallocate_of,
  numa_default_concurrency_of,
  is_group_execution_cancelled_of,
  wait_for_context,
  reset_context,
  spawn_task,
  attach_arena,
  create_control,
  submit_task,
  destroy_control,
  destroy_context,
  execute_in_arena,
  terminate_arena,
  assertion_failure_at,
  observe_of,
  entry_count
};

constexpr char const* entry_names[entry_count] = {
    "_ZN3tbb6detail2r18allocateERPNS0_2d117small_object_poolEm",
    "_ZN3tbb6detail2r18allocateERPNS0_2d117small_object_poolEmRKNS2_"
    "14execution_dataE",
    "_ZN3tbb6detail2r110deallocateERNS0_2d117small_object_poolEPvmRKNS2_"
    "14execution_dataE",
    "_ZN3tbb6detail2r110initializeERNS0_2d115task_arena_baseE",
    "_ZN3tbb6detail2r110initializeERNS0_2d118task_group_contextE",
    "_ZN3tbb6detail2r114execution_slotEPKNS0_2d114execution_dataE",
    "_ZN3tbb6detail2r114notify_waitersEm",
    "_ZN3tbb6detail2r115allocate_memoryEm",
    "_ZN3tbb6detail2r115cache_line_sizeEv",
    "_ZN3tbb6detail2r115max_concurrencyEPKNS0_2d115task_arena_baseE",
    "_ZN3tbb6detail2r115throw_exceptionENS0_2d012exception_idE",
    "_ZN3tbb6detail2r116execute_and_waitERNS0_2d14taskERNS2_18task_group_"
    "contextERNS2_12wait_contextES6_",
    "_ZN3tbb6detail2r116set_end_of_inputERNS0_2d111base_filterE",
    "_ZN3tbb6detail2r117deallocate_memoryEPv",
    "_ZN3tbb6detail2r117parallel_pipelineERNS0_2d118task_group_contextEmRKNS2_"
    "11filter_nodeE",
    "_ZN3tbb6detail2r122cache_aligned_allocateEm",
    "_ZN3tbb6detail2r124cache_aligned_deallocateEPv",
    "_ZN3tbb6detail2r124numa_default_concurrencyEi",
    "_ZN3tbb6detail2r128is_group_execution_cancelledERNS0_2d118task_group_"
    "contextE",
    "_ZN3tbb6detail2r14waitERNS0_2d112wait_contextERNS2_18task_group_contextE",
    "_ZN3tbb6detail2r15resetERNS0_2d118task_group_contextE",
    "_ZN3tbb6detail2r15spawnERNS0_2d14taskERNS2_18task_group_contextE",
    "_ZN3tbb6detail2r16attachERNS0_2d115task_arena_baseE",
    "_ZN3tbb6detail2r16createERNS0_2d114global_controlE",
    "_ZN3tbb6detail2r16submitERNS0_2d14taskERNS2_18task_group_contextEPNS1_"
    "5arenaEm",
    "_ZN3tbb6detail2r17destroyERNS0_2d114global_controlE",
    "_ZN3tbb6detail2r17destroyERNS0_2d118task_group_contextE",
    "_ZN3tbb6detail2r17executeERNS0_2d115task_arena_baseERNS2_13delegate_"
    "baseE",
    "_ZN3tbb6detail2r19terminateERNS0_2d115task_arena_baseE",
    "_ZN3tbb6detail2r117assertion_failureEPKciS3_S3_",
    "_ZN3tbb6detail2r17observeERNS0_2d123task_scheduler_observerEb",
};
static_assert(entry_names[entry_count - 1] != nullptr, "a name per entry");

[[noreturn]] void cannot_load(char const* what) {
  char const* const why = dlerror();
  std::fputs("brevis: cannot use oneTBB (", stderr);
  std::fputs(what, stderr);
  std::fputs("): ", stderr);
  std::fputs(why != nullptr ? why : "unknown error", stderr);
  std::fputs("\n", stderr);
  std::abort();
}

struct library {
  void* entries[entry_count] = {};

  library() {
    // By soname first, as the dynamic linker would find it (LD_LIBRARY_PATH
    // included); then where the build found it. Bound lazily: binding the
    // ~1,000 PLT slots of libtbb's libstdc++.so up front cost 1.1 M
    // instructions, half again what loading it costs otherwise.
    void* handle = dlopen(BREVIS_TBB_SONAME, RTLD_LAZY | RTLD_LOCAL);
    if (handle == nullptr) {
      handle = dlopen(BREVIS_TBB_PATH, RTLD_LAZY | RTLD_LOCAL);
    }
    if (handle == nullptr) cannot_load(BREVIS_TBB_PATH);
    for (unsigned i = 0; i < entry_count; ++i) {
      entries[i] = dlsym(handle, entry_names[i]);
      if (entries[i] == nullptr) cannot_load(entry_names[i]);
    }
  }
};

library const& loaded() {
  // Loaded by the first caller: a function-local static is thread-safe,
  // and oneTBB's own threads exist only after it.
  static library const tbb;
  return tbb;
}

// The entry point `e`, as a function of type F.
template <typename F>
F* resolve(entry e) {
  return reinterpret_cast<F*>(loaded().entries[e]);
}

}  // namespace

void* __TBB_EXPORTED_FUNC allocate(d1::small_object_pool*& pool,
                                   std::size_t bytes) {
  return resolve<void*(d1::small_object_pool*&, std::size_t)>(allocate_in_pool)(
      pool, bytes);
}

void* __TBB_EXPORTED_FUNC allocate(d1::small_object_pool*& pool,
                                   std::size_t bytes,
                                   d1::execution_data const& ed) {
  return resolve<void*(d1::small_object_pool*&, std::size_t,
                       d1::execution_data const&)>(allocate_in_pool_for)(
      pool, bytes, ed);
}

void __TBB_EXPORTED_FUNC deallocate(d1::small_object_pool& pool, void* ptr,
                                    std::size_t bytes,
                                    d1::execution_data const& ed) {
  resolve<void(d1::small_object_pool&, void*, std::size_t,
               d1::execution_data const&)>(deallocate_to_pool_for)(pool, ptr,
                                                                   bytes, ed);
}

void __TBB_EXPORTED_FUNC initialize(d1::task_arena_base& arena) {
  resolve<void(d1::task_arena_base&)>(initialize_arena)(arena);
}

void __TBB_EXPORTED_FUNC initialize(d1::task_group_context& ctx) {
  resolve<void(d1::task_group_context&)>(initialize_context)(ctx);
}

d1::slot_id __TBB_EXPORTED_FUNC execution_slot(d1::execution_data const* ed) {
  return resolve<d1::slot_id(d1::execution_data const*)>(execution_slot_of)(ed);
}

void __TBB_EXPORTED_FUNC notify_waiters(std::uintptr_t wait_ctx_addr) {
  resolve<void(std::uintptr_t)>(notify_waiters_at)(wait_ctx_addr);
}

void* __TBB_EXPORTED_FUNC allocate_memory(std::size_t size) {
  return resolve<void*(std::size_t)>(allocate_memory_of)(size);
}

std::size_t __TBB_EXPORTED_FUNC cache_line_size() {
  return resolve<std::size_t()>(cache_line_size_of)();
}

int __TBB_EXPORTED_FUNC max_concurrency(d1::task_arena_base const* arena) {
  return resolve<int(d1::task_arena_base const*)>(max_concurrency_of)(arena);
}

void __TBB_EXPORTED_FUNC throw_exception(exception_id id) {
  resolve<void(exception_id)>(throw_exception_of)(id);
}

void __TBB_EXPORTED_FUNC execute_and_wait(d1::task& t,
                                          d1::task_group_context& t_ctx,
                                          d1::wait_context& wait,
                                          d1::task_group_context& w_ctx) {
  resolve<void(d1::task&, d1::task_group_context&, d1::wait_context&,
               d1::task_group_context&)>(execute_and_wait_for)(t, t_ctx, wait,
                                                               w_ctx);
}

void __TBB_EXPORTED_FUNC set_end_of_input(d1::base_filter& filter) {
  resolve<void(d1::base_filter&)>(set_end_of_input_of)(filter);
}

void __TBB_EXPORTED_FUNC deallocate_memory(void* p) {
  resolve<void(void*)>(deallocate_memory_of)(p);
}

void __TBB_EXPORTED_FUNC parallel_pipeline(d1::task_group_context& ctx,
                                           std::size_t tokens,
                                           d1::filter_node const& filters) {
  resolve<void(d1::task_group_context&, std::size_t, d1::filter_node const&)>(
      parallel_pipeline_of)(ctx, tokens, filters);
}

void* __TBB_EXPORTED_FUNC cache_aligned_allocate(std::size_t size) {
  return resolve<void*(std::size_t)>(cache_aligned_allocate_of)(size);
}

void __TBB_EXPORTED_FUNC cache_aligned_deallocate(void* p) {
  resolve<void(void*)>(cache_aligned_deallocate_of)(p);
}

int __TBB_EXPORTED_FUNC numa_default_concurrency(int numa_id) {
  return resolve<int(int)>(numa_default_concurrency_of)(numa_id);
}

bool __TBB_EXPORTED_FUNC
is_group_execution_cancelled(d1::task_group_context& ctx) {
  return resolve<bool(d1::task_group_context&)>(
      is_group_execution_cancelled_of)(ctx);
}

void __TBB_EXPORTED_FUNC wait(d1::wait_context& wait,
                              d1::task_group_context& ctx) {
  resolve<void(d1::wait_context&, d1::task_group_context&)>(wait_for_context)(
      wait, ctx);
}

void __TBB_EXPORTED_FUNC reset(d1::task_group_context& ctx) {
  resolve<void(d1::task_group_context&)>(reset_context)(ctx);
}

void __TBB_EXPORTED_FUNC spawn(d1::task& t, d1::task_group_context& ctx) {
  resolve<void(d1::task&, d1::task_group_context&)>(spawn_task)(t, ctx);
}

bool __TBB_EXPORTED_FUNC attach(d1::task_arena_base& arena) {
  return resolve<bool(d1::task_arena_base&)>(attach_arena)(arena);
}

void __TBB_EXPORTED_FUNC create(d1::global_control& control) {
  resolve<void(d1::global_control&)>(create_control)(control);
}

void __TBB_EXPORTED_FUNC submit(d1::task& t, d1::task_group_context& ctx,
                                arena* a, std::uintptr_t as_critical) {
  resolve<void(d1::task&, d1::task_group_context&, arena*, std::uintptr_t)>(
      submit_task)(t, ctx, a, as_critical);
}

void __TBB_EXPORTED_FUNC destroy(d1::global_control& control) {
  resolve<void(d1::global_control&)>(destroy_control)(control);
}

void __TBB_EXPORTED_FUNC destroy(d1::task_group_context& ctx) {
  resolve<void(d1::task_group_context&)>(destroy_context)(ctx);
}

void __TBB_EXPORTED_FUNC execute(d1::task_arena_base& arena,
                                 d1::delegate_base& body) {
  resolve<void(d1::task_arena_base&, d1::delegate_base&)>(execute_in_arena)(
      arena, body);
}

void __TBB_EXPORTED_FUNC terminate(d1::task_arena_base& arena) {
  resolve<void(d1::task_arena_base&)>(terminate_arena)(arena);
}

void __TBB_EXPORTED_FUNC assertion_failure(char const* location, int line,
                                           char const* expression,
                                           char const* comment) {
  resolve<void(char const*, int, char const*, char const*)>(
      assertion_failure_at)(location, line, expression, comment);
}

void __TBB_EXPORTED_FUNC observe(d1::task_scheduler_observer& observer,
                                 bool state) {
  resolve<void(d1::task_scheduler_observer&, bool)>(observe_of)(observer,
                                                                state);
}

}  // namespace tbb::detail::r1
