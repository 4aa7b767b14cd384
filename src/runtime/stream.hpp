#pragma once
// CPU streams: an in-order queue of work with its own worker thread, the
// host-side twin of a device stream. Collectives enqueued on a stream run
// there in order; events mark positions in a stream so that other streams
// (or the host) can wait for them. The first error of a stream is kept
// (sticky) and returned by every later call on it.

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/deadline.hpp"
#include "core/errors.hpp"

namespace vigil {

class Stream {
 public:
  explicit Stream(std::string name);
  // Waits for the queued work, then joins the worker.
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  const std::string& name() const { return name_; }

  // Queues work; throws the stream's stored error instead if it has one.
  // Work reports failure by throwing vigil::Error.
  void enqueue(std::function<void()> work);
  // The position after the last queued work (what an event records).
  uint64_t position() const;
  // Blocks until the work up to `position` is done, or the deadline passes.
  // Throws VG-API-018 when called by this stream's own worker for work that
  // is not done (a host function waiting for its own stream).
  bool waitFor(uint64_t position, Deadline deadline = Deadline::never()) const;
  bool reached(uint64_t position) const;
  // Blocks until everything queued so far is done; throws the stored error
  // (or VG-API-018 from the stream's own worker).
  void synchronize();
  bool idle() const;
  std::optional<Error> error() const;

 private:
  void run();
  void refuseSelfWait(const char* call, uint64_t position) const;  // with mutex_ held

  const std::string name_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<std::function<void()>> queue_;
  uint64_t enqueued_ = 0;
  uint64_t done_ = 0;
  bool stopping_ = false;
  std::optional<Error> error_;
  std::thread worker_;
};

// A position in a stream, recorded by vigilEventRecord.
struct Event {
  std::shared_ptr<Stream> stream;  // null until recorded (or recorded on the NULL stream)
  uint64_t position = 0;
};

}  // namespace vigil
