// send, recv and recvAnysource, as requests on the group's point-to-point
// communicator (point_to_point.hpp).

#include "process_group_vigil.hpp"
#include "tensor_args.hpp"

namespace vigil::torchpg {

c10::intrusive_ptr<VigilWork> ProcessGroupVigil::p2pWork(const char* op, WorkSpec spec) {
  PointToPoint* p2p = p2p_.get();
  return c10::make_intrusive<VigilWork>(
      site(op), spec.type, spec.title, spec.inputs, std::move(spec.outputs), *completions_, [p2p] { p2p->abort(); },
      spec.sourceRank);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const OpSite where = site("send");
  at::Tensor tensor = singleTensor(where, tensors);
  requirePeer(where, dstRank);
  auto work = p2pWork("send", WorkSpec{c10d::OpType::SEND, "vigil:send", tensors, {}});
  p2p_->send(tensor.contiguous(), dstRank, tag, work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const OpSite where = site("recv");
  at::Tensor tensor = singleTensor(where, tensors);
  requirePeer(where, srcRank);
  // The profiler records the receive buffer as the input, as gloo does.
  auto work = p2pWork("recv", WorkSpec{c10d::OpType::RECV, "vigil:recv", tensors, tensors, srcRank});
  p2p_->recv(std::make_shared<DenseBuffer>(tensor), srcRank, tag, work);
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  const OpSite where = site("recv");
  at::Tensor tensor = singleTensor(where, tensors);
  if (size_ == 1) {
    raise(where, ids::ApiBadPeer, "a receive from any source in a group of one rank: no other rank can send",
          "receive from any source in a group with other ranks");
  }
  // The sender is known when the message is in (Work.source_rank()).
  auto work = p2pWork("recv", WorkSpec{c10d::OpType::RECVANYSOURCE, "vigil:recvAnySource", tensors, tensors});
  p2p_->recv(std::make_shared<DenseBuffer>(tensor), VIGIL_ANY_SOURCE, tag, work);
  return work;
}

}  // namespace vigil::torchpg
