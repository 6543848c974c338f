#include "fs/fuse/readahead.h"

#include <fstream>
#include <sstream>
#include <vector>

namespace brevis::fs {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] >= '0' &&
        s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
        s[i + 3] >= '0' && s[i + 3] <= '7') {
      out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
                               (s[i + 3] - '0'));
      i += 3;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::optional<size_t> read_number(std::string const& path) {
  std::ifstream in(path);
  size_t v = 0;
  if (!(in >> v)) return std::nullopt;
  return v;
}

}  // namespace

std::optional<std::string> mount_device(std::string_view mountinfo,
                                        std::string_view mountpoint) {
  std::optional<std::string> found;
  while (!mountinfo.empty()) {
    size_t const eol = mountinfo.find('\n');
    std::string_view line = mountinfo.substr(0, eol);
    mountinfo = eol == std::string_view::npos ? std::string_view()
                                              : mountinfo.substr(eol + 1);
    // ID PARENT MAJ:MIN ROOT MOUNTPOINT ...
    std::vector<std::string_view> f;
    while (f.size() < 5 && !line.empty()) {
      size_t const sp = line.find(' ');
      f.push_back(line.substr(0, sp));
      line = sp == std::string_view::npos ? std::string_view()
                                          : line.substr(sp + 1);
    }
    if (f.size() == 5 && unescape(f[4]) == mountpoint) {
      found = std::string(f[2]);
    }
  }
  return found;
}

bool raise_mount_readahead(std::string const& mountpoint, size_t bytes) {
  std::ifstream in("/proc/self/mountinfo");
  std::stringstream text;
  text << in.rdbuf();
  std::optional<std::string> const dev = mount_device(text.str(), mountpoint);
  if (!dev) return false;
  std::string const path = "/sys/class/bdi/" + *dev + "/read_ahead_kb";
  size_t const want_kb = (bytes + 1023) / 1024;
  if (auto now = read_number(path); now && *now >= want_kb) return true;
  {
    std::ofstream out(path);
    out << want_kb << '\n';
  }
  auto const now = read_number(path);
  return now && *now >= want_kb;
}

}  // namespace brevis::fs
