#include "net/framed_reader.hpp"

#include <sys/socket.h>

#include <cerrno>

namespace vigil {
namespace {

// Fills data[have, size) from fd as far as the socket allows.
ReadStatus fill(int fd, void* data, size_t size, size_t& have, int& error) {
  while (have < size) {
    ssize_t n = ::recv(fd, static_cast<uint8_t*>(data) + have, size - have, 0);
    if (n > 0) {
      have += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return ReadStatus::Closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return ReadStatus::NeedMore;
    error = errno;
    return ReadStatus::Failed;
  }
  return ReadStatus::Complete;
}

}  // namespace

ReadStatus PreambleReader::read(int fd) {
  return fill(fd, &preamble_, sizeof preamble_, have_, error_);
}

ReadStatus FramedReader::read(int fd) {
  if (complete_) {
    complete_ = inPayload_ = false;
    have_ = 0;
    payload_.clear();
  }
  if (!inPayload_) {
    ReadStatus st = fill(fd, &length_, sizeof length_, have_, error_);
    if (st != ReadStatus::Complete) return st;
    if (length_ > maxBytes_) return ReadStatus::TooLarge;
    payload_.resize(length_);
    have_ = 0;
    inPayload_ = true;
  }
  ReadStatus st = fill(fd, payload_.data(), payload_.size(), have_, error_);
  complete_ = st == ReadStatus::Complete;
  return st;
}

}  // namespace vigil
