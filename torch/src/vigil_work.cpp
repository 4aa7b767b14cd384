#include "vigil_work.hpp"

#include <ATen/core/grad_mode.h>
#include <Python.h>
#include <pybind11/pybind11.h>

#include <algorithm>

namespace vigil::torchpg {

VigilWork::VigilWork(OpSite site, c10d::OpType type, const char* profilingTitle, const std::vector<at::Tensor>& inputs,
                     std::vector<at::Tensor> outputs, CompletionPool& completions, std::function<void()> abortComm,
                     int sourceRank)
    : c10d::Work(site.rank, type, profilingTitle, c10::optional<std::vector<at::Tensor>>(inputs)),
      site_(std::move(site)),
      outputs_(std::move(outputs)),
      sourceRank_(sourceRank),
      completions_(completions),
      abortComm_(std::move(abortComm)),
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
  using Clock = std::chrono::steady_clock;
  const bool bounded = timeout != kNoTimeout;
  const Clock::time_point deadline = bounded ? Clock::now() + timeout : Clock::time_point::max();
  std::unique_lock lock(mutex_);
  // In slices: Python's SIGINT handler only sets a flag, which this thread
  // must look at (an operation that completes in time never sees a slice end).
  while (!cv_.wait_until(lock, std::min(deadline, Clock::now() + kSignalCheckEvery), [&] { return completed_; })) {
    if (bounded && Clock::now() >= deadline) break;
    lock.unlock();
    raiseIfSignalled();
    lock.lock();
  }
  if (!completed_) {
    lock.unlock();
    raise(site_, ids::OpTimeout,
          "Work.wait(timeout=" + std::to_string(timeout.count()) +
              " ms) ran out before the operation completed; it is still queued or running and ends by the "
              "group's timeout",
          "wait longer, or find the rank that has not called this operation (the group's own timeout reports "
          "it)");
  }
  if (exception_) std::rethrow_exception(exception_);
  lock.unlock();
  // The pool takes the future's completion at once (a thread of its own when
  // the others run callbacks): get_future().value() is valid after wait().
  future_->wait();
  return true;
}

void VigilWork::raiseIfSignalled() {
  // Taking the GIL while the interpreter shuts down would end this thread.
  if (!Py_IsInitialized() || _Py_IsFinalizing()) return;
  PyGILState_STATE gil = PyGILState_Ensure();
  if (PyErr_CheckSignals() == 0) {  // nothing pending, or not Python's main thread
    PyGILState_Release(gil);
    return;
  }
  pybind11::error_already_set raised;  // KeyboardInterrupt, unless the user's handler raised another
  std::string ended = "The operation had not ended yet";
  {
    PyThreadState* python = PyEval_SaveThread();
    // The operation returns at once then (vigil wakes blocked operations of
    // an aborted communicator); its error goes in the note.
    if (abortComm_) abortComm_();
    std::unique_lock lock(mutex_);
    if (cv_.wait_for(lock, std::chrono::seconds(5), [&] { return completed_; }) && exception_) {
      try {
        std::rethrow_exception(exception_);
      } catch (const std::exception& e) {
        ended = std::string("The operation ended with: ") + e.what();
      }
    }
    lock.unlock();
    PyEval_RestoreThread(python);
  }
  const std::string note = "vigil: rank " + std::to_string(site_.rank) + "/" + std::to_string(site_.size) + " (comm '" +
                           site_.comm + "'): " + site_.op +
                           " was interrupted (SIGINT): this rank aborted the group's communicator and its peers were "
                           "told. " +
                           ended;
  try {
    if (pybind11::hasattr(raised.value(), "add_note")) raised.value().attr("add_note")(note);
  } catch (pybind11::error_already_set& noteFailed) {
    noteFailed.discard_as_unraisable("adding vigil's note to KeyboardInterrupt");
  }
  PyGILState_Release(gil);
  throw raised;
}

int VigilWork::sourceRank() const {
  if (sourceRank_ >= 0) return sourceRank_;
  return c10d::Work::sourceRank();  // not a receive: torch's own error
}

}  // namespace vigil::torchpg
