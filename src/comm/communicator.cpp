// Running operations: sequence numbers, the step
// runner the algorithms drive, and the communicator's lifecycle.

#include "comm/communicator.hpp"

#include <algorithm>
#include <cstring>

#include "comm/hierarchy.hpp"
#include "core/dtype.hpp"
#include "core/log.hpp"

namespace vigil {
namespace {

// After this long without progress a collective cross-checks its fingerprint
// with its neighbour; well inside the 2 s promised for a mismatch report.
constexpr int kStallMs = 200;

}  // namespace

void Communicator::checkUsable() const {
  switch (state_.load()) {
    case State::Active: break;
    case State::Finalized: error(Errc::CommFinalized).cause("the communicator was finalized").raise();
    case State::Destroyed:
    case State::Aborted: error(Errc::ApiUseAfterFree).cause("the communicator was destroyed or aborted").raise();
  }
  std::lock_guard lock(errorMutex_);
  if (fatal_) {
    error(Errc::CommFailed)
        .result(fatal_->result())
        .cause("the communicator failed earlier and cannot run more operations; the first error was: ", fatal_->text())
        .raise();
  }
}

void Communicator::run(const OpDesc& op, uint64_t recordId) {
  validate(op);
  if (op.tagged && requestsInUse_.load(std::memory_order_relaxed)) {  // as in runPointToPoint
    const uint64_t ids[1] = {recordId};
    runAsRequests(std::span(&op, 1), recordId != 0 ? std::span<const uint64_t>(ids) : std::span<const uint64_t>());
    return;
  }
  if (recordId == 0) recordId = recordEnqueued(op, "null");
  std::lock_guard lock(opMutex_);
  try {
    checkUsable();
    currentRecord_ = recordId;
    if (isPointToPoint(op.kind)) {
      recorder_.started(recordId);
      runPointToPointBatch(std::span<const OpDesc>(&op, 1));
      checkSendBuffer(recordId, op, 0, -1);
    } else {
      runCollective(op);
      checkSendBuffer(recordId, op, 0, static_cast<int64_t>(op_.header.seq));
    }
    recorder_.completed(recordId);
  } catch (const Error& e) {
    recorder_.failed(recordId, e.text());
    forgetSendBuffer(recordId);
    dumpAfterFailure(e);
    throw;
  }
}

void Communicator::runPointToPoint(std::span<const OpDesc> ops, std::span<const uint64_t> recorded,
                                   ExchangeWork* work) {
  for (const OpDesc& op : ops) validate(op);
  // Once requests are in use, tagged sends and receives wait as requests too:
  // a blocking send then progresses the pending receives (irecv, then send,
  // on every rank completes at any size, as MPI's progress does).
  if (work == nullptr && requestsInUse_.load(std::memory_order_relaxed) &&
      std::all_of(ops.begin(), ops.end(), [](const OpDesc& op) { return op.tagged; })) {
    runAsRequests(ops, recorded);
    return;
  }
  std::vector<uint64_t> ids(recorded.begin(), recorded.end());
  if (ids.size() != ops.size()) {
    ids.clear();
    for (const OpDesc& op : ops) ids.push_back(recordEnqueued(op, "group"));
  }
  std::lock_guard lock(opMutex_);
  try {
    checkUsable();
    for (uint64_t id : ids) recorder_.started(id);
    runPointToPointBatch(ops, work);
    for (size_t i = 0; i < ops.size(); ++i) checkSendBuffer(ids[i], ops[i], i, -1);
    for (uint64_t id : ids) recorder_.completed(id);
  } catch (const Error& e) {
    for (uint64_t id : ids) {
      recorder_.failed(id, e.text());
      forgetSendBuffer(id);
    }
    dumpAfterFailure(e);
    throw;
  }
}

void Communicator::beginOp(const FrameHeader& header, std::string label, bool watchPeers) {
  const Clock::time_point start = Clock::now();  // one clock read for every deadline of the op
  op_ = OpState{
      .header = header,
      .label = std::move(label),
      .start = start,
      .deadline = Deadline(start + std::chrono::milliseconds(config_.timeoutMs)),
      .stallAt = Deadline(start + std::chrono::milliseconds(kStallMs)),
      .watchPeers = watchPeers,
  };
}

void Communicator::runCollective(const OpDesc& op) {
  const int64_t seq = nextSeq_;
  beginOp(headerFor(op, seq), opName(op.kind), /*watchPeers=*/true);

  checkPeersBeforeStart(allPeers_, seq);
  ++nextSeq_;  // the op is under way: its number is used, whatever happens next
  recorder_.started(currentRecord_, seq);
  inProgressOp_.store(static_cast<uint8_t>(op.kind));
  const int64_t nonFiniteInput = scanInput(op);  // before the op: a receive may overwrite an in-place input
  inProgressSeq_.store(seq);
  struct Leave {
    std::atomic<int64_t>& seq;
    ~Leave() { seq.store(-1); }
  } leave{inProgressSeq_};
  algo::Topology topology = topology_;
  if (op.flat) topology.hierarchical = false;
  const algo::AlgoRow& algorithm = *algo::selectAlgo(op.kind, opBytes(op), topology, algoOverrides_);
  op_.header.algo = static_cast<uint16_t>(algorithm.id);
  if (nranks_ > 1) control_.recordFingerprint(op_.header);
  if (algorithm.needs == algo::Needs::LoadStore) loadStore_->publishFingerprint(op_.header);
  VIGIL_LOG_AT(LogLevel::Trace, rank_, op_.label, " seq ", seq, " count ", op.count, " ", dtypeName(op.dtype));

  if (op.hasRedOp() && op.preMul) {
    algorithm.run(*this, preMultiplied(op));
  } else {
    algorithm.run(*this, op);
  }
  if (algorithm.checksEveryRank) op_.heardFromLeft = op_.heardByRight = true;
  if (nranks_ > 1 && !op_.heardByRight) control_.pushFingerprint(op_.header);
  if (nranks_ > 1 && !op_.heardFromLeft) confirmWithLeftNeighbour();
  completedSeq_.store(seq);  // the data moved consistently, whatever the numbers say
  if (config_.nanCheck) checkNumerics(op, seq, nonFiniteInput);
}

size_t Communicator::opBytes(const OpDesc& op) const {
  // The larger per-rank buffer, as the benchmarks count it.
  const size_t elem = dtypeSize(op.dtype), n = static_cast<size_t>(nranks_);
  switch (op.kind) {
    case OpKind::AllGather:
    case OpKind::Split:
    case OpKind::AllToAll:
    case OpKind::ReduceScatter:
    case OpKind::Gather:
    case OpKind::Scatter: return op.count * n * elem;
    case OpKind::AllGatherV:
    case OpKind::ReduceScatterV: return fingerprintCount(op) * elem;
    default: return op.count * elem;
  }
}

int Communicator::takeStagingBuffer() {
  LoadStoreDomain& p = *loadStore_;
  const int b = p.takeBuffer();
  // Wait until every rank is done with what this buffer held last.
  if (const uint64_t free = p.freeAt(b); free > 0) waitForStep(free);
  return b;
}

uint64_t Communicator::syncStep() {
  LoadStoreDomain& p = *loadStore_;
  const uint64_t step = p.nextStep();
  p.post(step);
  waitForStep(step);
  if (!op_.shmChecked) {
    // Every rank wrote its fingerprint before its first post of the op.
    op_.shmChecked = true;
    op_.heardFromLeft = op_.heardByRight = true;
    const uint64_t mine = op_.header.digest();
    for (int q : allPeers_) {
      if (p.digestOf(q, op_.header.seq) == mine) continue;  // the fast path: no other cache line
      const FrameHeader& theirs = p.fingerprintOf(q, op_.header.seq);
      // A later seq there: that rank finished this op, and checked us in it.
      if (theirs.seq > op_.header.seq) continue;
      if (!theirs.agrees(op_.header, config_.fingerprint))
        throw poisonWith(faults_.mismatch(q, op_.header, theirs), true);
    }
    // The collectives here do not read the byte rings that carry sends: a
    // message sent before this collective and still unread would be lost
    // silently (over sockets this op would read it and see a mismatch).
    for (int q : allPeers_) {
      std::optional<FrameHeader> waiting = transport_->unreceived(q);
      // Collective frames there belong to this op or a later one (a peer
      // that finished this one's shared-memory part may be ahead).
      if (waiting &&
          (waiting->kind == static_cast<uint8_t>(FrameKind::PointToPoint) ||
           waiting->kind == static_cast<uint8_t>(FrameKind::Tagged)) &&
          static_cast<int32_t>(static_cast<uint32_t>(op_.header.seq) - waiting->sentAfterSeq) > 0) {
        throw poisonWith(faults_.mismatch(q, op_.header, *waiting), true);
      }
    }
  }
  return step;
}

void Communicator::releaseStagingBuffer(int buffer, uint64_t lastReadStep) {
  // Each rank reads a buffer before it posts its next step.
  loadStore_->setFreeAt(buffer, lastReadStep + 1);
}

void Communicator::waitForStep(uint64_t step) {
  ExchangeFault fault = loadStore_->waitAll(step, op_.deadline, *this);
  if (fault.kind != ExchangeFault::Kind::None) failOp(fault);
}

// Sends to this rank itself and receives from itself, in a batch: the k-th send is the k-th
// receive's data (NCCL's all-to-all loop sends to and receives from every rank, itself too).
// Checked whole before anything moves.
void Communicator::copyToSelf(std::span<const OpDesc> ops) {
  // Tagged ones are matched by tag instead (comm/tagged.cpp).
  auto untaggedSelf = [this](const OpDesc& op) { return op.peer == rank_ && !op.tagged; };
  if (std::none_of(ops.begin(), ops.end(), untaggedSelf)) return;
  std::vector<const OpDesc*> sends, recvs;
  for (const OpDesc& op : ops)
    if (untaggedSelf(op)) (op.kind == OpKind::Send ? sends : recvs).push_back(&op);
  if (sends.size() != recvs.size()) {
    error(Errc::ApiSelfUnpaired)
        .op(ops.size() == 1 ? opName(ops[0].kind) : cat("group of ", ops.size(), " send/recv"))
        .cause("this run of point-to-point calls has ", sends.size(), " send(s) to this rank itself (", rank_, ") and ",
               recvs.size(), " receive(s) from it: each needs its counterpart beside it in the group")
        .raise();
  }
  for (size_t k = 0; k < sends.size(); ++k) {
    if (sends[k]->count != recvs[k]->count || sends[k]->dtype != recvs[k]->dtype) {
      error(Errc::ApiSelfUnpaired)
          .op(cat("group of ", ops.size(), " send/recv"))
          .cause("send #", k, " to this rank itself is ", sends[k]->count, " x ", dtypeName(sends[k]->dtype),
                 ", its receive #", k, " is ", recvs[k]->count, " x ", dtypeName(recvs[k]->dtype))
          .raise();
    }
  }
  for (size_t k = 0; k < sends.size(); ++k)
    if (sends[k]->send != recvs[k]->recv)
      std::memmove(recvs[k]->recv, sends[k]->send, sends[k]->count * dtypeSize(sends[k]->dtype));
}

void Communicator::runPointToPointBatch(std::span<const OpDesc> ops, ExchangeWork* work) {
  if (std::any_of(ops.begin(), ops.end(), [](const OpDesc& op) { return op.tagged; })) {
    if (ops.size() == 1 && ops[0].kind == OpKind::Recv && ops[0].peer == VIGIL_ANY_SOURCE)
      return runAnySourceRecv(ops[0]);
    return runTaggedBatch(ops, work);
  }
  copyToSelf(ops);
  // Every buffer of the batch is referenced by its transfer until the batch
  // returns: nothing is released early (the batch_isend_irecv field bug).
  std::vector<FrameHeader> headers;
  std::vector<Transfer> transfers;
  std::vector<int> peers;
  headers.reserve(ops.size());
  transfers.reserve(ops.size());
  for (const OpDesc& op : ops) {
    if (op.peer == rank_) continue;  // copied above
    const size_t p = static_cast<size_t>(op.peer);
    const bool isSend = op.kind == OpKind::Send;
    headers.push_back(headerFor(op, static_cast<int64_t>(isSend ? sendSeq_[p] : recvSeq_[p])));
    transfers.push_back(transferOf(op, headers.back()));
    // A receive from a peer that already left may still find its message
    // in the socket; only the socket can say. A send to it cannot arrive.
    if (isSend) peers.push_back(op.peer);
  }
  if (transfers.empty()) return;  // only this rank itself
  // Only the peers' own sockets matter to a send/recv batch.
  beginOp(headers.front(), ops.size() == 1 ? opName(ops[0].kind) : cat("group of ", ops.size(), " send/recv"),
          /*watchPeers=*/false);
  checkPeersBeforeStart(peers, -1);
  for (const OpDesc& op : ops) {
    if (op.peer != rank_) ++(op.kind == OpKind::Send ? sendSeq_ : recvSeq_)[static_cast<size_t>(op.peer)];
  }
  exchange(transfers, work);
}

Transfer Communicator::transferOf(const OpDesc& op, const FrameHeader& header) {
  const size_t bytes = op.count * dtypeSize(op.dtype);
  Transfer t =
      op.kind == OpKind::Send ? Transfer::send(op.peer, op.send, bytes) : Transfer::recv(op.peer, op.recv, bytes);
  t.header = &header;
  t.segments = op.segments;
  t.ready = op.ready;
  return t;
}

void Communicator::exchange(std::span<const Transfer> transfers, ExchangeWork* work) {
  ExchangeFault fault = transport_->exchange(transfers, op_.header, config_.fingerprint, op_.deadline, *this, work);
  if (fault.kind != ExchangeFault::Kind::None) failOp(fault);
  const int left = algo::mod(rank_ - 1, nranks_), right = algo::mod(rank_ + 1, nranks_);
  for (const Transfer& t : transfers) {
    op_.heardFromLeft |= !t.isSend && t.peer == left;
    op_.heardByRight |= t.isSend && t.peer == right;
  }
}

void Communicator::confirmWithLeftNeighbour() {
  const int left = algo::mod(rank_ - 1, nranks_);
  VIGIL_LOG_AT(LogLevel::Trace, rank_, op_.label, " seq ", op_.header.seq, " waits for rank ", left,
               "'s fingerprint (control plane)");
  // The left neighbour sent no data message to this rank in this op, so it
  // pushed its fingerprint at the op's end: here, or on its way. Asked for
  // only if it has not come by the stall time.
  std::optional<FrameHeader> theirs =
      control_.waitLeftFingerprint(op_.header.seq, op_.stallQueried ? op_.deadline : op_.deadline.earlier(op_.stallAt));
  if (!theirs && !op_.stallQueried && op_.stallAt.expired() && !op_.deadline.expired()) {
    op_.stallQueried = true;
    control_.queryLeftFingerprint(op_.header.seq);
    theirs = control_.waitLeftFingerprint(op_.header.seq, op_.deadline);
  }
  if (theirs) {
    if (theirs->agrees(op_.header, config_.fingerprint)) return;
    Error e = faults_.mismatch(left, op_.header, *theirs);
    throw poisonWith(e, true);
  }
  // No word from the left neighbour: the same verdicts as a stalled transfer.
  ExchangeFault fault;
  fault.kind = op_.deadline.expired() ? ExchangeFault::Kind::TimedOut : ExchangeFault::Kind::Fatal;
  if (fault.kind == ExchangeFault::Kind::Fatal && !control_.firstFailure() &&
      control_.peer(left).status != PeerState::Status::Alive) {
    fault.kind = ExchangeFault::Kind::PeerGone;
    fault.peer = left;
  }
  fault.pending.push_back({left, false, 0});
  failOp(fault);
}

bool Communicator::peerAlive(int peer) const {
  const PeerState s = control_.peer(peer);
  return s.status == PeerState::Status::Alive && !s.finalizing;
}

Deadline Communicator::stallDeadline() const {
  const bool crossCheck = op_.watchPeers && nranks_ > 1 && !op_.stallQueried;
  return crossCheck ? op_.stallAt : Deadline::never();
}

void Communicator::onStall() {
  // The op waits longer than a healthy one would: maybe the neighbour runs
  // another collective that never sends what this one waits for. Ask.
  op_.stallQueried = true;
  control_.queryLeftFingerprint(op_.header.seq);
}

void Communicator::onNeighbourMismatch(const FrameHeader& mine, const FrameHeader& theirs) {
  if (mine.agrees(theirs, config_.fingerprint)) return;  // VIGIL_FINGERPRINT=0: only the shape must agree
  poisonWith(faults_.mismatch(algo::mod(rank_ - 1, nranks_), mine, theirs), true);
  control_.poison();  // wake this rank's op, if it is still waiting
}

uint8_t* Communicator::scratch(size_t bytes) {
  // Kept for the communicator's life: fresh pages cost far more than the copy.
  if (scratch_.size() < bytes) {
    try {
      scratch_.resize(bytes);
    } catch (const std::bad_alloc&) {
      error(Errc::OpOutOfMemory).op(op_.label).cause("cannot allocate ", bytes, " bytes of scratch").raise();
    }
  }
  return scratch_.data();
}

ProgressReport Communicator::progress() const {
  ProgressReport r;
  r.lastCompletedSeq = completedSeq_.load();
  r.currentSeq = inProgressSeq_.load();
  r.currentOp = inProgressOp_.load();
  return r;
}

int Communicator::checkPeers(std::span<const int> directRecvPeers) {
  control_.clearPeerChange();  // then read the state: a later change signals again
  std::vector<int> gone = faults_.gonePeersByCause(static_cast<int64_t>(op_.header.seq));
  if (gone.empty()) return -1;
  const int first = gone.front();
  PeerState s = control_.peer(first);
  if (s.status == PeerState::Status::Died) {
    // A peer that died may have sent everything this step needs before it
    // died: if we read from it, its socket will tell (data, then EOF).
    for (int d : directRecvPeers) {
      if (d == first) return -1;
    }
  }
  return first;
}

void Communicator::checkPeersBeforeStart(std::span<const int> peers, int64_t seq) {
  if (control_.allPeersAlive()) return;  // the common case, without a lock
  for (int p : faults_.gonePeersByCause(seq)) {
    bool needed = false;
    for (int q : peers) needed |= q == p;
    if (!needed) continue;
    // A peer that stopped the communicator with an error broke it for
    // everyone: that is sticky.
    const PeerState state = control_.peer(p);
    if (state.status == PeerState::Status::Failed) throw poisonWith(faults_.peerGone(p, state, op_), false);
    // A finalizing peer will run nothing else: the communicator is done
    // for this op's kind, and the peer learns why its finalize fails.
    if (state.finalizing) throw poisonWith(faults_.peerGone(p, state, op_), true);
    // Nothing was sent: the communicator stays consistent for ops that do
    // not need that peer, so this error is not sticky; but it is the cause
    // a goodbye of ours would quote.
    Error e = faults_.peerGone(p, state, op_);
    {
      std::lock_guard lock(errorMutex_);
      lastCause_ = e;
    }
    throw e;
  }
}

std::optional<Error> Communicator::asyncError() const {
  std::lock_guard lock(errorMutex_);
  return fatal_;
}

Error Communicator::poisonWith(const Error& error, bool tellPeers) {
  {
    std::lock_guard lock(errorMutex_);
    // The first error is the root cause; later ones are its consequences.
    if (fatal_) return *fatal_;
    fatal_ = error;
  }
  // The caller gets this error as its return value; the log is for the record.
  VIGIL_LOG_AT(LogLevel::Info, rank_, error.text());
  if (tellPeers) control_.broadcastFailure(error);
  return error;
}

void Communicator::finalize() {
  std::lock_guard lock(opMutex_);
  checkUsable();
  checkRequestsAtFinalize();
  if (hier_) hier_->finalize();
  beginOp(FrameHeader{}, "finalize", /*watchPeers=*/false);
  // Peers still in a collective hear at once that this rank will not join
  // it; they fail it and say so, which ends this wait too.
  std::vector<int> missing = control_.finalize(Deadline::afterMs(config_.timeoutMs), completedSeq_.load());
  std::vector<int> stuck;
  for (int p : missing) {
    PeerState s = control_.peer(p);
    if (s.status == PeerState::Status::Left) continue;  // a clean exit is what finalize asks for
    // This rank told everyone it is done: it cannot run more operations.
    if (s.status != PeerState::Status::Alive) throw poisonWith(faults_.peerGone(p, s, op_), false);
    stuck.push_back(p);
  }
  if (!stuck.empty()) {
    throw poisonWith(error(Errc::OpTimeout)
                         .op("finalize")
                         .cause("rank(s) ", joinRanks(stuck), " did not reach vigilCommFinalize within ",
                                config_.timeoutMs, " ms (they are alive but still busy or stuck)")
                         .build(),
                     false);
  }
  // Everyone is done: every send has completed, so a message still waiting
  // here was sent to a receive that never came.
  for (int p : allPeers_) {
    std::optional<FrameHeader> waiting = transport_->unreceived(p);
    if (!waiting || waiting->magic != FrameHeader::kMagic) continue;
    Error e = error(Errc::OpUnreceived)
                  .op("finalize")
                  .cause(faults_.describePeer(p), " sent ", FaultReporter::describeUnreceived(*waiting),
                         " to this rank, which never received it", " (", waiting->bytes,
                         " bytes still waiting; nothing was written for it)")
                  .build();
    throw poisonWith(e, true);
  }
  checkKeptAtFinalize();
  State active = State::Active;
  if (!state_.compare_exchange_strong(active, State::Finalized)) return;  // aborted or destroyed meanwhile
  control_.sendBye(ByeReason::Finalize, completedSeq_.load());
}

void Communicator::destroy(ByeReason reason, const std::string& exitError, const std::optional<Error>& inheritedCause) {
  // The lifecycle moves only by compare-and-swap: of a destroy and an abort racing, one
  // wins each move, and a communicator is destroyed once.
  State s = state_.load();
  do {
    if (s == State::Destroyed) return;
  } while (!state_.compare_exchange_weak(s, State::Destroyed));
  std::optional<Error> cause;
  {
    std::lock_guard lock(errorMutex_);
    cause = fatal_ ? fatal_ : inheritedCause ? inheritedCause : lastCause_;
  }
  if (s == State::Active) {  // finalize and abort said their goodbyes already
    // An error of its own first (it may be the uncaught one), else the uncaught error.
    control_.sendBye(reason, completedSeq_.load(), cause,
                     reason == ByeReason::ProcessError ? exitError : std::string());
  }
  control_.poison();  // an op still running in another thread stops now
  control_.stop();
  if (hier_) hier_->destroy(reason, exitError, cause);  // their peers are told this communicator's cause, if any
}

void Communicator::abort(const std::string& why, const std::optional<Error>& relayed) {
  State s = state_.load();
  do {
    if (s == State::Destroyed || s == State::Aborted) return;
  } while (!state_.compare_exchange_weak(s, State::Aborted));
  const std::string reason = why.empty() ? "vigilCommAbort" : why;
  {
    std::lock_guard lock(errorMutex_);
    abortReason_ = reason;
  }
  control_.poison();      // blocked ops wake and return vigilAborted
  transport_->abandon();  // its teardown will not wait for the peers
  const Error notice = relayed ? *relayed
                               : error(Errc::PeerAborted)
                                     .result(vigilAborted)
                                     .cause("rank ", rank_, " aborted the communicator (", reason, ")")
                                     .remedy("see why rank ", rank_, " aborted; create a new communicator to continue")
                                     .build();
  control_.broadcastFailure(notice);
  control_.stop();
  if (hier_) hier_->abort(why, notice);  // a hierarchical op waits in these: their peers hear this rank's notice
  dumpAfterFailure(notice);
}

std::string Communicator::abortReason() const {
  std::lock_guard lock(errorMutex_);
  return abortReason_.empty() ? "vigilCommAbort" : abortReason_;  // empty: the abort is a moment old
}

void Communicator::failOp(const ExchangeFault& f) {
  if (f.kind != ExchangeFault::Kind::Fatal) {
    FaultReporter::Verdict v = faults_.judge(f, op_);
    throw poisonWith(v.error, v.tellPeers);
  }
  const int64_t seq = op_.collectiveSeq();
  State s = state_.load();
  if (s == State::Aborted || s == State::Destroyed) {
    const std::string how = s == State::Aborted ? "aborted (" + abortReason() + ")" : "destroyed";
    Error e = error(Errc::CommAborted)
                  .op(op_.label, seq)
                  .cause("the communicator was ", how, " while this operation waited")
                  .build();
    throw poisonWith(e, false);
  }
  if (std::optional<Error> stored = asyncError()) throw *stored;  // found by the control thread
  if (auto failed = control_.firstFailure()) {
    Error e = faults_.peerGone(failed->first, failed->second, op_);
    throw poisonWith(e, false);
  }
  Error e = error(Errc::CommAborted).op(op_.label, seq).build();
  throw poisonWith(e, false);
}

Error Communicator::peerLostError(int peer, const std::string& label) const {
  OpState op;
  op.label = label;
  return faults_.peerGone(peer, control_.peer(peer), op);
}

Error Communicator::stoppedError(const std::string& label) const {
  const State s = state_.load();
  if (s == State::Aborted || s == State::Destroyed) {
    const std::string how = s == State::Aborted ? "aborted (" + abortReason() + ")" : "destroyed";
    return error(Errc::CommAborted).op(label).cause("the communicator was ", how, " while this call waited").build();
  }
  if (std::optional<Error> stored = asyncError()) return *stored;
  if (auto failed = control_.firstFailure()) return peerLostError(failed->first, label);
  return error(Errc::CommAborted).op(label).build();
}

uint64_t Communicator::addWaker(std::function<void()> wake) {
  std::lock_guard lock(wakersMutex_);
  wakers_.emplace_back(nextWaker_, std::move(wake));
  return nextWaker_++;
}

void Communicator::removeWaker(uint64_t id) {
  std::lock_guard lock(wakersMutex_);
  std::erase_if(wakers_, [id](const auto& w) { return w.first == id; });
}

Communicator::Extension* Communicator::installExtension(const std::function<std::unique_ptr<Extension>()>& make) {
  std::lock_guard lock(extensionMutex_);
  if (!extensionOwner_) {
    extensionOwner_ = make();
    extension_.store(extensionOwner_.get(), std::memory_order_release);
  }
  return extensionOwner_.get();
}

void Communicator::wakeWaiters() {
  transport_->wakeWaiters();
  std::lock_guard lock(wakersMutex_);
  for (const auto& w : wakers_) w.second();
}

}  // namespace vigil
