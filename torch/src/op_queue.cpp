#include "op_queue.hpp"

namespace vigil::torchpg {

OpQueue::OpQueue() : worker_([this] { run(); }) {}

OpQueue::~OpQueue() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void OpQueue::push(std::function<void()> job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  changed_.notify_all();
}

void OpQueue::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();          // jobs catch their own errors: they complete a Work
    job = nullptr;  // drop what it holds (tensors, the Work) before waiting again
    lock.lock();
  }
}

}  // namespace vigil::torchpg
