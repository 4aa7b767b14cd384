#include "runtime/stream.hpp"

#include "core/log.hpp"
#include "core/thread.hpp"

namespace vigil {

Stream::Stream(std::string name) : name_(std::move(name)) {
  worker_ = startLibraryThread([this] { run(); });
}

Stream::~Stream() {
  {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return done_ == enqueued_; });
    stopping_ = true;
  }
  changed_.notify_all();
  worker_.join();
}

void Stream::enqueue(std::function<void()> work) {
  {
    std::lock_guard lock(mutex_);
    if (error_) throw *error_;
    queue_.push_back(std::move(work));
    ++enqueued_;
  }
  changed_.notify_all();
}

uint64_t Stream::position() const {
  std::lock_guard lock(mutex_);
  return enqueued_;
}

void Stream::refuseSelfWait(const char* call, uint64_t position) const {
  // On the worker, the work running now is number done_ + 1: waiting for it
  // or anything after it would wait for this very thread.
  if (std::this_thread::get_id() != worker_.get_id() || position <= done_) return;
  ErrorBuilder(Errc::ApiStreamSelfWait)
      .op(call)
      .cause("a host function running on stream ", name_, " waits for that same stream (for work #", position,
             "; it is work #", done_ + 1, " itself): the wait could never end")
      .raise();
}

bool Stream::waitFor(uint64_t position, Deadline deadline) const {
  std::unique_lock lock(mutex_);
  refuseSelfWait("wait for an event", position);
  return changed_.wait_until(lock, deadline.at(), [&] { return done_ >= position; });
}

bool Stream::reached(uint64_t position) const {
  std::lock_guard lock(mutex_);
  return done_ >= position;
}

void Stream::synchronize() {
  std::unique_lock lock(mutex_);
  refuseSelfWait("vigilStreamSynchronize", enqueued_);
  changed_.wait(lock, [&] { return done_ == enqueued_; });
  if (error_) throw *error_;
}

bool Stream::idle() const {
  std::lock_guard lock(mutex_);
  return done_ == enqueued_;
}

std::optional<Error> Stream::error() const {
  std::lock_guard lock(mutex_);
  return error_;
}

void Stream::run() {
  std::unique_lock lock(mutex_);
  while (true) {
    changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left
    std::function<void()> work = std::move(queue_.front());
    queue_.pop_front();
    // After an error, the rest of the queue is skipped: it was issued
    // assuming the failed work had succeeded.
    const bool skip = error_.has_value();
    lock.unlock();
    if (!skip) {
      try {
        work();
      } catch (const Error& e) {
        lock.lock();
        if (!error_) {
          error_ = e;
          // Async errors are easy to miss (S13): say it once, when it happens.
          VIGIL_LOG_AT(LogLevel::Warn, -1, "stream ", name_, ": ", e.text());
        }
        lock.unlock();
      }
    }
    work = nullptr;  // release what the work held (buffers, communicator) before reporting done
    lock.lock();
    ++done_;
    changed_.notify_all();
  }
}

}  // namespace vigil
