#pragma once
// The operation a communicator is running: made afresh for each collective,
// send/recv batch and finalize (Communicator::beginOp), so nothing carries
// over from the one before. Fault reports read it to name the op.

#include <string>

#include "core/deadline.hpp"
#include "transport/frame.hpp"

namespace vigil {

struct OpState {
  FrameHeader header{};  // its fingerprint (zero for finalize)
  std::string label;     // "allreduce", "group of 3 send/recv", "finalize"
  Clock::time_point start{};
  Deadline deadline = Deadline::never();  // start + the op timeout
  Deadline stallAt = Deadline::never();   // then ask the left neighbour what it runs
  bool watchPeers = false;                // a collective: any peer's change matters, not only its sockets
  bool heardFromLeft = false;             // a data message from the left neighbour matched this op
  bool heardByRight = false;              // the right neighbour compares this op's fingerprint with its own
  bool shmChecked = false;                // the op's first load/store sync compared the fingerprints
  bool stallQueried = false;              // the left neighbour's fingerprint was asked for

  bool collective() const { return header.kind == static_cast<uint8_t>(FrameKind::Collective); }
  // Its collective sequence number; -1 for point-to-point and finalize.
  int64_t collectiveSeq() const { return collective() ? static_cast<int64_t>(header.seq) : -1; }
};

}  // namespace vigil
