#pragma once
// Reading what sendMessage and a connecting peer send, from a non-blocking
// socket across poll wake-ups: a fixed-size preamble, then length-prefixed
// messages (u32 length, then the bytes). Each read() takes what the socket
// has and returns; nothing here waits.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "net/wire.hpp"

namespace vigil {

enum class ReadStatus {
  NeedMore,  // the socket has no more bytes for now: poll again
  Complete,  // the preamble or message is whole
  Closed,    // the peer closed the connection before it was whole
  Failed,    // recv() failed: error() holds errno
  TooLarge,  // the announced length is above the limit: nothing was allocated
};

// The connection preamble, sizeof(Preamble) bytes exactly: nothing after it
// is consumed, so the connection goes on with its own protocol.
class PreambleReader {
 public:
  ReadStatus read(int fd);
  const Preamble& preamble() const { return preamble_; }
  int error() const { return error_; }

 private:
  Preamble preamble_{};
  size_t have_ = 0;
  int error_ = 0;
};

// One length-prefixed message after another. After Complete, payload() holds
// the message until the next read(), which starts the next message.
class FramedReader {
 public:
  explicit FramedReader(size_t maxBytes) : maxBytes_(maxBytes) {}
  ReadStatus read(int fd);
  const std::vector<uint8_t>& payload() const { return payload_; }
  uint32_t length() const { return length_; }  // as announced (TooLarge names it)
  int error() const { return error_; }

 private:
  size_t maxBytes_;
  uint32_t length_ = 0;
  size_t have_ = 0;  // bytes of the current stage
  bool inPayload_ = false;
  bool complete_ = false;
  std::vector<uint8_t> payload_;
  int error_ = 0;
};

}  // namespace vigil
