#pragma once
// One worker thread that runs jobs in the order they were pushed: the
// operations of one vigil communicator, which must run in issue order and
// from one thread at a time.
//
// A job must start within the queue's timeout (the group's) of being
// pushed. A vigil operation's own deadline only runs once it started, so
// without this a job behind one that does not return would wait unbounded.
// When the first job in line runs out of time, a watcher thread fails it,
// naming the job the worker is stuck in, and the queue is broken: every job
// still queued, and every job pushed later, fails at once quoting that error.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

#include "errors.hpp"

namespace vigil::torchpg {

class OpQueue {
 public:
  using Clock = std::chrono::steady_clock;

  struct Job {
    OpSite site;                                   // the operation, for the errors of a job that never runs
    std::function<void()> run;                     // catches its own errors: it completes a Work
    std::function<void(std::exception_ptr)> fail;  // completes the Work with the error instead of running
  };

  // `name` says which queue it is in errors ("the group's queue");
  // `timeout` is how long a job may wait in it before it starts.
  OpQueue(std::string name, std::chrono::milliseconds timeout);
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;
  // Runs every job still queued (each vigil operation ends by its deadline;
  // the watcher fails jobs that wait too long meanwhile), then joins.
  ~OpQueue();

  // Fails `job` at once (VG-TORCH-006) once stop() began.
  void push(Job job);
  // What the destructor does, for the interpreter's exit (idempotent): runs
  // what is queued and joins the threads, so none is left to touch Python.
  void stop();

 private:
  struct Queued {
    Job job;
    Clock::time_point queuedAt;
  };

  void work();
  void watch();
  // The error of the first job in line when its time ran out (mutex_ held).
  std::exception_ptr expired(const Queued& queued, Clock::time_point now) const;
  // The error of a job failed because the queue is broken.
  std::exception_ptr broken(const OpSite& site) const;
  // The error of a job pushed once the queue stopped.
  std::exception_ptr stopped(const OpSite& site) const;

  const std::string name_;
  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable workerWakes_;
  std::condition_variable watcherWakes_;
  std::deque<Queued> jobs_;
  const char* running_ = nullptr;  // the operation the worker is in, if any
  Clock::time_point runningSince_;
  std::string brokenBy_;  // the text of the error that broke the queue
  bool stopping_ = false;
  bool workerDone_ = false;
  std::thread worker_;  // the threads last: they start on the fields above
  std::thread watcher_;
};

}  // namespace vigil::torchpg
