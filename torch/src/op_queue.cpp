#include "op_queue.hpp"

#include <vector>

#include "backend_threads.hpp"

namespace vigil::torchpg {
namespace {

std::string millisecondsText(OpQueue::Clock::duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + " ms";
}

}  // namespace

OpQueue::OpQueue(std::string name, std::chrono::milliseconds timeout)
    : name_(std::move(name)),
      timeout_(timeout),
      worker_(startBackendThread([this] { work(); })),
      watcher_(startBackendThread([this] { watch(); })) {}

OpQueue::~OpQueue() {
  stop();
}

void OpQueue::stop() {
  std::thread worker, watcher;  // taken out: a second stop() has nothing to join
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    worker.swap(worker_);
    watcher.swap(watcher_);
  }
  workerWakes_.notify_all();
  if (worker.joinable()) worker.join();
  if (watcher.joinable()) watcher.join();  // it ends when the worker did
}

void OpQueue::push(Job job) {
  std::unique_lock lock(mutex_);
  if (stopping_ || !brokenBy_.empty()) {
    std::exception_ptr error = stopping_ ? stopped(job.site) : broken(job.site);
    lock.unlock();
    job.fail(error);
    return;
  }
  jobs_.push_back(Queued{std::move(job), Clock::now()});
  lock.unlock();
  workerWakes_.notify_all();
  watcherWakes_.notify_all();
}

void OpQueue::work() {
  std::unique_lock lock(mutex_);
  while (true) {
    workerWakes_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) break;  // stopping, and nothing left
    Queued next = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = next.job.site.op;
    runningSince_ = Clock::now();
    lock.unlock();
    watcherWakes_.notify_all();  // a new first in line
    next.job.run();
    next = Queued{};  // drop what it holds (tensors, the Work) before taking the next one
    lock.lock();
    running_ = nullptr;
  }
  workerDone_ = true;
  lock.unlock();
  watcherWakes_.notify_all();
}

void OpQueue::watch() {
  std::unique_lock lock(mutex_);
  while (!workerDone_) {
    if (jobs_.empty()) {
      watcherWakes_.wait(lock);
      continue;
    }
    // Jobs are queued in time order: the first in line runs out first.
    const Clock::time_point deadline = jobs_.front().queuedAt + timeout_;
    const Clock::time_point now = Clock::now();
    if (now < deadline) {
      watcherWakes_.wait_until(lock, deadline);
      continue;
    }
    std::deque<Queued> failed = std::move(jobs_);
    jobs_.clear();
    std::vector<std::exception_ptr> errors;
    errors.push_back(expired(failed.front(), now));
    try {
      std::rethrow_exception(errors.front());
    } catch (const std::exception& e) {
      brokenBy_ = e.what();
    }
    for (size_t i = 1; i < failed.size(); ++i) errors.push_back(broken(failed[i].job.site));
    lock.unlock();
    for (size_t i = 0; i < failed.size(); ++i) failed[i].job.fail(errors[i]);
    failed.clear();  // their tensors may need the GIL to go: not under the lock
    lock.lock();
  }
}

std::exception_ptr OpQueue::expired(const Queued& queued, Clock::time_point now) const {
  const std::string ahead =
      running_ != nullptr
          ? "the operation ahead of it, " + std::string(running_) + ", has run for " +
                millisecondsText(now - runningSince_) + " and not returned"
          : "the worker did not take it (it was still releasing the previous operation's tensors, which can need "
            "Python's GIL)";
  try {
    raise(queued.job.site, ids::TorchQueueTimeout,
          "waited " + millisecondsText(timeout_) + " (the process group's timeout) in " + name_ +
              " and never started: " + ahead,
          "find why " + std::string(running_ != nullptr ? running_ : "the worker") +
              " does not return on this rank (its own error, if it ends, names the rank it waits for); this group "
              "cannot run more operations: destroy it and create a new one");
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr OpQueue::broken(const OpSite& site) const {
  try {
    raise(site, ids::CommFailed,
          "the group cannot run more operations: an earlier one never started within the group's timeout (" +
              brokenBy_ + ")",
          "destroy the group and create a new one; the quoted error is the cause");
  } catch (...) {
    return std::current_exception();
  }
}

std::exception_ptr OpQueue::stopped(const OpSite& site) const {
  try {
    raiseAfterStop(site);
  } catch (...) {
    return std::current_exception();
  }
}

}  // namespace vigil::torchpg
