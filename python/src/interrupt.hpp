#pragma once
// Ctrl-C during a call that waits without the GIL. Python's SIGINT handler
// only sets a flag that the interpreter reads when it runs bytecode again, so
// a rank blocked in a collective would hear Ctrl-C only when the operation
// timed out. A handler of this module runs in front of Python's: while calls
// are watched it wakes a thread of this module, which aborts the
// communicators of every call in progress (vigilCommAbort: the blocked
// operations return at once and the peers are told which rank aborted); each
// call then raises what Python's handler raises, KeyboardInterrupt, with
// vigil's text as a note. Per call this costs two short critical sections
// and one sigaction(2) query (Python may have put its own handler back).

#include <pybind11/pybind11.h>

#include <atomic>
#include <string>
#include <vector>

#include "errors.hpp"
#include "vigil/vigil.h"

namespace vigil::python {

// What vigil said when a watched call returned `rc` (the calling thread's
// last error for `comm`).
CallError interruptedCallError(vigilResult_t rc, vigilComm_t comm);

// What the peers of an interrupted call hear: "rank 0 aborted the
// communicator (KeyboardInterrupt: SIGINT in Python)".
inline constexpr const char* kInterruptedReason = "KeyboardInterrupt: SIGINT in Python";

class InterruptibleCall {
 public:
  // With the GIL held, just before it is released for the call: runs the
  // signal handlers Python has pending (raising what they raise, before the
  // call started) unless `runPendingHandlers` is false, then watches for
  // SIGINT until this object ends.
  explicit InterruptibleCall(std::vector<vigilComm_t> comms, bool runPendingHandlers = true);
  ~InterruptibleCall();  // with the GIL held
  InterruptibleCall(const InterruptibleCall&) = delete;
  InterruptibleCall& operator=(const InterruptibleCall&) = delete;

  // True once a SIGINT aborted the call's communicators; the abort is
  // complete when this returns true.
  bool interrupted() const;
  // With the GIL held, after the call failed with `failure`
  // (interruptedCallError) and interrupted() said true: raises Python's
  // exception for the signal (KeyboardInterrupt) with vigil's text as a note,
  // or vigil's error itself when no handler raised (a handler of the user's,
  // or a thread other than the main one).
  [[noreturn]] void raiseInterrupted(const Where& where, const CallError& failure);

 private:
  friend class InterruptWatcher;
  std::vector<vigilComm_t> comms_;
  std::atomic<bool> interrupted_ = false;  // set by the watcher under its mutex
};

}  // namespace vigil::python
