// Non-blocking tagged point-to-point (vigilIsendTag, vigilIrecvTag,
// vigilWait, vigilWaitAny, vigilTest).
//
// Any thread posts a request: it joins posted_ and the wake fd fires, so a
// wait in progress on another thread takes it in. Waits run one at a time
// (opMutex_) and each progresses every pending request of the communicator
// in rounds. A round sends every pending send and, meanwhile, drains the
// peers that pending receives name (Transfer::drainFrom): each message that
// comes fills the first pending receive it matches, in posting order, or is
// kept for a later one, so two ranks that both send and receive never wait
// on each other, whatever the sizes. With no send pending, a round waits
// (Transport::awaitIncoming) for the first message from one of those peers,
// or for a post, or for the deadline. Matching, fingerprints and size checks
// are the blocking calls' (comm/tagged.cpp).

#include <algorithm>
#include <cstring>

#include "comm/tagged_sink.hpp"

namespace vigil {

using tagged::describeRecv;
using tagged::tagText;

std::shared_ptr<Request> Communicator::post(const OpDesc& op) {
  validate(op);
  checkUsable();
  auto request = std::make_shared<Request>(op);
  request->recordId = recordEnqueued(op, "request");
  EventFd* wake;
  {
    std::lock_guard lock(postMutex_);
    if (wake_.load() == nullptr) {
      wakeOwner_ = std::make_unique<EventFd>();
      wake_.store(wakeOwner_.get());
    }
    wake = wake_.load();
    posted_.push_back(request);
  }
  requestsInUse_.store(true, std::memory_order_relaxed);
  wake->signal();
  transport_->wakeWaiters();  // shared memory sleeps on its doorbell, which then polls the wake fd
  return request;
}

void Communicator::completeRequest(Request& r) {
  recorder_.completed(r.recordId);
  r.done.store(true, std::memory_order_release);
}

void Communicator::absorbPosted() {
  std::vector<std::shared_ptr<Request>> fresh;
  {
    std::lock_guard lock(postMutex_);
    if (posted_.empty()) return;
    fresh.swap(posted_);
    wake_.load()->clear();  // a post after this signals again
  }
  for (std::shared_ptr<Request>& r : fresh) {
    recorder_.started(r->recordId);
    const OpDesc& op = r->op;
    if (op.kind == OpKind::Send && op.peer == rank_) {  // kept until received, as a message that came early
      const FrameHeader h = headerFor(op, static_cast<int64_t>(taggedSendSeq_[static_cast<size_t>(rank_)]++));
      const auto* data = static_cast<const uint8_t*>(op.send);
      unexpected_[static_cast<size_t>(rank_)].push_back(
          {h, std::vector<uint8_t>(data, data + op.count * dtypeSize(op.dtype)), ++arrivals_});
      completeRequest(*r);
      continue;
    }
    (op.kind == OpKind::Send ? pendingSends_ : pendingRecvs_).push_back(std::move(r));
  }
}

void Communicator::matchPendingRecvs() {
  if (pendingRecvs_.empty()) return;
  std::vector<TaggedRecv> recvs;
  recvs.reserve(pendingRecvs_.size());
  for (const auto& r : pendingRecvs_) recvs.push_back({&r->op});
  matchQueued(recvs);
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (recvs[i].done) completeRequest(*pendingRecvs_[i]);
  }
  std::erase_if(pendingRecvs_, [](const auto& r) { return r->done.load(std::memory_order_relaxed); });
}

std::vector<int> Communicator::drainPeers() const {
  std::vector<char> named(static_cast<size_t>(nranks_));
  for (const auto& r : pendingRecvs_) {
    if (r->op.peer == VIGIL_ANY_SOURCE) {
      std::fill(named.begin(), named.end(), 1);
      break;
    }
    named[static_cast<size_t>(r->op.peer)] = 1;
  }
  named[static_cast<size_t>(rank_)] = 0;  // this rank's own messages are kept at the post
  std::vector<int> peers;
  for (int p = 0; p < nranks_; ++p) {
    if (named[static_cast<size_t>(p)]) peers.push_back(p);
  }
  return peers;
}

void Communicator::requestRound() {
  std::vector<TaggedRecv> recvs;
  recvs.reserve(pendingRecvs_.size());
  for (const auto& r : pendingRecvs_) recvs.push_back({&r->op});

  std::vector<FrameHeader> headers;
  std::vector<Transfer> transfers;
  std::vector<int> sendPeers;
  std::vector<uint64_t> sent(static_cast<size_t>(nranks_));
  headers.reserve(pendingSends_.size());
  for (const auto& s : pendingSends_) {
    const auto p = static_cast<size_t>(s->op.peer);
    headers.push_back(headerFor(s->op, static_cast<int64_t>(taggedSendSeq_[p] + sent[p]++)));
    transfers.push_back(transferOf(s->op, headers.back()));
    sendPeers.push_back(s->op.peer);
  }
  const std::vector<int> drained = drainPeers();
  std::vector<TaggedSink> sinks;
  sinks.reserve(drained.size());  // the transfers point at them
  for (int p : drained) {
    sinks.emplace_back(*this, p, recvs);
    transfers.push_back(Transfer::drainFrom(p, &sinks.back()));
  }
  if (transfers.empty()) return;

  FrameHeader header;
  header.kind = static_cast<uint8_t>(FrameKind::Tagged);
  beginOp(headers.empty() ? header : headers.front(),
          cat("wait for requests (", pendingSends_.size(), " send(s), ", pendingRecvs_.size(), " receive(s))"),
          /*watchPeers=*/false);
  checkPeersBeforeStart(sendPeers, -1);
  for (size_t p = 0; p < sent.size(); ++p) taggedSendSeq_[p] += sent[p];
  exchangeTagged(transfers, sinks, nullptr);

  for (const auto& s : pendingSends_) completeRequest(*s);
  pendingSends_.clear();
  for (size_t i = 0; i < recvs.size(); ++i) {
    if (recvs[i].done) completeRequest(*pendingRecvs_[i]);
  }
  std::erase_if(pendingRecvs_, [](const auto& r) { return r->done.load(std::memory_order_relaxed); });
}

int Communicator::waitRequests(std::span<Request* const> reqs, WaitMode mode) {
  const auto doneIndex = [&] {
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (reqs[i]->done.load(std::memory_order_acquire)) return static_cast<int>(i);
    }
    return -1;
  };
  if (const int i = doneIndex(); i >= 0) return i;  // completed in another thread's wait
  std::lock_guard lock(opMutex_);
  try {
    checkUsable();
    while (true) {
      absorbPosted();
      matchPendingRecvs();
      if (const int i = doneIndex(); i >= 0) return i;
      if (!pendingSends_.empty()) {
        requestRound();
        continue;
      }
      // A sender whose next message is untagged (vigilSend, or a collective
      // it went on to) sends nothing that a pending receive takes before
      // this rank takes that message: it is out of this wait.
      const std::vector<int> named = drainPeers();
      std::vector<int> peers = named;
      std::erase_if(peers, [&](int p) {
        const std::optional<FrameHeader> next = transport_->unreceived(p);
        return next && next->kind != static_cast<uint8_t>(FrameKind::Tagged);
      });
      if (mode == WaitMode::Test) {
        if (firstWithMessage(*transport_, peers) < 0) return -1;
        requestRound();
        continue;
      }
      // Only receives wait: for the first message of a peer they name, or a post.
      FrameHeader header;
      header.kind = static_cast<uint8_t>(FrameKind::Tagged);
      beginOp(header, cat("wait for requests (", pendingRecvs_.size(), " receive(s))"), /*watchPeers=*/false);
      if (peers.empty() && !named.empty()) {
        // The wait could never end: the tagged receive of that message says why (VG-OP-002), on both ranks.
        std::vector<TaggedRecv> recvs;
        for (const auto& r : pendingRecvs_) recvs.push_back({&r->op});
        receiveNext(named.front(), recvs);
      }
      wakeable_ = true;
      int from;
      try {
        from = awaitAnyOf(peers);
      } catch (...) {
        wakeable_ = false;
        throw;
      }
      wakeable_ = false;
      if (from >= 0) {
        requestRound();
        continue;
      }
      wake_.load()->clear();  // woken: a request was posted (the next absorbPosted takes it)
      if (mode == WaitMode::WaitAny) return -1;
    }
  } catch (const Error& e) {
    for (const auto* list : {&pendingSends_, &pendingRecvs_}) {
      for (const auto& r : *list) recorder_.failed(r->recordId, e.text());
    }
    dumpAfterFailure(e);
    throw;
  }
}

void Communicator::sendRecvAnySource(const OpDesc& send, const OpDesc& recv) {
  const OpDesc ops[2] = {recv, send};  // the receive first: it takes what comes while the send goes out
  runAsRequests(ops);
}

void Communicator::runAsRequests(std::span<const OpDesc> ops, std::span<const uint64_t> recorded) {
  for (uint64_t id : recorded) recorder_.started(id);
  try {
    std::vector<std::shared_ptr<Request>> reqs;
    reqs.reserve(ops.size());
    for (const OpDesc& op : ops) reqs.push_back(post(op));
    for (const auto& r : reqs) {
      Request* request = r.get();
      waitRequests(std::span(&request, 1), WaitMode::Wait);
    }
    for (size_t i = 0; i < ops.size(); ++i) {
      if (ops[i].kind == OpKind::Recv && ops[i].status != nullptr) *ops[i].status = reqs[i]->status;
    }
  } catch (const Error& e) {
    for (uint64_t id : recorded) recorder_.failed(id, e.text());
    throw;
  }
  for (uint64_t id : recorded) recorder_.completed(id);
}

void Communicator::checkRequestsAtFinalize() {
  absorbPosted();
  if (pendingSends_.empty() && pendingRecvs_.empty()) return;
  const std::shared_ptr<Request> first = !pendingSends_.empty() ? pendingSends_.front() : pendingRecvs_.front();
  const OpDesc& op = first->op;
  const size_t count = pendingSends_.size() + pendingRecvs_.size();
  const std::string what = op.kind == OpKind::Send
                               ? cat("vigilIsendTag to ", faults_.rankLabel(op.peer), " (", tagText(op.tag), ", ",
                                     op.count, " x ", dtypeName(op.dtype), ")")
                               : cat("vigilIrecvTag: a ", describeRecv(op, faults_));
  Error e = error(Errc::OpRequestsPending)
                .op("finalize")
                .cause(count, " request(s) of this rank were not complete at vigilCommFinalize, the first a ", what,
                       ": its buffer was never ", op.kind == OpKind::Send ? "sent" : "filled")
                .build();
  throw poisonWith(e, true);  // the peers' sends or receives that it pairs with cannot complete either
}

}  // namespace vigil
