#include "fs/store/error.h"

#include <cerrno>
#include <cstring>

namespace brevis::fs {

char const* to_string(store_errc e) noexcept {
  switch (e) {
    case store_errc::not_found:
      return "not found";
    case store_errc::exists:
      return "exists";
    case store_errc::corrupt:
      return "corrupt";
    case store_errc::no_space:
      return "no space";
    case store_errc::io:
      return "i/o error";
    case store_errc::invalid:
      return "invalid argument";
    case store_errc::bad_store:
      return "bad store";
    case store_errc::is_dir:
      return "is a directory";
    case store_errc::not_dir:
      return "not a directory";
    case store_errc::not_empty:
      return "directory not empty";
    case store_errc::cancelled:
      return "cancelled";
    case store_errc::no_attr:
      return "no such attribute";
    case store_errc::too_new:
      return "needs a newer brevis";
  }
  return "unknown";
}

int store_error::errno_value() const noexcept {
  switch (code_) {
    case store_errc::not_found:
      return ENOENT;
    case store_errc::exists:
      return EEXIST;
    case store_errc::no_space:
      return ENOSPC;
    case store_errc::invalid:
      return EINVAL;
    case store_errc::is_dir:
      return EISDIR;
    case store_errc::not_dir:
      return ENOTDIR;
    case store_errc::not_empty:
      return ENOTEMPTY;
    case store_errc::cancelled:
      return ECANCELED;
    case store_errc::no_attr:
      return ENODATA;
    case store_errc::corrupt:
    case store_errc::too_new:
    case store_errc::io:
    case store_errc::bad_store:
      return EIO;
  }
  return EIO;
}

void store_fail(store_errc code, std::string const& message) {
  throw store_error(code, message);
}

void store_fail_errno(int err, std::string const& what) {
  bool const full = err == ENOSPC || err == EDQUOT || err == EFBIG;
  store_fail(full ? store_errc::no_space : store_errc::io,
             what + ": " + std::strerror(err));
}

}  // namespace brevis::fs
