#pragma once
// A non-blocking tagged send or receive (vigilIsendTag, vigilIrecvTag):
// posted by any thread, completed by whichever thread waits on or tests a
// request of its communicator (comm/requests.cpp).

#include <atomic>
#include <cstdint>

#include "algo/op_desc.hpp"

namespace vigil {

struct Request {
  explicit Request(const OpDesc& desc) : op(desc) { op.status = &status; }
  Request(const Request&) = delete;
  Request& operator=(const Request&) = delete;

  OpDesc op;  // a receive's status points at `status`
  vigilStatus status{};
  uint64_t recordId = 0;  // its flight-recorder entry
  std::atomic<bool> done{false};
};

}  // namespace vigil
