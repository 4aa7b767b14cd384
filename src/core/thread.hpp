#pragma once
// Threads that vigil starts inside the application's process.

#include <signal.h>

#include <thread>
#include <utility>

namespace vigil {

// Blocks the process-directed asynchronous signals (SIGINT, SIGTERM, SIGCHLD, SIGUSR1, ...)
// in the calling thread for its lifetime and restores the previous mask. A thread created
// meanwhile inherits the blocked mask.
class AsyncSignalsBlocked {
 public:
  AsyncSignalsBlocked();
  ~AsyncSignalsBlocked();
  AsyncSignalsBlocked(const AsyncSignalsBlocked&) = delete;
  AsyncSignalsBlocked& operator=(const AsyncSignalsBlocked&) = delete;

 private:
  sigset_t old_;
};

// Every thread of the library starts here. The kernel hands a process-directed signal to any
// thread that does not block it; ours block them all, so the application's handlers (Ctrl-C
// in Python, a launcher's SIGCHLD and SIGTERM, our SIGUSR1 dump handler) run on the
// application's threads, never on one of ours asleep in poll() for minutes. Faults
// (SIGSEGV, SIGBUS, ...) stay unblocked.
template <class F>
std::thread startLibraryThread(F&& body) {
  AsyncSignalsBlocked blocked;
  return std::thread(std::forward<F>(body));
}

}  // namespace vigil
