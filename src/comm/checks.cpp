// The opt-in safety checks: the NaN/Inf check (VIGIL_NAN_CHECK) and the
// buffer guard (VIGIL_BUFFER_GUARD). Both know which buffers of an op are
// inputs and outputs: receive-only buffers are never inputs, so a non-root
// of a broadcast never raises a false alarm.

#include <cstring>

#include "algo/ring.hpp"
#include "comm/communicator.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil {
namespace {

struct Span {
  const void* data = nullptr;
  size_t count = 0;  // elements
};

// The end of the blocks counts and displs lay out (null displs: one after
// another in rank order), in elements; validation made sure it fits.
size_t blocksEnd(const size_t* counts, const size_t* displs, int n) {
  size_t end = 0, next = 0;
  for (int p = 0; p < n; ++p) {
    next = (displs != nullptr ? displs[p] : next) + counts[p];
    end = std::max(end, next);
  }
  return end;
}

Span inputOf(const OpDesc& op, int rank, int n) {
  if (!op.segments.empty() || op.ready != nullptr) return {};  // the library's own sends
  const size_t all = op.count * static_cast<size_t>(n);
  switch (op.kind) {
    case OpKind::AllReduce:
    case OpKind::Reduce:
    case OpKind::AllGather:
    case OpKind::Split:
    case OpKind::Gather:
    case OpKind::Send: return {op.send, op.count};
    case OpKind::Broadcast: return rank == op.root ? Span{op.send, op.count} : Span{};
    case OpKind::Scatter: return rank == op.root ? Span{op.send, all} : Span{};
    case OpKind::ReduceScatter:
    case OpKind::AllToAll: return {op.send, all};
    case OpKind::AllToAllV: return {op.send, blocksEnd(op.sendcounts, op.sdispls, n)};
    case OpKind::AllGatherV:
    case OpKind::GatherV:
    case OpKind::Scan:
    case OpKind::Exscan: return {op.send, op.count};
    case OpKind::ScatterV: return rank == op.root ? Span{op.send, blocksEnd(op.sendcounts, op.sdispls, n)} : Span{};
    case OpKind::ReduceScatterV: return {op.send, blocksEnd(op.recvcounts, nullptr, n)};
    case OpKind::Barrier:
    case OpKind::Recv: return {};
  }
  return {};
}

Span outputOf(const OpDesc& op, int rank, int n) {
  const size_t all = op.count * static_cast<size_t>(n);
  switch (op.kind) {
    case OpKind::AllReduce:
    case OpKind::Broadcast:
    case OpKind::ReduceScatter:
    case OpKind::Scatter:
    case OpKind::Recv: return {op.recv, op.count};
    case OpKind::Reduce: return rank == op.root ? Span{op.recv, op.count} : Span{};
    case OpKind::Gather: return rank == op.root ? Span{op.recv, all} : Span{};
    case OpKind::AllGather:
    case OpKind::Split:
    case OpKind::AllToAll: return {op.recv, all};
    case OpKind::AllToAllV: return {op.recv, blocksEnd(op.recvcounts, op.rdispls, n)};
    case OpKind::AllGatherV: return {op.recv, blocksEnd(op.recvcounts, op.rdispls, n)};
    case OpKind::GatherV: return rank == op.root ? Span{op.recv, blocksEnd(op.recvcounts, op.rdispls, n)} : Span{};
    case OpKind::ScatterV:
    case OpKind::Scan: return {op.recv, op.count};
    // Rank 0's exclusive result is the identity, which is infinite for max and min.
    case OpKind::Exscan: return rank == 0 ? Span{} : Span{op.recv, op.count};
    case OpKind::ReduceScatterV: return {op.recv, op.recvcounts[rank]};
    case OpKind::Barrier:
    case OpKind::Send: return {};
  }
  return {};
}

// A fast 64-bit digest of a buffer, word by word: the guard only needs to
// notice a change, not resist an adversary.
uint64_t digest(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ bytes;
  size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ w) * 0xff51afd7ed558ccdULL;
    h ^= h >> 32;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  return h;
}

int64_t firstNonFinite(Span s, vigilDataType_t dtype) {
  const bool floatPairs = dtype == vigilFloat32Int32 || dtype == vigilFloat64Int32;  // their values
  if (s.data == nullptr || s.count == 0 || !(isFloating(dtype) || floatPairs)) return -1;
  size_t at = reduce::findNonFinite(s.data, s.count, dtype);
  return at == SIZE_MAX ? -1 : static_cast<int64_t>(at);
}

}  // namespace

void Communicator::guardSendBuffer(uint64_t recordId, const OpDesc& op) {
  if (!config_.bufferGuard || recordId == 0) return;
  Span in = inputOf(op, rank_, nranks_);
  if (in.data == nullptr || in.count == 0) return;
  const uint64_t hash = digest(in.data, in.count * dtypeSize(op.dtype));
  std::lock_guard lock(guardMutex_);
  guardHashes_[recordId] = hash;
}

void Communicator::forgetSendBuffer(uint64_t recordId) {
  if (!config_.bufferGuard) return;
  std::lock_guard lock(guardMutex_);
  guardHashes_.erase(recordId);
}

void Communicator::checkSendBuffer(uint64_t recordId, const OpDesc& op, size_t indexInBatch, int64_t seq) {
  if (!config_.bufferGuard) return;
  uint64_t before;
  {
    std::lock_guard lock(guardMutex_);
    auto it = guardHashes_.find(recordId);
    if (it == guardHashes_.end()) return;
    before = it->second;
    guardHashes_.erase(it);
  }
  Span in = inputOf(op, rank_, nranks_);
  if (digest(in.data, in.count * dtypeSize(op.dtype)) == before) return;
  error(Errc::ApiBufferChanged)
      .op(opName(op.kind), seq)
      .cause("the send buffer #", indexInBatch, isPointToPoint(op.kind) ? " of the group" : "", " (", in.data, ", ",
             in.count, " x ", dtypeName(op.dtype), isPointToPoint(op.kind) ? cat(", to rank ", op.peer) : std::string(),
             ") changed between the call and the end of the operation: what the peers received may be neither the old "
             "nor the new contents")
      .raise();
}

void Communicator::checkNumerics(const OpDesc& op, int64_t seq, int64_t inputIndex) {
  // Every rank contributes the index of its first non-finite input (-1 if
  // none); every rank then names the same first rank.
  std::vector<int64_t> mine{inputIndex}, all(static_cast<size_t>(nranks_), -1);
  if (nranks_ > 1) {
    algo::allGatherRing(
        *this, {.kind = OpKind::AllGather, .send = mine.data(), .recv = all.data(), .count = 1, .dtype = vigilInt64});
  } else {
    all[0] = inputIndex;
  }
  for (int r = 0; r < nranks_; ++r) {
    if (all[static_cast<size_t>(r)] < 0) continue;
    error(Errc::NumInputNonFinite)
        .op(opName(op.kind), seq)
        .cause("rank ", r, r == rank_ ? " (this rank)" : "", "'s input holds NaN or Inf at element ",
               all[static_cast<size_t>(r)], " (", dtypeName(op.dtype),
               "); it is the first rank whose input had one, so every output of this op is suspect")
        .raise();
  }
  int64_t out = firstNonFinite(outputOf(op, rank_, nranks_), op.dtype);
  if (out >= 0) {
    error(Errc::NumOutputNonFinite)
        .op(opName(op.kind), seq)
        .cause("the output holds NaN or Inf at element ", out, " (", dtypeName(op.dtype),
               ") although no rank's input had one")
        .raise();
  }
}

int64_t Communicator::scanInput(const OpDesc& op) const {
  return config_.nanCheck ? firstNonFinite(inputOf(op, rank_, nranks_), op.dtype) : -1;
}

}  // namespace vigil
