#pragma once
// Point-to-point traffic of one process group: one vigil communicator of the
// group's ranks (a split of the group's communicator, made with the group),
// on which every send and receive is a non-blocking tagged request
// (vigilIsendTag, vigilIrecvTag). A progress thread of the group's own,
// started at its first send or receive, waits on all pending requests at
// once (vigilWaitAny): a pending receive never holds up a send (irecv then
// send on every rank completes, whatever the sizes), a receive from any
// source takes the first message that comes, and messages match by source
// and tag in the order the receives were posted, as in MPI and gloo. Tags
// are unlimited. A post wakes the thread's wait, which takes it in.
//
// Its own communicator, because the group's runs collectives on the group's
// queue meanwhile; of the same ranks, so errors name the group's ranks.

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "errors.hpp"
#include "tensor_args.hpp"
#include "vigil/vigil.hpp"
#include "vigil_work.hpp"

namespace vigil::torchpg {

class PointToPoint {
 public:
  // Collective over the group: every rank makes its own with the group.
  explicit PointToPoint(const vigil::Communicator& groupComm);
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;
  // The pending requests complete first (each within the group's timeout).
  ~PointToPoint();
  // What the destructor does, for the interpreter's exit (idempotent); later
  // sends and receives raise VG-TORCH-006.
  void stop();

  // Posts a send of `dense` (kept until it left) to `peer`; `work`
  // completes when it has. Raises the communicator's error if it failed.
  // After stop(), both raise VG-TORCH-006.
  void send(const at::Tensor& dense, int peer, int tag, c10::intrusive_ptr<VigilWork> work);
  // Posts a receive into `buffer` from `source` (VIGIL_ANY_SOURCE: any);
  // `work` completes with the sender's rank when the message is in.
  void recv(std::shared_ptr<DenseBuffer> buffer, int source, int tag, c10::intrusive_ptr<VigilWork> work);
  // Aborts the communicator, for Ctrl-C in Work.wait() (any thread).
  void abort() const { vigilCommAbortWithReason(comm_.get(), kInterruptedReason); }

 private:
  struct Pending {
    vigilRequest_t request;
    c10::intrusive_ptr<VigilWork> work;
    std::function<void(const vigilStatus&)> done;  // on the progress thread, inside work->run
  };
  void post(vigilRequest_t request, c10::intrusive_ptr<VigilWork> work, std::function<void(const vigilStatus&)> done);
  void progress();  // the thread

  vigil::Communicator comm_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Pending> pending_;  // in posting order; only the thread removes
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace vigil::torchpg
