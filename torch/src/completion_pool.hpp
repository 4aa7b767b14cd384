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
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace vigil::torchpg {

class CompletionPool {
 public:
  CompletionPool();
  CompletionPool(const CompletionPool&) = delete;
  CompletionPool& operator=(const CompletionPool&) = delete;
  // Runs every completion still queued, then joins the threads. It may run
  // on one of them: dropping a completion can drop the last reference to
  // the group that owns this pool. That thread is detached, not joined (a
  // thread cannot join itself), and finishes on the state it shares.
  ~CompletionPool();

  // Runs `completion` on a pool thread; on the calling one once stop() began.
  void push(std::function<void()> completion);
  // What the destructor does, for the interpreter's exit (idempotent): the
  // queued completions run and the threads end, none left to touch Python.
  void stop();

 private:
  struct State {
    std::mutex mutex;
    std::condition_variable changed;
    std::deque<std::function<void()>> completions;
    size_t idle = 0;  // threads waiting for a completion
    bool stopping = false;
  };
  static void run(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;      // shared with the threads, which may outlive the pool
  std::vector<std::thread> threads_;  // guarded by state_->mutex
};

}  // namespace vigil::torchpg
