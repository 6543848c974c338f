#include "fs/pipeline/mapping_guard.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <csignal>
#include <cstdint>
#include <mutex>

namespace brevis::fs {
namespace {

// One guarded mapping. `base` is written last when a slot is taken and
// cleared first when it is given back, so a handler that sees a base sees
// its size.
struct slot {
  std::atomic<uintptr_t> base{0};
  std::atomic<size_t> size{0};
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

void forward(int sig, siginfo_t* info, void* context) {
  if ((g_previous.sa_flags & SA_SIGINFO) != 0) {
    g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL &&
             g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    // The default action, as without us: a faulting access repeats and ends
    // the process; a signal sent by kill() is raised again.
    ::signal(sig, SIG_DFL);
    if (info == nullptr || info->si_code <= 0) ::raise(sig);
  }
}

// Only async-signal-safe calls: atomics and a raw mmap system call.
extern "C" void on_sigbus(int sig, siginfo_t* info, void* context) {
  // Kernel-raised faults only (si_code > 0): a SIGBUS sent by kill() has no
  // faulting address.
  if (info != nullptr && info->si_code > 0) {
    auto const at = reinterpret_cast<uintptr_t>(info->si_addr);
    for (slot& s : g_slots) {
      uintptr_t const base = s.base.load(std::memory_order_acquire);
      size_t const size = s.size.load(std::memory_order_relaxed);
      if (base == 0 || at < base || at - base >= size) continue;
      uintptr_t const page = at & ~(g_page - 1);
      // Zero pages over the rest of the mapping: each later touch would
      // fault again otherwise, one page at a time. The system call itself:
      // mmap() is not on POSIX's list of async-signal-safe functions.
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg)
      long const r = ::syscall(SYS_mmap, page, base + size - page, PROT_READ,
                               MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (r != -1) {
        s.faulted.store(true, std::memory_order_release);
        return;
      }
      break;
    }
  }
  forward(sig, info, context);
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
  for (int i = 0; i < slots; ++i) {
    slot& s = g_slots[static_cast<size_t>(i)];
    if (s.taken.exchange(true, std::memory_order_acquire)) continue;
    s.faulted.store(false, std::memory_order_relaxed);
    s.size.store(size, std::memory_order_relaxed);
    s.base.store(reinterpret_cast<uintptr_t>(base), std::memory_order_release);
    slot_ = i;
    return;
  }
}

mapping_guard::~mapping_guard() {
  if (slot_ < 0) return;
  slot& s = g_slots[static_cast<size_t>(slot_)];
  s.base.store(0, std::memory_order_release);
  s.taken.store(false, std::memory_order_release);
}

bool mapping_guard::faulted() const noexcept {
  return slot_ >= 0 && g_slots[static_cast<size_t>(slot_)].faulted.load(
                           std::memory_order_acquire);
}

}  // namespace brevis::fs
