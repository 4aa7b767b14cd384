// send, recv and recvAnysource, on the group's point-to-point channels.

#include "process_group_vigil.hpp"
#include "tensor_args.hpp"

namespace vigil::torchpg {

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::send(std::vector<at::Tensor>& tensors, int dstRank, int tag) {
  const OpSite where = site("send");
  at::Tensor tensor = singleTensor(where, tensors);
  requirePeer(where, dstRank);
  PointToPoint::Channel& channel = p2p_->channel(dstRank, PointToPoint::Direction::Send);
  WorkSpec spec{c10d::OpType::SEND, "vigil:send", tensors, {}};
  return launchOn(
      channel.queue(), [&channel] { channel.abort(); }, "send", std::move(spec),
      [&channel, tensor, tag, where] {
        vigilComm_t comm = channel.comm(where);
        const at::Tensor dense = tensor.contiguous();
        const Elements e = movedElements(dense);
        check(vigilSendTag(dense.data_ptr(), e.count, e.type, channel.peerInChannel(), tag, comm, nullptr), comm);
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::recv(std::vector<at::Tensor>& tensors, int srcRank, int tag) {
  const OpSite where = site("recv");
  at::Tensor tensor = singleTensor(where, tensors);
  requirePeer(where, srcRank);
  PointToPoint::Channel& channel = p2p_->channel(srcRank, PointToPoint::Direction::Recv);
  // The profiler records the receive buffer as the input, as gloo does.
  WorkSpec spec{c10d::OpType::RECV, "vigil:recv", tensors, tensors, srcRank};
  return launchOn(
      channel.queue(), [&channel] { channel.abort(); }, "recv", std::move(spec),
      [&channel, tensor, tag, where] {
        vigilComm_t comm = channel.comm(where);
        DenseBuffer buffer(tensor);
        const Elements e = movedElements(buffer.dense());
        check(vigilRecvTag(buffer.data(), e.count, e.type, channel.peerInChannel(), tag, comm, nullptr, nullptr), comm);
        buffer.writeBack();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) {
  raise(site("recv"), ids::ApiNotSupported,
        "receiving from any source is not supported by the vigil backend (vigil matches every receive with one "
        "named sender)",
        "pass src= to recv/irecv; to learn who sends, first exchange the senders' ranks with a collective "
        "(e.g. all_gather)");
}

}  // namespace vigil::torchpg
