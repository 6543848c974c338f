#pragma once
// Error lines and the per-file loop shared by the subcommands.

#include <functional>
#include <string>
#include <vector>

namespace brevis::cli {

/// Prints `brevis: FILE: message` on stderr (FILE "-" shows as "stdin").
void report_error(std::string const& file, std::string const& message);

/// Runs `fn` for each input, turning exceptions into error lines. Returns 0
/// if every call succeeded, 1 otherwise.
int for_each_input(std::vector<std::string> const& inputs,
                   std::function<void(std::string const&)> const& fn);

}  // namespace brevis::cli
