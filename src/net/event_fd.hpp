#pragma once
// An eventfd used to wake threads blocked in poll(): abort, shutdown, peer
// state changes. Level-triggered: once signalled it stays readable until
// cleared, so a wake-up can never be lost between a check and a poll.

#include <sys/eventfd.h>

#include <cstdint>

#include "net/fd.hpp"

namespace vigil {

class EventFd {
 public:
  EventFd();  // throws Error(VG-COMM-004) when the fd cannot be created
  void signal() const {
    uint64_t one = 1;
    ssize_t ignored = ::write(fd_.get(), &one, sizeof one);
    (void)ignored;  // EAGAIN means the counter is already non-zero: still signalled
  }
  void clear() const {
    uint64_t value;
    ssize_t ignored = ::read(fd_.get(), &value, sizeof value);
    (void)ignored;
  }
  int fd() const { return fd_.get(); }

 private:
  Fd fd_;
};

}  // namespace vigil
