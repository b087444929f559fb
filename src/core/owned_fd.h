// A file descriptor closed on every way out, unless released: the one guard of a raw descriptor.
//
// Example:
//   const core::OwnedFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
//   if (file.fd < 0) return Error(...);
//   ::pread(file.fd, ...);
#pragma once

#include <unistd.h>

#include <utility>

namespace mmfeed::core {

struct OwnedFd {
  explicit OwnedFd(int f) : fd(f) {}
  ~OwnedFd() {
    if (fd >= 0) ::close(fd);
  }
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  int release() { return std::exchange(fd, -1); }
  int fd;
};

}  // namespace mmfeed::core
