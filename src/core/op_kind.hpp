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
  }
  return "unknown-op";
}

inline bool isPointToPoint(OpKind kind) {
  return kind == OpKind::Send || kind == OpKind::Recv;
}

}  // namespace vigil
