#pragma once
// The Work of one operation of the backend: completed by the worker thread
// that ran the operation, with the operation's error (vigil's text) if it
// failed. DDP waits on getFuture(); Python's Work.wait() on wait(). The
// future is completed on the group's completion pool, never on the worker:
// completing it runs its callbacks, which may wait for later operations of
// the same worker.

#include <ATen/core/ivalue.h>

#include <functional>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "completion_pool.hpp"
#include "errors.hpp"

namespace vigil::torchpg {

class VigilWork final : public c10d::Work {
 public:
  // `profilingTitle` must outlive the Work (the profiler keeps the pointer):
  // pass a string literal.
  // `completions` must outlive the worker that runs this Work;
  // `abortComm` aborts the communicator the operation runs on (Ctrl-C).
  VigilWork(OpSite site, c10d::OpType type, const char* profilingTitle, const std::vector<at::Tensor>& inputs,
            std::vector<at::Tensor> outputs, CompletionPool& completions, std::function<void()> abortComm,
            int sourceRank = -1);

  // Runs the operation (on the worker thread) and completes this Work with
  // its outcome; its future follows on the completion pool.
  void run(const std::function<void()>& body);
  // Completes this Work with `error` without running it.
  void fail(std::exception_ptr error);

  // Blocks until the operation completed and its future holds the outcome;
  // with a timeout, raises VG-OP-001 when it runs out first (the operation
  // goes on). Ctrl-C wakes it within kSignalCheckEvery: on Python's main
  // thread a SIGINT aborts the operation's communicator (the peers are told
  // which rank aborted) and raises KeyboardInterrupt with vigil's text as a
  // note.
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override;
  // A receive from any source: the sender, known when the message is in (before run() completes it).
  void setSourceRank(int rank) { sourceRank_ = rank; }
  const OpSite& site() const { return site_; }

 private:
  void complete(std::exception_ptr failure);
  // Runs Python's pending signal handlers; when one raises, aborts the
  // communicator and throws that Python exception.
  void raiseIfSignalled();

  static constexpr std::chrono::milliseconds kSignalCheckEvery{100};

  OpSite site_;
  std::vector<at::Tensor> outputs_;
  int sourceRank_;
  CompletionPool& completions_;
  std::function<void()> abortComm_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace vigil::torchpg
