#pragma once
// The threads that complete the futures of a group's Works. Completing a
// torch future runs its callbacks (fut.then(...)) on the completing thread,
// and a callback may issue and wait for more operations of the same group
// (PowerSGD's comm hook does): so futures are never completed on the thread
// that runs the group's operations, and a callback that blocks never holds
// up the completion of another future. A completion goes to an idle thread,
// or to a new one when every thread is busy (running callbacks that wait):
// the pool grows only as deep as callbacks nest.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace vigil::torchpg {

class CompletionPool {
 public:
  CompletionPool() = default;
  CompletionPool(const CompletionPool&) = delete;
  CompletionPool& operator=(const CompletionPool&) = delete;
  // Runs every completion still queued, then joins the threads.
  ~CompletionPool();

  void push(std::function<void()> completion);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::function<void()>> completions_;
  size_t idle_ = 0;  // threads waiting for a completion
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace vigil::torchpg
