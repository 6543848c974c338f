#pragma once
// Where the mount says what it did: one line per compressed file, and every
// error with what happened and why. The target is stderr (the default),
// syslog (facility daemon, ident "brevis"), or a file opened for append.
// Thread-safe; lines are written whole.

#include <string>
#include <string_view>

namespace brevis::fs {

enum class log_level { info, error };

/// "stderr", "syslog" or a file path. Throws std::system_error when the
/// file cannot be opened.
void open_event_log(std::string const& target);
void log_event(log_level level, std::string_view line);

}  // namespace brevis::fs
