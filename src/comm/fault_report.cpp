// Turning what the transport saw into an error a person can act on: which
// rank, which op and sequence number, which peer, what happened, what to do.

#include "comm/fault_report.hpp"

#include <cctype>

#include "algo/select.hpp"
#include "core/dtype.hpp"
#include "core/log.hpp"

namespace vigil {
namespace {

constexpr int kProgressQueryMs = 1000;
constexpr int kRootCauseWaitMs = 500;

bool isP2p(const FrameHeader& h) {
  return h.kind == static_cast<uint8_t>(FrameKind::PointToPoint);
}
bool hasRedOp(const FrameHeader& h) {
  const auto op = static_cast<OpKind>(h.op);
  return !isP2p(h) && opHasRedOp(op);
}
bool hasRoot(const FrameHeader& h) {
  const auto op = static_cast<OpKind>(h.op);
  return !isP2p(h) && opHasRoot(op);
}

bool hasCountsDigest(const FrameHeader& h) {
  const auto op = static_cast<OpKind>(h.op);
  return !isP2p(h) && (op == OpKind::AllGatherV || op == OpKind::ReduceScatterV);
}

// `receiving`: a point-to-point header as the receive that expects it.
std::string describeHeader(const FrameHeader& h, bool receiving = false) {
  std::string text = isP2p(h) ? cat(receiving ? "receive #" : "send #", h.seq)
                     : h.kind == static_cast<uint8_t>(FrameKind::Tagged)
                         ? cat("tagged send #", h.seq, " (tag ", h.root, ")")
                         : cat(opName(static_cast<OpKind>(h.op)), " seq ", h.seq);
  text += cat(" (", dtypeName(static_cast<vigilDataType_t>(h.dtype)), ", count ", h.count);
  if (hasRedOp(h)) text += cat(", ", redOpName(static_cast<vigilRedOp_t>(h.redop)));
  if (hasRoot(h)) text += cat(", root ", h.root);
  if (hasCountsDigest(h)) text += cat(", counts digest ", h.root);
  text += ")";
  return text;
}

// Only the fields both operations have: a broadcast has no reduction, an
// allreduce no root.
std::string differingFields(const FrameHeader& mine, const FrameHeader& theirs) {
  std::string out;
  auto add = [&](const char* field, const std::string& a, const std::string& b) {
    out += cat(out.empty() ? "" : ", ", field, " ", a, " vs ", b);
  };
  if (mine.kind != theirs.kind) {
    add("kind", isP2p(mine) ? "point-to-point" : "collective", isP2p(theirs) ? "point-to-point" : "collective");
  } else if (mine.op != theirs.op) {
    add("op", opName(static_cast<OpKind>(mine.op)), opName(static_cast<OpKind>(theirs.op)));
  }
  if (mine.seq != theirs.seq) add("seq", std::to_string(mine.seq), std::to_string(theirs.seq));
  if (mine.dtype != theirs.dtype) {
    add("dtype", dtypeName(static_cast<vigilDataType_t>(mine.dtype)),
        dtypeName(static_cast<vigilDataType_t>(theirs.dtype)));
  }
  if (mine.count != theirs.count) add("count", std::to_string(mine.count), std::to_string(theirs.count));
  if (hasRedOp(mine) && hasRedOp(theirs) && mine.redop != theirs.redop) {
    add("redop", redOpName(static_cast<vigilRedOp_t>(mine.redop)), redOpName(static_cast<vigilRedOp_t>(theirs.redop)));
  }
  if (hasRoot(mine) && hasRoot(theirs) && mine.root != theirs.root) {
    add("root", std::to_string(mine.root), std::to_string(theirs.root));
  }
  if (hasCountsDigest(mine) && hasCountsDigest(theirs) && mine.root != theirs.root) {
    add("counts (digest of recvcounts)", std::to_string(mine.root), std::to_string(theirs.root));
  }
  // Same call, different VIGIL_ALGO: name it only when nothing else differs.
  if (out.empty() && mine.algo != theirs.algo) {
    add("algorithm (VIGIL_ALGO)", algo::algoName(static_cast<algo::Algo>(mine.algo)),
        algo::algoName(static_cast<algo::Algo>(theirs.algo)));
  }
  // Message sizes differ as a consequence when the ops differ; name them only alone.
  if (out.empty() && mine.bytes != theirs.bytes) {
    add("message bytes", std::to_string(mine.bytes), std::to_string(theirs.bytes));
  }
  return out;
}

// A relayed mismatch keeps the id it was raised with (a size mismatch stays
// VG-OP-003 however many ranks relay it).
Errc relayedMismatchErrc(const Error& relayed) {
  return relayed.errc() == Errc::OpSizeMismatch ? Errc::OpSizeMismatch : Errc::OpMismatch;
}

}  // namespace

void FaultReporter::serve(const std::string& outerName, std::vector<int> outerRanks) {
  outerName_ = outerName;
  outerRanks_ = std::move(outerRanks);
}

std::string FaultReporter::describePeer(int peer) const {
  const PeerInfo& p = peers_[static_cast<size_t>(peer)];
  return cat(rankLabel(peer), " (host ", p.hostname, ", pid ", p.pid, ")");
}

std::string FaultReporter::rankLabel(int peer) const {
  return cat("rank ", rankNumber(peer));
}

std::string FaultReporter::rankNumber(int peer) const {
  if (outerRanks_.empty()) return std::to_string(peer);
  return cat(peer, " (rank ", outerRanks_[static_cast<size_t>(peer)], " of '", outerName_, "')");
}

std::string FaultReporter::rankLabels(const std::vector<int>& peers) const {
  if (outerRanks_.empty()) return joinRanks(peers);
  std::string out;
  for (int p : peers) out += cat(out.empty() ? "" : ", ", rankNumber(p));
  return out;
}

Error FaultReporter::peerGone(int peer, const PeerState& s, const OpState& op) const {
  const int64_t seq = static_cast<int64_t>(op.header.seq);
  const std::string opLabel = op.label.empty() ? std::string("operation") : op.label;
  const bool collective = op.collective();
  auto afterLast = [&] {
    return s.lastSeq > 0 ? cat("after completing collective seq ", s.lastSeq)
                         : std::string("before completing any collective");
  };
  ErrorBuilder b = error(Errc::PeerDied);
  b.op(opLabel, collective ? seq : -1);
  switch (s.status) {
    case PeerState::Status::Left: {
      // A peer that left because of another failure quotes it: that one is
      // the root cause, and its remedy is the one that helps.
      const std::optional<Error>& quoted = s.byeError;
      // A mismatch stays a mismatch however many ranks relay it.
      const bool mismatch = quoted && quoted->result() == vigilMismatch;
      b = error(mismatch ? relayedMismatchErrc(*quoted) : Errc::PeerLeft);
      if (mismatch) b.result(vigilMismatch);
      if (s.byeReason == ByeReason::ProcessError && !quoted) {
        // Not a vigil failure: the program died of its own error.
        b.op(opLabel, collective ? seq : -1)
            .cause(describePeer(peer), " left the communicator: its process is ending because of an uncaught error (",
                   s.processError.empty() ? std::string("no description") : s.processError, ") ", afterLast(),
                   "; this rank still needs it")
            .remedy("see the output of ", rankLabel(peer),
                    " for that error (its traceback), fix it and restart the job");
        break;
      }
      b.op(opLabel, collective ? seq : -1)
          .cause(describePeer(peer), " left the communicator (", describe(s.byeReason), ") ", afterLast(),
                 "; this rank still needs it",
                 quoted ? cat(". It had failed before leaving: ", quoted->head()) : std::string());
      if (quoted) b.remedy(quoted->remedy());
      break;
    }
    case PeerState::Status::Failed: {
      // A peer's mismatch verdict is everyone's: keep its result and id, and
      // its remedy, which is about the root cause.
      const Error& reported = *s.failure;
      const bool mismatch = reported.result() == vigilMismatch;
      b = error(mismatch ? relayedMismatchErrc(reported) : Errc::PeerAborted);
      b.op(opLabel, collective ? seq : -1)
          .result(mismatch ? vigilMismatch : vigilRemoteError)
          .cause(describePeer(peer), " stopped the communicator and reported: ", reported.head())
          .remedy(reported.remedy());
      break;
    }
    case PeerState::Status::Alive:
      if (s.finalizing) {
        b = error(Errc::PeerLeft);
        b.op(opLabel, collective ? seq : -1)
            .cause(describePeer(peer), " called vigilCommFinalize ", afterLast(),
                   " and waits there for the others; it will not join this ", opLabel,
                   collective ? cat(" (seq ", seq, ")") : std::string(), ", which this rank still needs it for");
        break;
      }
      [[fallthrough]];
    case PeerState::Status::Died:
      b.cause(describePeer(peer),
              " closed its connection without saying goodbye: its process exited, crashed or was killed "
              "(kill -9, OOM killer), or its host became unreachable");
      break;
  }
  return b.peer(peer).build();
}

Error FaultReporter::mismatch(int peer, const FrameHeader& mine, const FrameHeader& theirs) const {
  const bool collective = !isP2p(mine);
  if (!collective && isP2p(theirs) && mine.seq == theirs.seq) {
    // The matched send and receive of one pair disagree on the message:
    // only the receiver sees both headers, and it names both ends.
    const std::string differing = differingFields(mine, theirs);
    return error(Errc::OpSizeMismatch)
        .op("recv")
        .peer(peer)
        .cause("this rank's ", describeHeader(mine, true), " from ", rankLabel(peer), " expects ", mine.bytes,
               " bytes, but ", describePeer(peer), " sent its ", describeHeader(theirs), " of ", theirs.bytes,
               " bytes; differing: ", differing)
        .remedy("make the receive's count and data type on rank ", rank_, " equal to those of the matching send on ",
                rankLabel(peer), " (sends and receives between two ranks match in the order they are issued)")
        .build();
  }
  const bool sizeOnly = mine.sameOp(theirs) && mine.bytes != theirs.bytes;
  ErrorBuilder b = error(sizeOnly ? Errc::OpSizeMismatch : Errc::OpMismatch);
  b.peer(peer);
  // Also built on the control thread: describe the op from its header.
  b.op(collective ? opName(static_cast<OpKind>(mine.op)) : "send/recv",
       collective ? static_cast<int64_t>(mine.seq) : -1);
  if (sizeOnly) {
    b.cause(describePeer(peer), " sent a message of ", theirs.bytes, " bytes where this rank expects ", mine.bytes,
            " bytes (this rank: ", describeHeader(mine), "; rank ", peer, ": ", describeHeader(theirs), ")");
  } else {
    b.cause("ranks called different operations: this rank (", rank_, ") runs ", describeHeader(mine, !collective), ", ",
            describePeer(peer), " runs ", describeHeader(theirs), "; differing: ", differingFields(mine, theirs));
  }
  return b.build();
}

std::string FaultReporter::describeUnreceived(const FrameHeader& h) {
  if (!isP2p(h)) return cat("a message of ", describeHeader(h));
  return cat("its ", describeHeader(h), ", after collective seq ", h.sentAfterSeq, ",");
}

std::string FaultReporter::describeWhereOthersAre(const ExchangeFault& f, int64_t seq) {
  // Collectives need everyone: ask every peer. Point-to-point: the ones we wait on.
  std::vector<int> asked;
  if (seq >= 0) {
    asked.assign(allPeers_.begin(), allPeers_.end());
  } else {
    for (const auto& p : f.pending) asked.push_back(p.peer);
  }
  std::vector<std::optional<ProgressReport>> reports =
      control_.queryProgress(asked, Deadline::afterMs(kProgressQueryMs));
  std::vector<int> sameSeq, silent;
  std::string behind;
  for (size_t i = 0; i < asked.size(); ++i) {
    const int p = asked[i];
    if (!reports[i]) {
      silent.push_back(p);
      continue;
    }
    const ProgressReport& r = *reports[i];
    if (seq >= 0 && r.currentSeq == seq) {
      sameSeq.push_back(p);
    } else if (seq >= 0 && r.lastCompletedSeq < seq) {
      behind += cat(behind.empty() ? "" : "; ", "rank ", p, " is alive, last completed seq ", r.lastCompletedSeq,
                    r.currentSeq >= 0
                        ? cat(", is still in seq ", r.currentSeq, " (", opName(static_cast<OpKind>(r.currentOp)), ")")
                        : std::string(),
                    ", has not entered seq ", seq);
    } else if (seq < 0) {
      behind += cat(behind.empty() ? "" : "; ", "rank ", p, " is alive, last completed collective seq ",
                    r.lastCompletedSeq, r.currentSeq >= 0 ? cat(", now in seq ", r.currentSeq) : std::string(),
                    ", and has not sent or received the matching message");
    }
  }
  std::string out = behind;
  if (!silent.empty()) {
    out += cat(out.empty() ? "" : "; ", silent.size() == 1 ? "rank " : "ranks ", rankLabels(silent),
               silent.size() == 1 ? " is" : " are", " unresponsive: no answer within ", kProgressQueryMs / 1000.0,
               " s (stopped with SIGSTOP or a debugger, hung, or on a host this one cannot reach)");
  }
  if (!sameSeq.empty()) {
    out += cat(out.empty() ? "" : "; ", sameSeq.size() == 1 ? "rank " : "ranks ", joinRanks(sameSeq),
               sameSeq.size() == 1 ? " is" : " are", " in seq ", seq, " too, waiting like this rank");
  }
  return out.empty() ? std::string("every peer answered and none is behind") : out;
}

int FaultReporter::rootCauseFor(int peer, int64_t seq) const {
  PeerState s = control_.peer(peer);
  if (!s.leftBecauseOfAnother()) return peer;
  // It left because another rank failed: name that one if we know it.
  std::vector<int> gone = gonePeersByCause(seq);
  return gone.empty() ? peer : gone.front();
}

FaultReporter::Verdict FaultReporter::judge(const ExchangeFault& f, const OpState& op) {
  const int64_t seq = op.collectiveSeq();
  using Kind = ExchangeFault::Kind;
  switch (f.kind) {
    case Kind::None:
    case Kind::Woken:         // not a failure: the request wait handles it (Communicator::awaitAnyOf)
    case Kind::Fatal: break;  // the lifecycle's (Communicator::failOp)
    case Kind::PeerGone: {
      const int blamed = rootCauseFor(f.peer, seq);
      const PeerState state = control_.peer(blamed);
      Error e = peerGone(blamed, state, op);
      // A finalizing peer still listens: it learns why its finalize cannot complete.
      return {e, state.finalizing};
    }
    case Kind::PeerClosed: {
      // The data socket closed first; the control plane knows why (goodbye or not).
      PeerState s = control_.waitVerdict(f.peer, Deadline::afterMs(kVerdictWaitMs));
      const int blamed = rootCauseFor(f.peer, seq);
      Error e = peerGone(blamed, blamed == f.peer ? s : control_.peer(blamed), op);
      return {e, false};
    }
    case Kind::HeaderMismatch: {
      Error e = mismatch(f.peer, f.expected, f.received);
      return {e, true};
    }
    case Kind::Protocol: {
      Error e = error(Errc::PeerProtocol)
                    .op(op.label, seq)
                    .peer(f.peer)
                    .cause(describePeer(f.peer), " sent a data frame without vigil's frame magic (got 0x", std::hex,
                           f.received.magic, std::dec, ")")
                    .build();
      return {e, true};
    }
    case Kind::TimedOut: {
      std::string waits;
      for (const auto& p : f.pending) {
        waits += cat(waits.empty() ? "" : "; ", p.isSend ? "sending to " : "receiving from ", rankLabel(p.peer), " (",
                     p.bytesLeft, " bytes left)");
      }
      const double waited = secondsSince(op.start);
      std::string where = describeWhereOthersAre(f, seq);
      where[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(where[0])));
      // The peer it waits for, when it waits for one only.
      int waitedFor = f.pending.empty() ? -1 : f.pending.front().peer;
      for (const auto& p : f.pending) waitedFor = p.peer == waitedFor ? waitedFor : -1;
      Error e = error(Errc::OpTimeout)
                    .op(op.label, seq)
                    .peer(waitedFor)
                    .cause("timed out: ran ", cat(waited).substr(0, 5), " s on rank ", rank_, ", past the timeout of ",
                           config_.timeoutMs, " ms (", config_.timeoutSource, "); still ", waits, ". ", where)
                    .build();
      return {e, true};  // then every peer stops too: the communicator is aborted
    }
    case Kind::IoError: {
      Error e = error(f.ioErrc)
                    .op(op.label, seq)
                    .peer(f.peer)
                    .cause(f.detail.empty() ? "socket I/O" : "I/O", " with ",
                           f.peer >= 0 ? describePeer(f.peer) : std::string("peers"),
                           " failed: ", f.detail.empty() ? errnoText(f.err) : f.detail)
                    .build();
      return {e, true};
    }
  }
  return {error(Errc::Internal).op(op.label, seq).cause("judge called without a fault").build(), false};
}

std::vector<int> FaultReporter::gonePeersByCause(int64_t seq) const {
  std::vector<int> out = collectGonePeers(seq);
  if (!out.empty()) {
    PeerState first = control_.peer(out.front());
    if (first.leftBecauseOfAnother()) {
      // Only ranks that left because of someone else are known yet: the
      // news of that someone is on its way (it was sent first). Wait for it
      // briefly, so the report names the root cause, not a bystander.
      if (control_.waitRootCause(Deadline::afterMs(kRootCauseWaitMs))) out = collectGonePeers(seq);
    }
  }
  return out;
}

std::vector<int> FaultReporter::collectGonePeers(int64_t seq) const {
  std::vector<int> out;
  std::vector<int> cascade;                 // they left because of someone else: blame them last
  for (int p : control_.peersNotAlive()) {  // earliest first
    PeerState s = control_.peer(p);
    if (s.status == PeerState::Status::Left && seq >= 0 && s.lastSeq >= seq) continue;  // it finished this op
    if (s.status == PeerState::Status::Alive && s.finalizing && seq >= 0 && s.lastSeq >= seq) continue;
    const bool followed = s.leftBecauseOfAnother();
    (followed ? cascade : out).push_back(p);
  }
  out.insert(out.end(), cascade.begin(), cascade.end());
  return out;
}

}  // namespace vigil
