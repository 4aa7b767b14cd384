#include "completion_pool.hpp"

#include <system_error>

namespace vigil::torchpg {

CompletionPool::~CompletionPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void CompletionPool::push(std::function<void()> completion) {
  {
    std::lock_guard lock(mutex_);
    completions_.push_back(std::move(completion));
    // Every queued completion needs a thread of its own now: one that waits
    // behind a blocked callback could be the one that callback waits for.
    if (completions_.size() > idle_) {
      try {
        threads_.emplace_back([this] { run(); });
      } catch (const std::system_error&) {
        // Out of threads: a busy thread takes it when its callback returns.
      }
    }
  }
  changed_.notify_one();
}

void CompletionPool::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    ++idle_;
    changed_.wait(lock, [&] { return stopping_ || !completions_.empty(); });
    --idle_;
    if (completions_.empty()) return;  // stopping, and nothing left
    std::function<void()> completion = std::move(completions_.front());
    completions_.pop_front();
    lock.unlock();
    completion();          // completions catch their own errors
    completion = nullptr;  // drop what it holds (the Work, its tensors) before waiting again
    lock.lock();
  }
}

}  // namespace vigil::torchpg
