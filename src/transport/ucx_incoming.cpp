// The UCX transport's messages that no receive took yet: the headers that
// tagged receives look at before they take a message (unreceived), the
// wait for one (awaitIncoming), a drain's next message (takeNext), and
// what nobody took, at teardown (discardUnreceived).

#include <algorithm>
#include <cstring>

#include "transport/ucx_internal.hpp"

namespace vigil::ucx {

bool UcxTransport::takeNext(Op& op) {
  // unreceived() holds the next header message (stash_), which postReceive takes.
  const std::optional<FrameHeader> next = unreceived(op.transfer->peer);
  if (!next) return false;
  if (!op.transfer->sink->wants(*next)) {
    op.stage = Op::Stage::Done;  // left for a later operation: the drain of this peer ends
    return false;
  }
  op.headerReq = op.payloadReq = nullptr;
  op.info = op.payloadInfo = {};
  postReceive(op);
  return true;
}

std::optional<FrameHeader> UcxTransport::unreceived(int peer) {
  auto& stashed = stash_[static_cast<size_t>(peer)];
  if (stashed.empty()) {
    progressAll();
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = api_.tagProbeNb(worker_, headerTag(peer), kFullMask, 1, &info);
    if (msg == nullptr) return std::nullopt;
    std::vector<uint8_t> bytes(info.length);
    ucp_request_param_t param = receiveParam(info, ucp_dt_make_contig(1));
    void* req = api_.tagMsgRecvNbx(worker_, bytes.data(), bytes.size(), msg, &param);
    const Deadline until = Deadline::afterMs(kQuiesceMs);
    ucs_status_t s;
    while ((s = settle(req)) == UCS_INPROGRESS && !until.expired()) progressAll();
    if (s != UCS_OK || bytes.size() < kHeaderBytes) return std::nullopt;
    stashed.push_back(std::move(bytes));
  }
  FrameHeader h;
  std::memcpy(&h, stashed.front().data(), kHeaderBytes);
  return h;
}

ExchangeFault UcxTransport::awaitIncoming(std::span<const int> peers, Deadline deadline, LivenessWatch& watch,
                                          int& from) {
  ExchangeFault fault = waitFor(
      [&](ExchangeFault&) {
        from = firstWithMessage(*this, peers);
        return from >= 0 ? 1 : 0;
      },
      [&](int peer) { return awaits(peers, peer); }, deadline, watch, nullptr, /*wakeable=*/true);
  markAwaited(fault, peers);
  return fault;
}

void UcxTransport::discardUnreceived() {
  // Messages that arrived and that no receive took (a failed op's peers went
  // on sending): taken and dropped, so that UCX does not warn about each one
  // on the application's stdout when the worker goes. Bounded: a large
  // message from a gone peer cannot be fetched.
  const Deadline until = Deadline::afterMs(kQuiesceMs);
  std::vector<uint8_t> sink;
  while (!until.expired()) {
    progressAll();
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = api_.tagProbeNb(worker_, 0, 0, 1, &info);
    if (msg == nullptr) return;
    sink.resize(std::max<size_t>(sink.size(), info.length));
    ucp_request_param_t param = receiveParam(info, ucp_dt_make_contig(1));
    void* req = api_.tagMsgRecvNbx(worker_, sink.data(), info.length, msg, &param);
    while (settle(req) == UCS_INPROGRESS && !until.expired()) progressAll();
    if (req != nullptr) {
      api_.requestFree(req);
      return;
    }
  }
}

}  // namespace vigil::ucx
