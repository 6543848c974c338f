#pragma once
// Errors of the store. Every failure the store reports is a
// brevis::fs::store_error carrying one of the codes below; errno_value()
// gives the errno the filesystem layer replies with.

#include <stdexcept>
#include <string>

namespace brevis::fs {

enum class store_errc : int {
  not_found = 1,   // no such name or inode                       (ENOENT)
  exists = 2,      // the name is taken                            (EEXIST)
  corrupt = 3,     // a payload or record failed its checksum      (EIO)
  no_space = 4,    // disk full, file size limit or LMDB map full  (ENOSPC)
  io = 5,          // a system call failed otherwise               (EIO)
  invalid = 6,     // bad argument (a name with '/', a directory)  (EINVAL)
  bad_store = 7,   // not a store directory, or a damaged index    (EIO)
  is_dir = 8,      // a file operation on a directory              (EISDIR)
  not_dir = 9,     // a directory operation on something else      (ENOTDIR)
  not_empty = 10,  // rmdir or rename over a non-empty directory   (ENOTEMPTY)
  cancelled = 11,  // the caller's cancel callback said stop       (ECANCELED)
  no_attr = 12,    // no such extended attribute                   (ENODATA)
  too_new = 13,    // a program intact but unknown: a newer brevis's (EIO)
};

char const* to_string(store_errc e) noexcept;

class store_error : public std::runtime_error {
 public:
  store_error(store_errc code, std::string const& message)
      : std::runtime_error(message), code_(code) {}
  store_errc code() const noexcept { return code_; }
  /// The errno a filesystem operation reports for this error.
  int errno_value() const noexcept;

 private:
  store_errc code_;
};

[[noreturn]] void store_fail(store_errc code, std::string const& message);
/// Throws for a failed system call: errno ENOSPC, EDQUOT and EFBIG become
/// store_errc::no_space, the rest store_errc::io; `what` names the call.
[[noreturn]] void store_fail_errno(int err, std::string const& what);

}  // namespace brevis::fs
