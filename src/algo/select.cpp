#include "algo/select.hpp"

namespace vigil::algo {

namespace {

constexpr Algo kAll[] = {Algo::Ring, Algo::RecursiveDoubling, Algo::Binomial, Algo::Direct, Algo::Dissemination,
                         Algo::Shm,  Algo::Hierarchical};
constexpr OpKind kCollectives[] = {OpKind::AllReduce,     OpKind::Broadcast, OpKind::Reduce,    OpKind::AllGather,
                                   OpKind::ReduceScatter, OpKind::AllToAll,  OpKind::AllToAllV, OpKind::Gather,
                                   OpKind::Scatter,       OpKind::Barrier};

// Below this, an allreduce over sockets is bound by latency: log2(n) steps
// of the whole vector beat 2(n-1) steps of slices.
constexpr size_t kTcpAllReduceLatencyBytes = 16 << 10;

}  // namespace

const char* algoName(Algo a) {
  switch (a) {
    case Algo::None: return "none";
    case Algo::Ring: return "ring";
    case Algo::RecursiveDoubling: return "recursive_doubling";
    case Algo::Binomial: return "binomial";
    case Algo::Direct: return "direct";
    case Algo::Dissemination: return "dissemination";
    case Algo::Shm: return "shm";
    case Algo::Hierarchical: return "hierarchical";
  }
  return "unknown";
}

std::optional<Algo> algoFromName(std::string_view name) {
  for (Algo a : kAll) {
    if (name == algoName(a)) return a;
  }
  return std::nullopt;
}

bool algoApplies(Algo a, OpKind kind, const Topology& topo) {
  switch (a) {
    case Algo::Ring: return kind == OpKind::AllReduce || kind == OpKind::AllGather || kind == OpKind::ReduceScatter;
    case Algo::RecursiveDoubling: return kind == OpKind::AllReduce;
    case Algo::Binomial: return kind == OpKind::Broadcast || kind == OpKind::Reduce;
    case Algo::Direct:
      return kind == OpKind::AllToAll || kind == OpKind::AllToAllV || kind == OpKind::Gather || kind == OpKind::Scatter;
    case Algo::Dissemination: return kind == OpKind::Barrier;
    case Algo::Shm: return topo.shm && kind != OpKind::AllToAllV && kind != OpKind::Send && kind != OpKind::Recv;
    case Algo::Hierarchical:
      return topo.hierarchical && (kind == OpKind::AllReduce || kind == OpKind::Broadcast || kind == OpKind::Barrier);
    case Algo::None: return false;
  }
  return false;
}

std::optional<AlgoOverrides> AlgoOverrides::parse(std::string_view text, std::string* error) {
  AlgoOverrides out;
  size_t pos = 0;
  while (pos <= text.size() && !text.empty()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(pos, end - pos);
    pos = end + 1;
    std::string_view collName, algo = item;
    if (size_t eq = item.find('='); eq != std::string_view::npos) {
      collName = item.substr(0, eq);
      algo = item.substr(eq + 1);
    }
    std::optional<Algo> a = algoFromName(algo);
    if (!a) {
      *error = "unknown algorithm '" + std::string(algo) +
               "' (known: ring, recursive_doubling, binomial, direct, dissemination, shm, hierarchical)";
      return std::nullopt;
    }
    bool matched = false;
    for (OpKind k : kCollectives) {
      const bool named = collName.empty() ? algoApplies(*a, k, Topology{2, true, true}) : collName == opName(k);
      if (!named) continue;
      if (!collName.empty() && !algoApplies(*a, k, Topology{2, true, true})) {
        *error = std::string(opName(k)) + " has no '" + std::string(algo) + "' algorithm";
        return std::nullopt;
      }
      out.forced[static_cast<size_t>(k)] = *a;
      matched = true;
    }
    if (!matched) {
      *error = "unknown collective '" + std::string(collName) + "' in '" + std::string(item) + "'";
      return std::nullopt;
    }
    if (end == text.size()) break;
  }
  return out;
}

Algo selectAlgo(OpKind kind, size_t bytes, const Topology& topo, const AlgoOverrides& overrides) {
  if (kind == OpKind::Split) kind = OpKind::AllGather;  // moves its records as an all-gather
  const Algo forced = overrides.forced[static_cast<size_t>(kind)];
  if (forced != Algo::None && algoApplies(forced, kind, topo)) return forced;
  // Ranks on several hosts: shared memory inside each host, one message per
  // host across them.
  if (algoApplies(Algo::Hierarchical, kind, topo)) return Algo::Hierarchical;
  // The table. Shared memory: every rank reads the others' staging buffers in
  // place, at every size (chunks keep large messages in the caches).
  switch (kind) {
    case OpKind::AllReduce:
      if (topo.shm) return Algo::Shm;
      return bytes <= kTcpAllReduceLatencyBytes ? Algo::RecursiveDoubling : Algo::Ring;
    case OpKind::AllGather:
    case OpKind::ReduceScatter: return topo.shm ? Algo::Shm : Algo::Ring;
    case OpKind::Broadcast: return topo.shm ? Algo::Shm : Algo::Binomial;
    case OpKind::AllToAll: return topo.shm ? Algo::Shm : Algo::Direct;
    case OpKind::Reduce: return topo.shm ? Algo::Shm : Algo::Binomial;
    case OpKind::Gather:
    case OpKind::Scatter: return topo.shm ? Algo::Shm : Algo::Direct;
    case OpKind::AllToAllV: return Algo::Direct;
    case OpKind::Barrier: return topo.shm ? Algo::Shm : Algo::Dissemination;
    case OpKind::Send:
    case OpKind::Recv:
    case OpKind::Split: return Algo::None;
  }
  return Algo::None;
}

}  // namespace vigil::algo
