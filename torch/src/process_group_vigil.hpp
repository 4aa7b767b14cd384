#pragma once
// ProcessGroupVigil: torch.distributed's ProcessGroup over a vigil
// communicator. Collectives of a group run in issue order on the group's
// worker thread (a vigil communicator runs one operation at a time);
// point-to-point operations are requests on a communicator of their own,
// progressed by a thread of their own (point_to_point.hpp).
// Every call checks its arguments at once (a bad one raises on the calling
// thread and the group stays usable) and returns an async Work.

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "completion_pool.hpp"
#include "errors.hpp"
#include "op_queue.hpp"
#include "point_to_point.hpp"
#include "vigil/vigil.hpp"

namespace vigil::torchpg {

class ProcessGroupVigil final : public c10d::ProcessGroup {
 public:
  // Collective over the group's ranks: rank 0 publishes the root info of a
  // new communicator in `store`, the others read it; `timeout` becomes the
  // communicator's per-operation deadline.
  ProcessGroupVigil(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                    std::chrono::milliseconds timeout);
  ~ProcessGroupVigil() override;

  // Keeps a weak reference to `group` for stopAllForExit (the module's
  // constructor calls it for every group it makes). With it, c10 calls
  // release_resources, not the destructor, when the last strong reference
  // goes: both shut the group down (shutDown).
  static void track(const c10::intrusive_ptr<ProcessGroupVigil>& group);
  // The interpreter's exit (vigil.torch's atexit handler, GIL released):
  // stops the threads of every live group (stopThreads), while they can
  // still take the GIL to run callbacks and free tensors, then waits for
  // every backend thread (startBackendThread) to end, those of groups gone
  // before included. The caller has destroyed the communicators first, so
  // nothing in flight waits long.
  static void stopAllForExit();
  // Runs what is queued, then ends the group's threads; later operations
  // fail with VG-TORCH-006. shutDown's first step; idempotent.
  void stopThreads();
  void release_resources() override;

  const std::string getBackendName() const override { return "vigil"; }
  const std::string& commName() const { return commName_; }
  std::chrono::milliseconds timeout() const { return timeout_; }

  // collectives.cpp
  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = {}) override;
  // Raises VG-API-008: barrier() already names the rank that does not arrive.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks = false) override;

  // gather_scatter.cpp
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = {}) override;

  // exchange.cpp
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplitSizes,
                                               std::vector<int64_t>& inputSplitSizes,
                                               const c10d::AllToAllOptions& opts = {}) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = {}) override;

  // send_recv.cpp
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // A seam for tests: the group's queue runs nothing behind this job until
  // release() (or the end of the returned handle), as if an operation ahead
  // did not return.
  class QueueHold {
   public:
    QueueHold() = default;
    QueueHold(const QueueHold&) = delete;
    QueueHold& operator=(const QueueHold&) = delete;
    ~QueueHold() { release(); }
    void release();

   private:
    friend class ProcessGroupVigil;
    struct State;
    std::shared_ptr<State> state_;
  };
  std::unique_ptr<QueueHold> holdQueueForTesting();

  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;

  // symmetric.cpp: tensors over the communicator's symmetric heap. The first three are
  // collective and run on the group's queue, in order with its collectives.
  // A CPU tensor of `sizes` and `dtype` in a new block of the heap (reads as zero).
  at::Tensor symmetricEmpty(const std::vector<int64_t>& sizes, at::ScalarType dtype);
  // Frees the blocks no tensor on any rank uses any more; returns how many.
  int64_t symmetricCollect();
  // vigilBarrierAll: every store and put of every rank before it is visible after it.
  c10::intrusive_ptr<c10d::Work> barrierAll();
  // Local: `tensor` (over this group's heap) as it lies in `peer`'s copy, for loads and stores.
  at::Tensor symmetricPeerView(const at::Tensor& tensor, int peer);
  // Blocks that a tensor on this rank still uses (for tests).
  size_t symmetricBlocksInUse() const;
  struct SymmetricBlock;

 private:
  // What a Work reports: its type, profiler title (a literal), operation
  // name for errors, and the tensors for the profiler and result().
  struct WorkSpec {
    c10d::OpType type;
    const char* title;
    std::vector<at::Tensor> inputs;
    std::vector<at::Tensor> outputs;
    int sourceRank = -1;
  };

  OpSite site(const char* op) const { return OpSite{rank_, size_, commName_, op}; }
  vigilComm_t comm() const { return comm_->get(); }
  // Queues `body` on the group's worker; the returned Work completes when
  // it returns, or fails with what it threw.
  c10::intrusive_ptr<c10d::Work> launch(const char* op, WorkSpec spec, std::function<void()> body);
  // `abortComm` aborts the communicator `body` runs on (Ctrl-C in Work.wait).
  c10::intrusive_ptr<c10d::Work> launchOn(OpQueue& queue, std::function<void()> abortComm, const char* op,
                                          WorkSpec spec, std::function<void()> body);
  // A Work of the point-to-point communicator (send_recv.cpp); Ctrl-C in its wait aborts that one.
  c10::intrusive_ptr<VigilWork> p2pWork(const char* op, WorkSpec spec);
  // allreduce (SUM) of one sparse COO tensor (collectives.cpp).
  c10::intrusive_ptr<c10d::Work> sparseAllreduce(const OpSite& where, const at::Tensor& tensor,
                                                 std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts);
  // One tensor, dense, on the CPU: the argument of broadcast/allreduce/reduce/send/recv.
  at::Tensor singleTensor(const OpSite& site, const std::vector<at::Tensor>& tensors) const;
  void requirePeer(const OpSite& site, int peer) const;
  // On the queue's worker: frees the blocks that no rank uses.
  size_t collectSymmetric();
  // The destructor's work, done once, with no strong reference left: ends
  // the threads (stopThreads), then frees the queue, the point-to-point
  // communicator, the communicator and the store.
  void shutDown() noexcept;

  std::string commName_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;  // the group's; monitored_barrier meets there
  uint64_t monitoredBarriers_ = 0;         // how many this rank called: each has its own keys
  // Shared with the symmetric blocks: tensors over the heap keep it after the group is gone.
  std::shared_ptr<vigil::Communicator> comm_;
  mutable std::mutex symmetricMutex_;
  std::vector<std::shared_ptr<SymmetricBlock>> symmetricBlocks_;  // allocation order, the same on every rank
  // Completes the futures of the Works below: outlives their workers.
  std::unique_ptr<CompletionPool> completions_;
  std::unique_ptr<PointToPoint> p2p_;
  std::unique_ptr<OpQueue> queue_;  // destroyed first: drains before the communicators go
};

}  // namespace vigil::torchpg
