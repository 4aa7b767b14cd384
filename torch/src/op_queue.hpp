#pragma once
// One worker thread that runs jobs in the order they were pushed: the
// operations of one vigil communicator, which must run in issue order and
// from one thread at a time.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace vigil::torchpg {

class OpQueue {
 public:
  OpQueue();
  OpQueue(const OpQueue&) = delete;
  OpQueue& operator=(const OpQueue&) = delete;
  // Runs every job still queued (each vigil operation ends by its deadline),
  // then joins the worker.
  ~OpQueue();

  void push(std::function<void()> job);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread worker_;  // last: it starts on the fields above
};

}  // namespace vigil::torchpg
