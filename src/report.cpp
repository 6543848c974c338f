#include "src/report.h"

#include <cstdio>
#include <exception>
#include <new>

namespace brevis::cli {

void report_error(std::string const& file, std::string const& message) {
  std::string name = file == "-" ? "stdin" : file;
  std::string line = "brevis: " + name + ": " + message;
  // One line, whatever the message holds.
  for (char& c : line) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  std::fflush(stdout);
  std::fprintf(stderr, "%s\n", line.c_str());
}

int for_each_input(std::vector<std::string> const& inputs,
                   std::function<void(std::string const&)> const& fn) {
  int status = 0;
  for (std::string const& in : inputs) {
    try {
      fn(in);
    } catch (std::bad_alloc const&) {
      report_error(in, "out of memory");
      status = 1;
    } catch (std::exception const& e) {
      report_error(in, e.what());
      status = 1;
    }
  }
  return status;
}

}  // namespace brevis::cli
