#pragma once
// vigil.Communicator: one vigilComm_t, its stream for async_op=True, the
// handles (vigil.Work) of its operations in flight, and the thread's open
// group (vigil.group()). Every call that can wait releases the GIL.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "errors.hpp"
#include "interrupt.hpp"
#include "vigil/vigil.h"

namespace vigil::python {

// Owns a vigilStream_t: operations with async_op=True of one communicator run
// on it in issue order.
class StreamOwner {
 public:
  StreamOwner();
  ~StreamOwner();
  StreamOwner(const StreamOwner&) = delete;
  StreamOwner& operator=(const StreamOwner&) = delete;
  vigilStream_t get() const { return stream_; }

 private:
  vigilStream_t stream_ = nullptr;
};

// vigil.Work: an operation issued with async_op=True. It holds the arrays
// the operation reads and writes until it is destroyed, and the communicator
// holds it until the operation completed, so no buffer is freed while the
// stream's worker uses it.
class Comm;

// vigil.Status: what a tagged receive or probe matched (source, tag, size).
struct Status {
  vigilStatus value{-1, -1, 0, 0};
};
class Work {
 public:
  Work(vigilEvent_t event, std::vector<pybind11::object> keep, pybind11::object result, Where where,
       std::weak_ptr<Comm> owner, vigilComm_t comm);
  // A tagged send or receive issued as a request (vigilIsendTag/vigilIrecvTag):
  // it progresses beside the communicator's other calls; `status` (may be
  // null) gets the receive's status when it completes.
  Work(vigilRequest_t request, vigilStatus* status, std::vector<pybind11::object> keep, pybind11::object result,
       Where where, std::weak_ptr<Comm> owner, vigilComm_t comm);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  pybind11::object wait();
  bool isCompleted();
  // Completed, without raising (the error is for wait()).
  bool reached() const;
  const std::string& op() const { return where_.op; }

 private:
  vigilEvent_t event_ = nullptr;
  vigilRequest_t request_ = VIGIL_REQUEST_NULL;  // a request's, until it completed
  vigilStatus* status_ = nullptr;
  std::vector<pybind11::object> keep_;
  pybind11::object result_;
  Where where_;
  std::weak_ptr<Comm> owner_;  // told when Ctrl-C aborted the communicator in wait()
  vigilComm_t comm_;
};

struct InitOptions {
  pybind11::object timeout = pybind11::none();         // seconds
  pybind11::object connectTimeout = pybind11::none();  // seconds
  pybind11::object name = pybind11::none();
  pybind11::object fingerprint = pybind11::none();
  pybind11::object nanCheck = pybind11::none();
  pybind11::object bufferGuard = pybind11::none();
};

// One block of the symmetric heap under numpy arrays (symmetric.cpp).
struct SymmetricBlockState {
  void* ptr = nullptr;
  size_t bytes = 0;
  bool referenced = true;  // some array (of this process) still uses it
};

// The C call of one operation, given the communicator and the stream (NULL: blocking).
using OpCall = std::function<vigilResult_t(vigilComm_t, vigilStream_t)>;

class Comm : public std::enable_shared_from_this<Comm> {
 public:
  Comm(vigilComm_t comm, std::string name);
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  static std::shared_ptr<Comm> fromRootInfo(const std::string& rootInfo, int rank, int worldSize,
                                            const InitOptions& options);
  static std::shared_ptr<Comm> fromEnv();
  // vigil.init(): fromEnv(), or without any launcher's variables a world of
  // one (this process alone, as mpi4py's singleton init).
  static std::shared_ptr<Comm> initOrAlone();

  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }
  bool closed() const { return comm_ == nullptr; }
  Where where(const std::string& op) const { return Where{rank_, size_, op}; }
  // The live handle; refuses VG-API-007 after close() or abort().
  vigilComm_t handle(const std::string& op) const;

  // Runs one operation: blocking, queued in the thread's open group, or (with
  // asyncOp) on this communicator's stream, returning a vigil.Work. `keep` are
  // the arrays the operation uses; `result` is what the call returns.
  pybind11::object issue(const std::string& op, bool asyncOp, std::vector<pybind11::object> keep,
                         pybind11::object result, const OpCall& call);
  // A tagged send or receive with async_op=True, outside a group: posted as
  // a request, so a blocking call after it (send after irecv) does not wait
  // for it, and it progresses in every later tagged call. The communicator
  // keeps the Work (and so the arrays) until it completed.
  pybind11::object issueRequest(const std::string& op, std::vector<pybind11::object> keep, pybind11::object result,
                                vigilStatus* status,
                                const std::function<vigilResult_t(vigilComm_t, vigilRequest_t*)>& post);
  // Waits for this communicator's async operations (so that a blocking call
  // after them runs after them on every rank).
  void drain(const std::string& op);

  // Runs `call`, a vigil call on this communicator that may wait, without the
  // GIL and watched for Ctrl-C (interrupt.hpp): a SIGINT aborts this
  // communicator and raises KeyboardInterrupt here.
  template <class Call>
  vigilResult_t interruptible(const std::string& op, Call&& call) {
    InterruptibleCall watch({comm_});
    vigilResult_t rc;
    {
      pybind11::gil_scoped_release nogil;
      rc = call();
    }
    if (watch.interrupted()) {
      const CallError failure = interruptedCallError(rc, comm_);
      forgetAborted();
      watch.raiseInterrupted(where(op), failure);
    }
    return rc;
  }
  // The communicator was aborted under this object (Ctrl-C): it is closed.
  void forgetAborted();

  // Symmetric blocks (symmetric.cpp): made by symmetric_empty, freed by a
  // collective collect once unreferenced on every rank.
  void addSymmetricBlock(std::shared_ptr<SymmetricBlockState> block) { blocks_.push_back(std::move(block)); }
  size_t liveSymmetricBlocks() const;
  size_t collectSymmetric(const std::string& op);

  std::shared_ptr<Comm> split(int color, int key);
  pybind11::object asyncError();
  void dumpFlightRecorder(const pybind11::object& path);
  void finalize();
  void close();
  void abort();

 private:
  void prune();

  vigilComm_t comm_;
  int rank_ = -1;
  int size_ = 0;
  std::string name_;
  std::shared_ptr<StreamOwner> stream_;
  std::vector<std::shared_ptr<Work>> pending_;   // on the stream
  std::vector<std::shared_ptr<Work>> requests_;  // requests not known to have completed
  std::vector<std::shared_ptr<SymmetricBlockState>> blocks_;
  // close() with symmetric arrays alive: destroyed by the destructor, when the last went.
  vigilComm_t closedLater_ = nullptr;
};

// vigil.group(): vigilGroupStart on entry, vigilGroupEnd on exit; the arrays
// of the operations issued inside are held until the batch completed.
class Group {
 public:
  Group() = default;
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;
  Group(Group&&) = default;
  void enter();
  void exit(const pybind11::object& excType);

 private:
  std::vector<pybind11::object> keep_;
  std::vector<std::weak_ptr<Comm>> comms_;  // of the operations issued inside: Ctrl-C aborts them
  bool entered_ = false;
  bool outermost_ = false;
};

bool groupOpen();

void registerCommunicator(pybind11::module_& m);
void registerCollectives(pybind11::class_<Comm, std::shared_ptr<Comm>>& cls);
void registerMoe(pybind11::module_& m, pybind11::class_<Comm, std::shared_ptr<Comm>>& cls);
void registerSymmetric(pybind11::class_<Comm, std::shared_ptr<Comm>>& cls, pybind11::module_& m);
// Collective: a new array of `shape` and `dtype` over `comm`'s symmetric heap
// (Communicator.symmetric_empty).
pybind11::array symmetricEmpty(const std::shared_ptr<Comm>& comm, const std::vector<pybind11::ssize_t>& shape,
                               const pybind11::dtype& dtype);

}  // namespace vigil::python
