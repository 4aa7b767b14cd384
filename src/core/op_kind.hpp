#pragma once
// The operations vigil runs, as they appear in frames, logs and errors.

#include <cstdint>

namespace vigil {

enum class OpKind : uint8_t {
  AllReduce = 1,
  Broadcast,
  Reduce,
  AllGather,
  ReduceScatter,
  AllToAll,
  AllToAllV,
  Gather,
  Scatter,
  Barrier,
  Send,
  Recv,
  // vigilCommSplit's exchange of colors, keys and addresses: an all-gather
  // of fixed-size records, fingerprinted as its own operation.
  Split,
  // The v-variants (per-rank counts and displacements) and the prefix
  // reductions. Values travel in fingerprints: append, never renumber.
  AllGatherV,
  GatherV,
  ScatterV,
  ReduceScatterV,
  Scan,
  Exscan,
};

inline const char* opName(OpKind kind) {
  switch (kind) {
    case OpKind::AllReduce: return "allreduce";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Reduce: return "reduce";
    case OpKind::AllGather: return "allgather";
    case OpKind::ReduceScatter: return "reduce_scatter";
    case OpKind::AllToAll: return "alltoall";
    case OpKind::AllToAllV: return "alltoallv";
    case OpKind::Gather: return "gather";
    case OpKind::Scatter: return "scatter";
    case OpKind::Barrier: return "barrier";
    case OpKind::Send: return "send";
    case OpKind::Recv: return "recv";
    case OpKind::Split: return "split";
    case OpKind::AllGatherV: return "allgatherv";
    case OpKind::GatherV: return "gatherv";
    case OpKind::ScatterV: return "scatterv";
    case OpKind::ReduceScatterV: return "reduce_scatterv";
    case OpKind::Scan: return "scan";
    case OpKind::Exscan: return "exscan";
  }
  return "unknown-op";
}

inline bool isPointToPoint(OpKind kind) {
  return kind == OpKind::Send || kind == OpKind::Recv;
}

inline bool opHasRedOp(OpKind kind) {
  return kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter ||
         kind == OpKind::ReduceScatterV || kind == OpKind::Scan || kind == OpKind::Exscan;
}

inline bool opHasRoot(OpKind kind) {
  return kind == OpKind::Broadcast || kind == OpKind::Reduce || kind == OpKind::Gather || kind == OpKind::Scatter ||
         kind == OpKind::GatherV || kind == OpKind::ScatterV;
}

}  // namespace vigil
