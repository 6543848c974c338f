#include "src/progress.h"

#include <unistd.h>

#include <cstdio>

namespace brevis::cli {

progress::progress(std::string label, uint64_t total, bool quiet)
    : label_(std::move(label)),
      total_(total),
      enabled_(!quiet && total > progress_threshold && ::isatty(2) == 1) {}

progress::~progress() { finish(); }

void progress::update(uint64_t done) {
  if (!enabled_) return;
  auto now = clock::now();
  // Nothing for the first quarter second (short jobs, meaningless rates),
  // then at most ten redraws a second.
  if (now - start_ < std::chrono::milliseconds(250)) return;
  if (drawn_ && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  double secs = std::chrono::duration<double>(now - start_).count();
  double pct = total_ ? 100.0 * static_cast<double>(done) / total_ : 100.0;
  double mbps = secs > 0 ? static_cast<double>(done) / 1e6 / secs : 0.0;
  std::fprintf(stderr, "\r\033[K%s  %3.0f%%  %.1f MB/s", label_.c_str(), pct,
               mbps);
  std::fflush(stderr);
}

void progress::finish() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  std::fflush(stderr);
  drawn_ = false;
}

std::string human_size(uint64_t bytes) {
  static char const* const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 4) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%llu B",
                  static_cast<unsigned long long>(bytes));
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

}  // namespace brevis::cli
