// Tagged point-to-point (vigilSendTag, vigilRecvTag, vigilProbe): messages
// matched by (source, tag) under MPI's rules, over the same ordered lanes as
// every other message.
//
// A tagged message travels like an untagged one (FrameKind::Tagged, its tag
// in the header's root field). A receive does not know in advance which
// message comes next from a peer, so its transfer carries a sink: the
// message's header decides where its payload lands - in the buffer of the
// first receive of the batch that it matches, or, when none does, in a
// message kept by this rank (unexpected_) until a later receive or probe
// asks for it. Every receive looks there first. Messages from one sender are
// taken in the order it sent them, so none overtakes another of the same
// (source, tag). A receive from any source waits for the first header from
// any peer (Transport::awaitIncoming), the peers looked at in turn.

#include <algorithm>
#include <cstring>

#include "comm/tagged_sink.hpp"

namespace vigil {

using namespace tagged;

std::optional<Error> Communicator::misfit(const OpDesc& r, int source, const FrameHeader& got) const {
  const size_t capacity = r.count * dtypeSize(r.dtype);
  if (got.dtype == static_cast<uint8_t>(r.dtype) && got.bytes <= capacity) return std::nullopt;
  ErrorBuilder b = error(Errc::OpSizeMismatch).op("recv").peer(source);
  if (got.dtype != static_cast<uint8_t>(r.dtype)) {
    b.cause(faults_.rankLabel(source), "'s ", describeMessage(got), " matched this rank's ", describeRecv(r, faults_),
            ", but their data types differ");
    b.remedy("receive with the data type ", faults_.rankLabel(source), " sends with (or send with the receive's)");
  } else {
    b.cause(faults_.rankLabel(source), "'s ", describeMessage(got), " holds ", got.bytes,
            " bytes, more than this rank's ", describeRecv(r, faults_), " can take (", capacity,
            " bytes); nothing was written");
    b.remedy("post the receive with a count at least the sender's (vigilProbe gives the size before the receive)");
  }
  return b.build();
}

std::vector<int> Communicator::othersFrom(int first) const {
  std::vector<int> peers;
  peers.reserve(allPeers_.size());
  for (int i = 0; i < nranks_; ++i) {
    const int p = (first + i) % nranks_;
    if (p != rank_) peers.push_back(p);
  }
  return peers;
}

std::pair<int, std::deque<Communicator::Unexpected>::iterator> Communicator::findKept(int source, int tag) {
  // The first matching message of each sender; of those, the one that came first.
  int from = -1;
  std::deque<Unexpected>::iterator found;
  for (int p = 0; p < nranks_; ++p) {
    if (!sourceMatches(source, p)) continue;
    auto& q = unexpected_[static_cast<size_t>(p)];
    auto it = std::find_if(q.begin(), q.end(), [&](const Unexpected& u) { return tagMatches(tag, u.header.root); });
    if (it != q.end() && (from < 0 || it->arrival < found->arrival)) {
      from = p;
      found = it;
    }
  }
  return {from, found};
}

void Communicator::matchQueued(std::span<TaggedRecv> recvs) {
  for (TaggedRecv& r : recvs) {
    if (r.done) continue;
    const auto [source, kept] = findKept(r.op->peer, r.op->tag);
    if (source < 0) continue;
    if (std::optional<Error> e = misfit(*r.op, source, kept->header)) throw poisonWith(*e, true);
    if (!kept->payload.empty()) std::memcpy(r.op->recv, kept->payload.data(), kept->payload.size());
    setStatus(*r.op, source, kept->header);
    r.done = true;
    unexpected_[static_cast<size_t>(source)].erase(kept);
  }
}

void Communicator::exchangeTagged(std::span<const Transfer> transfers, std::span<TaggedSink> sinks,
                                  ExchangeWork* work) {
  const ExchangeFault fault =
      transport_->exchange(transfers, op_.header, config_.fingerprint, op_.deadline, *this, work);
  if (fault.kind == ExchangeFault::Kind::None) return;
  for (const TaggedSink& sink : sinks) {
    if (sink.error()) throw poisonWith(*sink.error(), true);  // the sender hears it too
  }
  failOp(fault);
}

void Communicator::runTaggedBatch(std::span<const OpDesc> ops, ExchangeWork* work) {
  copyToSelf(ops);  // untagged pairs
  std::vector<TaggedRecv> recvs;
  for (const OpDesc& op : ops) {
    if (!op.tagged) continue;
    if (op.kind == OpKind::Recv) {
      recvs.push_back({&op});
    } else if (op.peer == rank_) {  // kept until received, as a message that came early
      FrameHeader h = headerFor(op, static_cast<int64_t>(taggedSendSeq_[static_cast<size_t>(rank_)]++));
      const auto* data = static_cast<const uint8_t*>(op.send);
      unexpected_[static_cast<size_t>(rank_)].push_back(
          {h, std::vector<uint8_t>(data, data + op.count * dtypeSize(op.dtype)), ++arrivals_});
    }
  }
  matchQueued(recvs);
  for (const TaggedRecv& r : recvs) {
    if (!r.done && r.op->peer == rank_) {
      error(Errc::ApiBadTag)
          .op("recv")
          .cause("a ", describeRecv(*r.op, faults_), " of this rank itself (", rank_,
                 "), but no tagged send of this rank to itself, in this call or before it, matches: it could never "
                 "complete")
          .remedy("send to yourself (vigilSendTag) before or beside the receive, with a matching tag")
          .raise();
    }
  }

  // One transfer per message sent, and one receive transfer (a sink) per peer
  // that a receive still waits for: its next message, whichever it is.
  std::vector<FrameHeader> headers;
  std::vector<Transfer> transfers;
  std::vector<TaggedSink> sinks;
  std::vector<int> sendPeers;
  std::vector<uint64_t> taggedSent(static_cast<size_t>(nranks_));
  headers.reserve(ops.size());
  transfers.reserve(ops.size());
  sinks.reserve(ops.size());
  // A receive transfer for `peer`'s next message, once per peer and exchange.
  auto addSink = [&](int peer) {
    if (std::any_of(sinks.begin(), sinks.end(), [peer](const TaggedSink& s) { return s.peer() == peer; })) return;
    sinks.emplace_back(*this, peer, recvs);
    transfers.push_back(Transfer::recvInto(peer, &sinks.back()));
  };
  for (const OpDesc& op : ops) {
    if (op.peer == rank_) continue;
    const auto p = static_cast<size_t>(op.peer);
    const bool isSend = op.kind == OpKind::Send;
    if (op.tagged && !isSend) {
      // In issue order among the peer's other messages of the batch.
      if (std::any_of(recvs.begin(), recvs.end(),
                      [&](const TaggedRecv& r) { return !r.done && r.op->peer == op.peer; }))
        addSink(op.peer);
      continue;
    }
    const uint64_t seq = op.tagged ? taggedSendSeq_[p] + taggedSent[p]++ : (isSend ? sendSeq_[p] : recvSeq_[p]);
    headers.push_back(headerFor(op, static_cast<int64_t>(seq)));
    transfers.push_back(transferOf(op, headers.back()));
    if (isSend) sendPeers.push_back(op.peer);
  }
  if (transfers.empty()) return;  // everything matched here

  const OpDesc& first = ops.front();
  beginOp(headers.empty() ? headerFor(first, 0) : headers.front(),
          ops.size() == 1 ? cat(opName(first.kind), " (", tagText(first.tag), ")")
                          : cat("group of ", ops.size(), " send/recv"),
          /*watchPeers=*/false);
  checkPeersBeforeStart(sendPeers, -1);
  for (const OpDesc& op : ops) {
    if (op.peer == rank_ || (op.tagged && op.kind == OpKind::Recv)) continue;
    const auto p = static_cast<size_t>(op.peer);
    if (!op.tagged) ++(op.kind == OpKind::Send ? sendSeq_ : recvSeq_)[p];
  }
  for (size_t p = 0; p < taggedSent.size(); ++p) taggedSendSeq_[p] += taggedSent[p];
  exchangeTagged(transfers, sinks, work);

  // Receives whose peer's next message was for another receive (or none of
  // this batch): the kept messages first, then the peers' next ones.
  while (true) {
    matchQueued(recvs);
    sinks.clear();
    transfers.clear();
    for (const TaggedRecv& r : recvs) {
      if (!r.done) addSink(r.op->peer);
    }
    if (transfers.empty()) return;
    exchangeTagged(transfers, sinks, nullptr);
  }
}

void Communicator::runAnySourceRecv(const OpDesc& op) {
  TaggedRecv r{&op};
  matchQueued(std::span(&r, 1));
  if (r.done) return;
  if (nranks_ == 1) {
    error(Errc::ApiBadTag)
        .op("recv")
        .cause("a ", describeRecv(op, faults_),
               " on a communicator of one rank, and no message of this rank to itself "
               "matches: it could never complete")
        .remedy("send to yourself (vigilSendTag) before the receive, or receive on a communicator with peers")
        .raise();
  }
  beginOp(headerFor(op, 0), cat("recv (any source, ", tagText(op.tag), ")"), /*watchPeers=*/false);
  std::vector<int> candidates = othersFrom(anySourceStart_);
  while (!r.done) {
    const int from = awaitAnyOf(candidates);
    anySourceStart_ = (from + 1) % nranks_;  // the next wait looks at the others first
    receiveNext(from, std::span(&r, 1));
  }
}

int Communicator::awaitAnyOf(std::vector<int>& candidates) {
  while (true) {
    int from = -1;
    const ExchangeFault fault = transport_->awaitIncoming(candidates, op_.deadline, *this, from);
    if (fault.kind == ExchangeFault::Kind::None) return from;
    if (fault.kind == ExchangeFault::Kind::Woken) return -1;  // a request wait (wakeable_) gives its wait back
    // A sender that left the communicator (vigilCommDestroy, finalize) after
    // its last message is out of the wait; the others may still send.
    const bool gone = fault.kind == ExchangeFault::Kind::PeerClosed || fault.kind == ExchangeFault::Kind::PeerGone;
    if (gone && candidates.size() > 1 && fault.peer >= 0) {
      const PeerState s = fault.kind == ExchangeFault::Kind::PeerClosed
                              ? control_.waitVerdict(fault.peer, Deadline::afterMs(FaultReporter::kVerdictWaitMs))
                              : control_.peer(fault.peer);
      if (s.status == PeerState::Status::Left && !transport_->unreceived(fault.peer)) {
        candidates.erase(std::find(candidates.begin(), candidates.end(), fault.peer));
        continue;
      }
    }
    failOp(fault);
  }
}

void Communicator::receiveNext(int from, std::span<TaggedRecv> recvs) {
  TaggedSink sink(*this, from, recvs);
  const Transfer t = Transfer::recvInto(from, &sink);
  exchangeTagged(std::span(&t, 1), std::span(&sink, 1), nullptr);
}

void Communicator::checkKeptAtFinalize() {
  for (int p = 0; p < nranks_; ++p) {
    const auto& kept = unexpected_[static_cast<size_t>(p)];
    if (kept.empty()) continue;
    Error e =
        error(Errc::OpUnreceived)
            .op("finalize")
            .cause(p == rank_ ? std::string("this rank") : faults_.describePeer(p), " sent ",
                   FaultReporter::describeUnreceived(kept.front().header), " to this rank, which never received it",
                   kept.size() > 1 ? cat(" (and ", kept.size() - 1, " more tagged message(s))") : std::string())
            .remedy("post a tagged receive (vigilRecvTag) for every tagged send, with its source and tag")
            .build();
    throw poisonWith(e, p != rank_);
  }
}

bool Communicator::probe(int peer, int tag, bool wait, vigilStatus* status) {
  const char* label = wait ? "probe" : "iprobe";
  if (tag < 0 && tag != VIGIL_ANY_TAG)
    error(Errc::ApiBadTag).op(label).cause("tag ", tag, " is negative and not VIGIL_ANY_TAG").raise();
  if (peer != VIGIL_ANY_SOURCE && (peer < 0 || peer >= nranks_))
    error(Errc::ApiBadPeer)
        .op(label)
        .cause("peer ", peer, " is outside [0, ", nranks_, ") and not VIGIL_ANY_SOURCE")
        .raise();
  std::lock_guard lock(opMutex_);
  checkUsable();
  if (const auto [source, kept] = findKept(peer, tag); source >= 0) {
    if (status != nullptr) *status = vigilStatus{source, kept->header.root, kept->header.count, kept->header.bytes};
    return true;
  }
  std::vector<int> candidates = peer == VIGIL_ANY_SOURCE ? othersFrom(anySourceStart_) : std::vector<int>{};
  if (peer != VIGIL_ANY_SOURCE && peer != rank_) candidates.push_back(peer);
  FrameHeader h;
  h.kind = static_cast<uint8_t>(FrameKind::Tagged);
  beginOp(h,
          cat(label, " (", peer == VIGIL_ANY_SOURCE ? std::string("any source") : faults_.rankLabel(peer), ", ",
              tagText(tag), ")"),
          /*watchPeers=*/false);
  try {
    while (true) {
      if (candidates.empty()) {
        if (!wait) return false;
        error(Errc::ApiBadTag)
            .op(label)
            .cause("no message that a tagged receive from ",
                   peer == VIGIL_ANY_SOURCE ? std::string("any source") : faults_.rankLabel(peer), " with ",
                   tagText(tag), " would take can come: ",
                   peer == rank_ ? "this rank sent none to itself"
                                 : "the next message of every such sender is untagged (vigilSend)")
            .remedy("probe for messages that are sent; receive untagged ones with vigilRecv first")
            .raise();
      }
      int from = -1;
      if (wait) {
        from = awaitAnyOf(candidates);
      } else {
        for (int p : candidates) {
          if (transport_->unreceived(p)) {
            from = p;
            break;
          }
        }
        if (from < 0) return false;
      }
      const FrameHeader next = *transport_->unreceived(from);
      if (next.kind != static_cast<uint8_t>(FrameKind::Tagged)) {
        // A tagged probe cannot look past an untagged message: that sender is out of it.
        candidates.erase(std::find(candidates.begin(), candidates.end(), from));
        continue;
      }
      if (tagMatches(tag, next.root)) {
        if (status != nullptr) *status = vigilStatus{from, next.root, next.count, next.bytes};
        if (peer == VIGIL_ANY_SOURCE) anySourceStart_ = (from + 1) % nranks_;
        return true;
      }
      receiveNext(from, {});  // not this one: kept, and the sender's next one is looked at
    }
  } catch (const Error& e) {
    dumpAfterFailure(e);
    throw;
  }
}

}  // namespace vigil
