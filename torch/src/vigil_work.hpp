#pragma once
// The Work of one operation of the backend: completed by the worker thread
// that ran the operation, with the operation's error (vigil's text) if it
// failed. DDP waits on getFuture(); Python's Work.wait() on wait().

#include <ATen/core/ivalue.h>

#include <functional>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "errors.hpp"

namespace vigil::torchpg {

class VigilWork final : public c10d::Work {
 public:
  // `profilingTitle` must outlive the Work (the profiler keeps the pointer):
  // pass a string literal.
  VigilWork(OpSite site, c10d::OpType type, const char* profilingTitle, const std::vector<at::Tensor>& inputs,
            std::vector<at::Tensor> outputs, int sourceRank = -1);

  // Runs the operation (on the worker thread) and completes this Work with
  // its outcome.
  void run(const std::function<void()>& body);

  // Blocks until the operation completed; with a timeout, raises VG-OP-001
  // when it runs out first (the operation goes on).
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }
  int sourceRank() const override;

 private:
  OpSite site_;
  std::vector<at::Tensor> outputs_;
  int sourceRank_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

}  // namespace vigil::torchpg
