#include "fs/pipeline/event_log.h"

#include <fcntl.h>
#include <syslog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <system_error>

namespace brevis::fs {

namespace {

struct sink {
  std::mutex mu;
  enum { to_stderr, to_syslog, to_file } kind = to_stderr;
  int fd = -1;
};

sink& the_sink() {
  static sink s;
  return s;
}

std::string timestamp() {
  auto const now = std::chrono::system_clock::now();
  std::time_t const t = std::chrono::system_clock::to_time_t(now);
  std::tm tm{};
  ::localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

}  // namespace

void open_event_log(std::string const& target) {
  sink& s = the_sink();
  std::lock_guard lk(s.mu);
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
  if (target.empty() || target == "stderr" || target == "-") {
    s.kind = sink::to_stderr;
  } else if (target == "syslog") {
    ::openlog("brevis", LOG_PID, LOG_DAEMON);
    s.kind = sink::to_syslog;
  } else {
    int const fd =
        ::open(target.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) {
      throw std::system_error(errno, std::generic_category(),
                              "open the log " + target);
    }
    s.fd = fd;
    s.kind = sink::to_file;
  }
}

void log_event(log_level level, std::string_view line) {
  sink& s = the_sink();
  std::lock_guard lk(s.mu);
  if (s.kind == sink::to_syslog) {
    ::syslog(level == log_level::error ? LOG_ERR : LOG_INFO, "%.*s",
             static_cast<int>(line.size()), line.data());
    return;
  }
  std::string text = timestamp() + " brevis mount: ";
  if (level == log_level::error) text += "error: ";
  text.append(line);
  text += '\n';
  int const fd = s.kind == sink::to_file ? s.fd : STDERR_FILENO;
  for (size_t done = 0; done < text.size();) {
    ssize_t const w = ::write(fd, text.data() + done, text.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;  // nowhere left to say it
    done += static_cast<size_t>(w);
  }
}

}  // namespace brevis::fs
