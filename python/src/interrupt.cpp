#include "interrupt.hpp"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <mutex>
#include <system_error>
#include <thread>

namespace py = pybind11;

namespace vigil::python {

// SIGINT's path to the calls in progress: a handler placed in front of
// Python's (it writes a byte to a pipe while calls are watched, then runs
// Python's, which sets the interpreter's flag as usual), and the thread that
// reads the pipe and aborts the calls' communicators. One per process.
//
// Python puts its own handler back whenever signal.signal(SIGINT, ...) runs,
// so the handler must be checked, but not on every call: sigaction(2) costs
// a system call. While calls come, the thread checks it every kCheckEvery;
// the first call after a quiet spell checks it itself and wakes the thread.
class InterruptWatcher {
 public:
  static InterruptWatcher& get() {
    // A process-lifetime thread, like the interpreter's own: never destroyed,
    // so nothing joins it at exit (a forked child starts its own).
    static InterruptWatcher* watcher = new InterruptWatcher();
    return *watcher;
  }

  void add(InterruptibleCall* call) {
    std::lock_guard lock(mutex_);
    if (!started_) start();
    if (!started_) return;  // no pipe or thread: Ctrl-C waits for the timeout, as before
    if (!checking_) {
      placeHandler();
      checking_ = true;
      wake(kResumeChecks);
    }
    callsSinceCheck_ = true;
    calls_.push_back(call);
    watched_.store(static_cast<int>(calls_.size()));
  }

  void remove(InterruptibleCall* call) {
    std::lock_guard lock(mutex_);
    auto at = std::find(calls_.begin(), calls_.end(), call);
    if (at == calls_.end()) return;
    calls_.erase(at);
    watched_.store(static_cast<int>(calls_.size()));
  }

 private:
  friend class InterruptibleCall;
  static constexpr unsigned char kResumeChecks = 0;
  static constexpr unsigned char kSigint = 1;
  static constexpr int kCheckEveryMs = 100;

  InterruptWatcher() {
    pthread_atfork([] { get().mutex_.lock(); }, [] { get().mutex_.unlock(); },
                   [] {
                     // The child has none of the parent's threads and its own calls.
                     InterruptWatcher& w = get();
                     w.calls_.clear();
                     w.watched_.store(0);
                     w.started_ = false;
                     w.checking_ = false;
                     w.mutex_.unlock();
                   });
  }

  void wake(unsigned char why) const {
    if (write(writeFd_.load(), &why, 1) < 0) {
      // The pipe is full: the thread has bytes to read already.
    }
  }

  // Async-signal-safe: atomic loads, write(2), and the handler it stands in front of.
  static void onSignal(int signal, siginfo_t* info, void* context) {
    const int savedErrno = errno;
    const InterruptWatcher& w = *instance_;
    if (w.watched_.load() > 0) w.wake(kSigint);
    const struct sigaction& python = w.python_;
    if ((python.sa_flags & SA_SIGINFO) != 0) {
      python.sa_sigaction(signal, info, context);
    } else if (python.sa_handler != SIG_DFL && python.sa_handler != SIG_IGN) {
      python.sa_handler(signal);
    }
    errno = savedErrno;
  }

  // Puts onSignal in front of SIGINT's handler, when that is a function (a
  // Python handler); not when SIGINT is ignored or left to its default.
  void placeHandler() {
    struct sigaction current {};
    if (sigaction(SIGINT, nullptr, &current) != 0) return;
    const bool function =
        (current.sa_flags & SA_SIGINFO) != 0 || (current.sa_handler != SIG_DFL && current.sa_handler != SIG_IGN);
    if (!function || ((current.sa_flags & SA_SIGINFO) != 0 && current.sa_sigaction == &onSignal)) return;
    instance_ = this;
    python_ = current;  // onSignal is not installed now: nothing reads it
    struct sigaction ours = current;
    ours.sa_flags |= SA_SIGINFO;
    ours.sa_sigaction = &onSignal;
    sigaction(SIGINT, &ours, nullptr);
  }

  void start() {
    if (readFd_ >= 0) {  // the parent's, before a fork
      close(readFd_);
      close(writeFd_.load());
      readFd_ = -1;
      writeFd_.store(-1);
    }
    int fds[2];
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) != 0) return;
    try {
      std::thread([this, readFd = fds[0]] { watch(readFd); }).detach();
    } catch (const std::system_error&) {
      close(fds[0]);
      close(fds[1]);
      return;
    }
    readFd_ = fds[0];
    writeFd_.store(fds[1]);
    started_ = true;
  }

  void watch(int readFd) {
    bool checking = false;
    while (true) {
      pollfd ready{readFd, POLLIN, 0};
      const int n = poll(&ready, 1, checking ? kCheckEveryMs : -1);
      if (n < 0 && errno != EINTR) return;
      bool sigint = false;
      unsigned char bytes[64];
      const ssize_t got = n > 0 ? read(readFd, bytes, sizeof bytes) : 0;
      for (ssize_t i = 0; i < got; ++i) sigint = sigint || bytes[i] == kSigint;
      std::lock_guard lock(mutex_);
      if (readFd != readFd_) return;  // a parent's pipe, closed in this forked child
      if (sigint) {
        for (InterruptibleCall* call : calls_) {
          if (call->interrupted_.exchange(true)) continue;
          // Under the mutex: the call cannot return past remove() (and its
          // communicator be closed) while this aborts it. Returns within 1 s.
          for (vigilComm_t comm : call->comms_) vigilCommAbortWithReason(comm, kInterruptedReason);
        }
      }
      if (n == 0) {  // a check is due
        if (calls_.empty() && !callsSinceCheck_) {
          checking_ = false;  // quiet: the next call checks and wakes this thread
        } else {
          placeHandler();
        }
        callsSinceCheck_ = false;
      }
      checking = checking_;
    }
  }

  static inline InterruptWatcher* instance_ = nullptr;
  std::mutex mutex_;
  std::vector<InterruptibleCall*> calls_;
  std::atomic<int> watched_ = 0;  // calls_.size(), for the signal handler
  struct sigaction python_ {};    // the handler onSignal runs after its own work
  bool started_ = false;
  bool checking_ = false;  // the thread checks the handler every kCheckEveryMs
  bool callsSinceCheck_ = false;
  int readFd_ = -1;
  std::atomic<int> writeFd_ = -1;
};

CallError interruptedCallError(vigilResult_t rc, vigilComm_t comm) {
  CallError failure = lastCallError(rc != vigilSuccess ? rc : vigilAborted, comm);
  if (rc == vigilSuccess || failure.id.empty()) {
    failure = CallError{};
    failure.result = rc != vigilSuccess ? rc : vigilAborted;
    failure.text = std::string("the call returned ") + vigilGetErrorString(rc) + " when the abort came";
    failure.cause = failure.text;
  }
  return failure;
}

bool InterruptibleCall::interrupted() const {
  if (!interrupted_.load(std::memory_order_acquire)) return false;
  std::lock_guard wait(InterruptWatcher::get().mutex_);  // the watcher aborts under it
  return true;
}

InterruptibleCall::InterruptibleCall(std::vector<vigilComm_t> comms, bool runPendingHandlers)
    : comms_(std::move(comms)) {
  if (runPendingHandlers && PyErr_CheckSignals() != 0) throw py::error_already_set();
  InterruptWatcher::get().add(this);
}

InterruptibleCall::~InterruptibleCall() {
  InterruptWatcher::get().remove(this);
}

void InterruptibleCall::raiseInterrupted(const Where& where, const CallError& failure) {
  InterruptWatcher::get().remove(this);
  if (PyErr_CheckSignals() != 0) {
    py::error_already_set raised;
    const std::string rank =
        where.rank >= 0 ? "rank " + std::to_string(where.rank) + "/" + std::to_string(where.nranks) + ": " : "";
    const std::string note = "vigil: " + rank + where.op +
                             " was interrupted (SIGINT): this rank aborted the communicator and its peers were "
                             "told. The call returned: " +
                             failure.text;
    if (py::hasattr(raised.value(), "add_note")) raised.value().attr("add_note")(note);
    throw raised;
  }
  throw failure;
}

}  // namespace vigil::python
