// The header an operation's messages carry: what the fingerprint check
// compares between ranks (op, type, count, reduction, root or the digest of
// a v-collective's counts, sequence number).

#include "comm/communicator.hpp"

namespace vigil {

// The count every rank of the op agrees on: the call's count, the total of
// the counts every rank passes (allgatherv, reduce_scatterv), or 0 where
// ranks hold different counts (each message's size is still checked).
size_t Communicator::fingerprintCount(const OpDesc& op) const {
  switch (op.kind) {
    case OpKind::AllGatherV:
    case OpKind::ReduceScatterV: {
      size_t total = 0;
      for (int p = 0; p < nranks_; ++p) total += op.recvcounts[p];
      return total;
    }
    case OpKind::AllToAllV:
    case OpKind::GatherV:
    case OpKind::ScatterV:
    case OpKind::Barrier: return 0;
    default: return op.count;
  }
}

// Where every rank passes the same count array (allgatherv, reduce_scatterv),
// a digest of it rides in the header's root field, which those ops have no
// use for: ranks whose arrays differ meet in the fingerprint check, even
// when the totals agree. -1 for every other op.
int32_t Communicator::countsDigest(const OpDesc& op) const {
  if (op.kind != OpKind::AllGatherV && op.kind != OpKind::ReduceScatterV) return -1;
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int p = 0; p < nranks_; ++p) h = (h ^ op.recvcounts[p]) * 0x100000001b3ULL;
  return static_cast<int32_t>((h ^ (h >> 32)) & 0x7fffffff);
}

FrameHeader Communicator::headerFor(const OpDesc& op, int64_t seq) const {
  FrameHeader h;
  h.kind = static_cast<uint8_t>(op.tagged                 ? FrameKind::Tagged
                                : isPointToPoint(op.kind) ? FrameKind::PointToPoint
                                                          : FrameKind::Collective);
  // Both ends of a point-to-point pair describe the message the same way.
  h.op = static_cast<uint8_t>(isPointToPoint(op.kind) ? OpKind::Send : op.kind);
  h.dtype = static_cast<uint8_t>(op.dtype);
  h.redop = static_cast<uint8_t>(op.hasRedOp() ? op.redop : 0);
  h.root = op.hasRoot() ? op.root : op.tagged ? op.tag : countsDigest(op);
  h.seq = static_cast<uint64_t>(seq);
  h.count = fingerprintCount(op);
  if (isPointToPoint(op.kind)) h.sentAfterSeq = static_cast<uint32_t>(nextSeq_ - 1);
  return h;
}

}  // namespace vigil
