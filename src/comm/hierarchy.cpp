// Hierarchical collectives for ranks on several hosts.
//
// A communicator whose ranks sit on several hosts, with several ranks on at
// least one of them, builds two communicators at init by splitting itself:
// the ranks of its host (they pick shared memory) and the first rank of every
// host, the leaders (over TCP). Allreduce, broadcast and barrier then run in
// three steps: inside each host, across the leaders (one message per host
// instead of one per rank), back inside each host.
//
// Failures: each step is an operation of its own communicator, with its own
// deadline and fingerprints. A step that fails poisons this communicator and
// both step communicators, so every rank waiting in any of them returns: the
// ranks of a host waiting for their leader receive the leader's report, which
// quotes the failure across hosts. The waits inside a host get twice the
// timeout for that reason: the leader's verdict arrives before they would
// time out themselves.

#include "comm/hierarchy.hpp"

#include <climits>
#include <unordered_map>

#include "comm/communicator.hpp"
#include "core/log.hpp"
#include "reduce/reduce.hpp"

namespace vigil {

std::unique_ptr<Hierarchy> Hierarchy::build(Communicator& outer, const std::vector<PeerInfo>& peers) {
  const int nranks = outer.nranks(), rank = outer.rank();
  std::unordered_map<std::string, int> hostIndex;
  std::vector<int> hostOf(static_cast<size_t>(nranks)), localRankOf(static_cast<size_t>(nranks));
  std::vector<int> ranksOnHost;
  for (int r = 0; r < nranks; ++r) {
    auto [it, fresh] = hostIndex.try_emplace(peers[static_cast<size_t>(r)].hostId, static_cast<int>(hostIndex.size()));
    if (fresh) ranksOnHost.push_back(0);
    hostOf[static_cast<size_t>(r)] = it->second;
    localRankOf[static_cast<size_t>(r)] = ranksOnHost[static_cast<size_t>(it->second)]++;
  }
  const int hosts = static_cast<int>(hostIndex.size());
  if (hosts < 2 || hosts == nranks) return nullptr;  // one host, or one rank per host: the flat algorithms

  std::unique_ptr<Hierarchy> h(new Hierarchy());
  const CommConfig& config = outer.config();
  const int myHost = hostOf[static_cast<size_t>(rank)];
  const bool leader = localRankOf[static_cast<size_t>(rank)] == 0;
  const int localTimeout = config.timeoutMs > INT_MAX / 2 ? INT_MAX : 2 * config.timeoutMs;
  h->local_ = outer.splitAs(myHost, rank, cat("host", myHost), localTimeout,
                            cat("twice ", config.timeoutSource, " of '", outer.name(), "'"));
  h->leaders_ = outer.splitAs(leader ? 0 : -1, rank, "leaders", config.timeoutMs, config.timeoutSource);
  for (int r = 0; r < nranks; ++r) {
    if (hostOf[static_cast<size_t>(r)] == myHost) h->localRanks_.push_back(r);
    if (localRankOf[static_cast<size_t>(r)] == 0) h->leaderRanks_.push_back(r);
  }
  h->local_->serve(outer.name(), h->localRanks_);
  if (h->leaders_) h->leaders_->serve(outer.name(), h->leaderRanks_);
  h->hostOf_ = std::move(hostOf);
  h->localRankOf_ = std::move(localRankOf);
  h->hosts_ = hosts;
  VIGIL_LOG_AT(LogLevel::Info, rank, "communicator '", outer.name(), "': ", hosts,
               " hosts; hierarchical collectives over '", h->local_->name(), "' (", h->local_->transportName(), ")",
               leader ? cat(" and '", h->leaders_->name(), "' (", h->leaders_->transportName(), ")") : std::string());
  return h;
}

namespace {

// One level's part of a hierarchical op: the whole op's count and data type.
OpDesc reductionStep(const OpDesc& op, OpKind kind, const void* send, void* recv, vigilRedOp_t redop, int root = -1) {
  return OpDesc{
      .kind = kind, .send = send, .recv = recv, .count = op.count, .dtype = op.dtype, .redop = redop, .root = root};
}

OpDesc broadcastStep(const OpDesc& op, const void* send, void* recv, int root) {
  return OpDesc{
      .kind = OpKind::Broadcast, .send = send, .recv = recv, .count = op.count, .dtype = op.dtype, .root = root};
}

}  // namespace

void Hierarchy::run(const OpDesc& op, int outerRank, int outerRanks) {
  Communicator* const local = local_.get();
  Communicator* const leaders = leaders_.get();
  const int myHost = hostOf_[static_cast<size_t>(outerRank)];
  Communicator* in = local;
  const char* step = "inside the host";
  auto across = [&] {
    in = leaders;
    step = "across hosts";
  };
  auto back = [&] {
    in = local;
    step = "back inside the host";
  };
  try {
    switch (op.kind) {
      case OpKind::AllReduce: {
        const vigilRedOp_t redop = op.redop == vigilAvg ? vigilSum : op.redop;  // divided once, at the end
        local->run(reductionStep(op, OpKind::Reduce, op.send, op.recv, redop, 0));
        if (leaders != nullptr) {
          across();
          leaders->run(reductionStep(op, OpKind::AllReduce, op.recv, op.recv, redop));
          if (op.redop == vigilAvg) reduce::divideInPlace(op.recv, op.count, op.dtype, outerRanks);
        }
        back();
        local->run(broadcastStep(op, op.recv, op.recv, 0));
        break;
      }
      case OpKind::Broadcast: {
        const int rootHost = hostOf_[static_cast<size_t>(op.root)];
        if (myHost == rootHost) {
          const int localRoot = localRankOf_[static_cast<size_t>(op.root)];
          local->run(broadcastStep(op, op.send, op.recv, localRoot));
        }
        if (leaders != nullptr) {
          across();
          leaders->run(broadcastStep(op, op.recv, op.recv, rootHost));
        }
        back();
        if (myHost != rootHost) {
          local->run(broadcastStep(op, op.recv, op.recv, 0));
        }
        break;
      }
      case OpKind::Barrier:
        local->run(OpDesc{.kind = OpKind::Barrier});
        if (leaders != nullptr) {
          across();
          leaders->run(OpDesc{.kind = OpKind::Barrier});
        }
        back();
        local->run(OpDesc{.kind = OpKind::Barrier});
        break;
      default: ErrorBuilder(Errc::Internal).op(opName(op.kind)).cause("no hierarchical algorithm for this op").raise();
    }
  } catch (const Error& e) {
    const std::vector<int>& ranks = in == local ? localRanks_ : leaderRanks_;
    const bool peerKnown = e.peer() >= 0 && static_cast<size_t>(e.peer()) < ranks.size();
    throw StepFailure{.error = e,
                      .step = step,
                      .comm = in->name(),
                      .ranks = ranks,
                      .outerPeer = peerKnown ? ranks[static_cast<size_t>(e.peer())] : -1};
  }
}

void Hierarchy::failSteps(const Error& error) {
  local_->failWith(error);
  if (leaders_) leaders_->failWith(error);
}

void Hierarchy::finalize() {
  local_->finalize();
  if (leaders_) leaders_->finalize();
}

void Hierarchy::destroy(ByeReason reason, const std::string& exitError, const std::optional<Error>& cause) {
  local_->destroy(reason, exitError, cause);
  if (leaders_) leaders_->destroy(reason, exitError, cause);
}

void Hierarchy::abort(const std::string& why, const Error& notice) {
  local_->abort(why, notice);
  if (leaders_) leaders_->abort(why, notice);
}

void Communicator::runHierarchical(const OpDesc& op) {
  try {
    hier_->run(op, rank_, nranks_);
  } catch (const Hierarchy::StepFailure& f) {
    // A rank that left or failed this communicator is the root cause: the
    // step's own error may only name the rank that heard of it first.
    if (std::vector<int> gone = faults_.gonePeersByCause(static_cast<int64_t>(op_.header.seq)); !gone.empty()) {
      Error root = faults_.peerGone(gone.front(), control_.peer(gone.front()), op_);
      hier_->failSteps(root);
      throw poisonWith(root, true);
    }
    // The step's error is quoted without its remedy: the same id, whose
    // remedy this error gives once, at its end.
    Error wrapped = error(f.error.errc())
                        .result(f.error.result())
                        .op(op_.label, op_.header.seq)
                        .peer(f.outerPeer)
                        .cause("the hierarchical step ", f.step, " (communicator '", f.comm, "' of ranks ",
                               joinRanks(f.ranks), ") failed: ", f.error.head())
                        .build();
    // Every rank waiting in any of the three must learn of it.
    hier_->failSteps(wrapped);
    throw poisonWith(wrapped, true);
  }
  op_.heardFromLeft = op_.heardByRight = true;  // every step compared its fingerprints with its own peers
}

}  // namespace vigil
