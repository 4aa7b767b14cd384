// broadcast, allreduce, allreduce_coalesced, reduce and barrier: the
// operations that work in place on the caller's tensors.

#include "process_group_vigil.hpp"
#include "tensor_args.hpp"

namespace vigil::torchpg {

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const OpSite where = site("broadcast");
  at::Tensor tensor = singleTensor(where, tensors);
  requireRoot(where, opts.rootRank);
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  WorkSpec spec{c10d::OpType::BROADCAST, "vigil:broadcast", tensors, tensors};
  return launch("broadcast", std::move(spec), [this, tensor, root, isRoot] {
    DenseBuffer buffer(tensor);
    const Elements e = movedElements(buffer.dense());
    check(vigilBroadcast(buffer.data(), buffer.data(), e.count, e.type, root, comm(), nullptr), comm());
    if (!isRoot) buffer.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const OpSite where = site("allreduce");
  at::Tensor tensor = singleTensor(where, tensors);
  const vigilDataType_t type = reductionType(where, tensor.scalar_type());
  const vigilRedOp_t op = reductionOp(where, opts.reduceOp, tensor.scalar_type());
  WorkSpec spec{c10d::OpType::ALLREDUCE, "vigil:all_reduce", tensors, tensors};
  return launch("allreduce", std::move(spec), [this, tensor, type, op] {
    DenseBuffer buffer(tensor);
    const auto count = static_cast<size_t>(tensor.numel());
    check(vigilAllReduce(buffer.data(), buffer.data(), count, type, op, comm(), nullptr), comm());
    buffer.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  const OpSite where = site("allreduce_coalesced");
  if (tensors.empty()) {
    raise(where, vigilInvalidArgument, ids::kBadTensor, "the tensor list is empty", "pass at least one tensor");
  }
  requireDenseCpu(where, tensors, "tensors");
  requireSameType(where, tensors, "tensors");
  const vigilDataType_t type = reductionType(where, tensors[0].scalar_type());
  const vigilRedOp_t op = reductionOp(where, opts.reduceOp, tensors[0].scalar_type());
  WorkSpec spec{c10d::OpType::ALLREDUCE_COALESCED, "vigil:all_reduce", tensors, tensors};
  return launch("allreduce_coalesced", std::move(spec), [this, tensors, type, op] {
    // One allreduce over the tensors laid end to end; a fresh buffer, so
    // tensors that alias each other still get the sum of their inputs.
    at::Tensor flat = concatenate(tensors);
    const auto count = static_cast<size_t>(flat.numel());
    check(vigilAllReduce(flat.data_ptr(), flat.data_ptr(), count, type, op, comm(), nullptr), comm());
    spread(flat, 0, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const OpSite where = site("reduce");
  at::Tensor tensor = singleTensor(where, tensors);
  requireRoot(where, opts.rootRank);
  const vigilDataType_t type = reductionType(where, tensor.scalar_type());
  const vigilRedOp_t op = reductionOp(where, opts.reduceOp, tensor.scalar_type());
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  WorkSpec spec{c10d::OpType::REDUCE, "vigil:reduce", tensors, tensors};
  return launch("reduce", std::move(spec), [this, tensor, type, op, root, isRoot] {
    DenseBuffer buffer(tensor);
    const auto count = static_cast<size_t>(tensor.numel());
    check(vigilReduce(buffer.data(), isRoot ? buffer.data() : nullptr, count, type, op, root, comm(), nullptr), comm());
    if (isRoot) buffer.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::barrier(const c10d::BarrierOptions& /*opts*/) {
  WorkSpec spec{c10d::OpType::BARRIER, "vigil:barrier", {}, {}};
  // Queued behind every collective issued before it, so it also waits for them.
  return launch("barrier", std::move(spec), [this] { check(vigilBarrier(comm(), nullptr), comm()); });
}

void ProcessGroupVigil::monitoredBarrier(const c10d::BarrierOptions& /*opts*/, bool /*waitAllRanks*/) {
  raise(site("monitored_barrier"), vigilInvalidUsage, ids::kNotSupported,
        "monitored_barrier is not supported by the vigil backend (torch implements it for gloo only)",
        "call dist.barrier(): a rank that does not arrive within the group's timeout is named in its VG-OP-001 "
        "error");
}

}  // namespace vigil::torchpg
