#include "completion_pool.hpp"

#include <system_error>

#include "backend_threads.hpp"

namespace vigil::torchpg {

CompletionPool::CompletionPool() : state_(std::make_shared<State>()) {}

CompletionPool::~CompletionPool() {
  stop();
}

void CompletionPool::stop() {
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
    threads.swap(threads_);
  }
  state_->changed.notify_all();
  for (std::thread& thread : threads) {
    if (thread.get_id() == std::this_thread::get_id()) {
      thread.detach();  // we are inside its completion; it ends on its own State
    } else {
      thread.join();
    }
  }
}

void CompletionPool::push(std::function<void()> completion) {
  {
    std::unique_lock lock(state_->mutex);
    if (state_->stopping) {
      lock.unlock();
      completion();  // no thread is left to take it
      return;
    }
    state_->completions.push_back(std::move(completion));
    // Every queued completion needs a thread of its own now: one that waits
    // behind a blocked callback could be the one that callback waits for.
    if (state_->completions.size() > state_->idle) {
      try {
        threads_.emplace_back(startBackendThread([state = state_] { run(state); }));
      } catch (const std::system_error&) {
        // Out of threads: a busy thread takes it when its callback returns.
      }
    }
  }
  state_->changed.notify_one();
}

void CompletionPool::run(const std::shared_ptr<State>& state) {
  std::unique_lock lock(state->mutex);
  while (true) {
    ++state->idle;
    state->changed.wait(lock, [&] { return state->stopping || !state->completions.empty(); });
    --state->idle;
    if (state->completions.empty()) return;  // stopping, and nothing left
    std::function<void()> completion = std::move(state->completions.front());
    state->completions.pop_front();
    lock.unlock();
    completion();          // completions catch their own errors
    completion = nullptr;  // drop what it holds (the Work, its tensors; maybe the pool) before waiting again
    lock.lock();
  }
}

}  // namespace vigil::torchpg
