#include "fs/pipeline/mapping_guard.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <mutex>

namespace brevis::fs {
namespace {

static_assert(sizeof(void*) == 8, "SYS_mmap's arguments as on 64-bit Linux");

// One guarded mapping. `version` is odd while the slot changes (a seqlock):
// a handler takes base and size only from an even version it reads before
// and after them, so it never pairs one guard's base with another's size.
struct slot {
  std::atomic<uint32_t> version{0};
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> size{0};  // rounded up to whole pages
  std::atomic<bool> faulted{false};
  std::atomic<bool> taken{false};
};

// Globals: a signal handler reaches nothing else.
// NOLINTBEGIN(cppcoreguidelines-avoid-non-const-global-variables)
std::array<slot, mapping_guard::slots> g_slots;
struct sigaction g_previous {};
uintptr_t g_page = 4096;
std::once_flag g_installed;
// NOLINTEND(cppcoreguidelines-avoid-non-const-global-variables)

// Whether the access that raised the signal runs again when the handler
// returns: a fault on an access, not a signal sent by kill() (si_code <= 0)
// nor a memory error reported ahead of any access (BUS_MCEERR_AO).
bool repeats(siginfo_t const* info) {
  return info != nullptr && info->si_code > 0 && info->si_code != BUS_MCEERR_AO;
}

void forward(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0) {
    g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler == SIG_IGN) {
    // Ignored as before; a fault on an access cannot be ignored, and ends
    // the process when it repeats.
    if (repeats(info)) ::signal(sig, SIG_DFL);
  } else if (g_previous.sa_handler != SIG_DFL) {
    g_previous.sa_handler(sig);
  } else {
    // The default action, as without us: a faulting access repeats and ends
    // the process; any other SIGBUS is raised again.
    ::signal(sig, SIG_DFL);
    if (!repeats(info)) ::raise(sig);
  }
}

// Only async-signal-safe calls: atomics, a raw mmap system call, and those
// forward() makes. errno is kept for the interrupted code.
extern "C" void on_sigbus(int sig, siginfo_t* info, void* context) {
  int const saved_errno = errno;
  // Faults only: a SIGBUS sent by kill() has no faulting address.
  if (info != nullptr && info->si_code > 0) {
    auto const at = reinterpret_cast<uintptr_t>(info->si_addr);
    for (slot& s : g_slots) {
      uint32_t const v = s.version.load(std::memory_order_acquire);
      uintptr_t const base = s.base.load(std::memory_order_relaxed);
      size_t const size = s.size.load(std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_acquire);
      if (v % 2 != 0 || s.version.load(std::memory_order_relaxed) != v) {
        continue;  // changing: its own mapping is not being read
      }
      if (base == 0 || at < base || at - base >= size) continue;
      uintptr_t const page = at & ~(g_page - 1);
      // Zero pages over the rest of the mapping: each later touch would
      // fault again otherwise, one page at a time. The system call itself:
      // mmap() is not on POSIX's list of async-signal-safe functions.
      long const length = static_cast<long>(base + size - page);
      long const flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
      // NOLINTBEGIN(cppcoreguidelines-pro-type-vararg)
      long const r =
          ::syscall(SYS_mmap, page, length, long{PROT_READ}, flags, -1L, 0L);
      // NOLINTEND(cppcoreguidelines-pro-type-vararg)
      if (r != -1) {
        s.faulted.store(true, std::memory_order_release);
        errno = saved_errno;
        return;
      }
      break;
    }
  }
  forward(sig, info, context);
  errno = saved_errno;
}

void install() {
  g_page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  struct sigaction sa {};
  sa.sa_sigaction = on_sigbus;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGBUS, &sa, &g_previous);
}

}  // namespace

mapping_guard::mapping_guard(void const* base, size_t size) noexcept {
  if (base == nullptr || size == 0) return;
  std::call_once(g_installed, install);
  auto const at = reinterpret_cast<uintptr_t>(base);
  if (at % g_page != 0) return;  // not a mapping's start: left unguarded
  // The mapping covers whole pages, and a touch of its last page past
  // `size` faults too once the page is lost.
  size_t const pages = (size + g_page - 1) / g_page * g_page;
  for (int i = 0; i < slots; ++i) {
    slot& s = g_slots[static_cast<size_t>(i)];
    if (s.taken.exchange(true, std::memory_order_acquire)) continue;
    s.version.fetch_add(1, std::memory_order_acq_rel);  // odd: changing
    s.faulted.store(false, std::memory_order_relaxed);
    s.size.store(pages, std::memory_order_relaxed);
    s.base.store(at, std::memory_order_relaxed);
    s.version.fetch_add(1, std::memory_order_release);  // even: settled
    slot_ = i;
    return;
  }
}

mapping_guard::~mapping_guard() {
  if (slot_ < 0) return;
  slot& s = g_slots[static_cast<size_t>(slot_)];
  s.version.fetch_add(1, std::memory_order_acq_rel);
  s.base.store(0, std::memory_order_relaxed);
  s.version.fetch_add(1, std::memory_order_release);
  s.taken.store(false, std::memory_order_release);
}

bool mapping_guard::faulted() const noexcept {
  return slot_ >= 0 && g_slots[static_cast<size_t>(slot_)].faulted.load(
                           std::memory_order_acquire);
}

}  // namespace brevis::fs
