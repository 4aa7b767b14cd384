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

#include <climits>
#include <unordered_map>

#include "comm/communicator.hpp"
#include "core/log.hpp"
#include "reduce/reduce.hpp"

namespace vigil {

void Communicator::buildHierarchy() {
  std::unordered_map<std::string, int> hostIndex;
  std::vector<int> hostOf(static_cast<size_t>(nranks_)), localRankOf(static_cast<size_t>(nranks_));
  std::vector<int> ranksOnHost;
  for (int r = 0; r < nranks_; ++r) {
    auto [it, fresh] = hostIndex.try_emplace(peers_[static_cast<size_t>(r)].hostId, static_cast<int>(hostIndex.size()));
    if (fresh) ranksOnHost.push_back(0);
    hostOf[static_cast<size_t>(r)] = it->second;
    localRankOf[static_cast<size_t>(r)] = ranksOnHost[static_cast<size_t>(it->second)]++;
  }
  const int hosts = static_cast<int>(hostIndex.size());
  if (hosts < 2 || hosts == nranks_) return;  // one host, or one rank per host: the flat algorithms

  auto h = std::make_unique<Hierarchy>();
  const int myHost = hostOf[static_cast<size_t>(rank_)];
  const bool leader = localRankOf[static_cast<size_t>(rank_)] == 0;
  const int localTimeout = config_.timeoutMs > INT_MAX / 2 ? INT_MAX : 2 * config_.timeoutMs;
  h->local = splitAs(myHost, rank_, cat("host", myHost), localTimeout,
                     cat("twice ", config_.timeoutSource, " of '", name_, "'"));
  h->leaders = splitAs(leader ? 0 : -1, rank_, "leaders", config_.timeoutMs, config_.timeoutSource);
  for (int r = 0; r < nranks_; ++r) {
    if (hostOf[static_cast<size_t>(r)] == myHost) h->local->outerRanks_.push_back(r);
    if (h->leaders && localRankOf[static_cast<size_t>(r)] == 0) h->leaders->outerRanks_.push_back(r);
  }
  h->local->outerName_ = name_;
  if (h->leaders) h->leaders->outerName_ = name_;
  h->hostOf = std::move(hostOf);
  h->localRankOf = std::move(localRankOf);
  hier_ = std::move(h);
  topology_.hierarchical = true;
  VIGIL_LOG_AT(LogLevel::Info, rank_, "communicator '", name_, "': ", hosts, " hosts; hierarchical collectives over '",
               hier_->local->name(), "' (", hier_->local->transportName(), ")",
               leader ? cat(" and '", hier_->leaders->name(), "' (tcp)") : std::string());
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

void Communicator::runHierarchical(const OpDesc& op) {
  Hierarchy& h = *hier_;
  Communicator* const local = h.local.get();
  Communicator* const leaders = h.leaders.get();
  const int myHost = h.hostOf[static_cast<size_t>(rank_)];
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
          if (op.redop == vigilAvg) reduce::divideInPlace(op.recv, op.count, op.dtype, nranks_);
        }
        back();
        local->run(broadcastStep(op, op.recv, op.recv, 0));
        break;
      }
      case OpKind::Broadcast: {
        const int rootHost = h.hostOf[static_cast<size_t>(op.root)];
        if (myHost == rootHost) {
          const int localRoot = h.localRankOf[static_cast<size_t>(op.root)];
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
      default:
        error(Errc::Internal).op(op_.label, op_.header.seq).cause("no hierarchical algorithm for this op").raise();
    }
  } catch (const Error& e) {
    // A rank that left or failed this communicator is the root cause: the
    // step's own error may only name the rank that heard of it first.
    if (std::vector<int> gone = gonePeersByCause(static_cast<int64_t>(op_.header.seq)); !gone.empty()) {
      Error root = describePeerGone(gone.front(), control_.peer(gone.front()));
      local->poisonWith(root, true);
      if (leaders != nullptr) leaders->poisonWith(root, true);
      throw poisonWith(root, true);
    }
    // The step's error is quoted without its remedy: the same id, whose
    // remedy this error gives once, at its end.
    const bool peerKnown = e.peer() >= 0 && static_cast<size_t>(e.peer()) < in->outerRanks_.size();
    Error wrapped = error(e.errc())
                        .result(e.result())
                        .op(op_.label, op_.header.seq)
                        .peer(peerKnown ? in->outerRanks_[static_cast<size_t>(e.peer())] : -1)
                        .cause("the hierarchical step ", step, " (communicator '", in->name(), "' of ranks ",
                               joinRanks(in->outerRanks_), ") failed: ", e.head())
                        .build();
    // Every rank waiting in any of the three must learn of it.
    local->poisonWith(wrapped, true);
    if (leaders != nullptr) leaders->poisonWith(wrapped, true);
    throw poisonWith(wrapped, true);
  }
  op_.heardFromLeft = true;  // every step compared its fingerprints with its own peers
}

}  // namespace vigil
