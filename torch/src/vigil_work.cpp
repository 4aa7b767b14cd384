#include "vigil_work.hpp"

#include <ATen/core/grad_mode.h>

namespace vigil::torchpg {

VigilWork::VigilWork(OpSite site, c10d::OpType type, const char* profilingTitle, const std::vector<at::Tensor>& inputs,
                     std::vector<at::Tensor> outputs, CompletionPool& completions, int sourceRank)
    : c10d::Work(site.rank, type, profilingTitle, c10::optional<std::vector<at::Tensor>>(inputs)),
      site_(std::move(site)),
      outputs_(std::move(outputs)),
      sourceRank_(sourceRank),
      completions_(completions),
      future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

void VigilWork::run(const std::function<void()>& body) {
  std::exception_ptr failure;
  try {
    // Copies into user tensors (parameters among them) are not autograd ops.
    at::NoGradGuard noGrad;
    body();
  } catch (...) {
    failure = std::current_exception();
  }
  complete(failure);
}

void VigilWork::fail(std::exception_ptr error) {
  complete(std::move(error));
}

void VigilWork::complete(std::exception_ptr failure) {
  finish(failure);
  completions_.push([future = future_, outputs = outputs_, failure] {
    if (failure) {
      future->setError(failure);
    } else {
      future->markCompleted(c10::IValue(outputs));
    }
  });
}

bool VigilWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (timeout == kNoTimeout) {
    cv_.wait(lock, [&] { return completed_; });
  } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
    lock.unlock();
    raise(site_, vigilTimeout, ids::kTimeout,
          "Work.wait(timeout=" + std::to_string(timeout.count()) +
              " ms) ran out before the operation completed; it is still queued or running and ends by the "
              "group's timeout",
          "wait longer, or find the rank that has not called this operation (the group's own timeout reports "
          "it)");
  }
  if (exception_) std::rethrow_exception(exception_);
  // The pool takes the future's completion at once (a thread of its own when
  // the others run callbacks): get_future().value() is valid after wait().
  future_->wait();
  return true;
}

int VigilWork::sourceRank() const {
  if (sourceRank_ >= 0) return sourceRank_;
  return c10d::Work::sourceRank();  // not a receive: torch's own error
}

}  // namespace vigil::torchpg
