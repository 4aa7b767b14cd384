// Allreduce on symmetric buffers (symm/heap.hpp): one pass over memory.
//
// After an entry barrier every rank's input is complete. Rank q owns slice q
// of the vector: chunk by chunk it reduces that slice from every rank's copy
// of `send`, in rank order, into a cache-sized buffer, and stores the result
// into every rank's copy of `recv`. Only rank q reads or writes slice q, so
// send may be recv. An exit barrier then makes every slice visible to every
// rank. The bits are those of vigil's allreduce (rank order, the same
// kernels, vigilAvg divided once at the end).
#include <cstring>

#include "algo/algo.hpp"
#include "core/dtype.hpp"
#include "core/strcat.hpp"
#include "reduce/reduce.hpp"
#include "symm/heap.hpp"

namespace vigil {

namespace {

constexpr size_t kChunkBytes = 64u << 10;  // stays in L2 between the reduction and the stores

}  // namespace

uint8_t* SymmetricHeap::part(int localIndex) const {
  return base_ + heapsAt_ + static_cast<size_t>(localIndex) * heapBytes_;
}

void SymmetricHeap::reduceParts(size_t at, size_t count, vigilDataType_t dtype, vigilRedOp_t op, void* out,
                                const ChunkSink& sink) {
  const int n = static_cast<int>(localRanks_.size());
  const size_t elem = dtypeSize(dtype);
  const size_t chunk = std::max<size_t>(1, kChunkBytes / elem);
  if (out == nullptr && scratch_.size() < chunk * elem) scratch_.resize(chunk * elem);
  for (size_t done = 0; done < count; done += chunk) {
    const size_t c = std::min(chunk, count - done);
    const size_t from = at + done * elem;
    uint8_t* dst = out != nullptr ? static_cast<uint8_t*>(out) + done * elem : scratch_.data();
    if (n == 1) {
      std::memcpy(dst, part(0) + from, c * elem);
    } else {
      reduce::reduceInto(dst, part(0) + from, part(1) + from, c, dtype, op);
      for (int q = 2; q < n; ++q) reduce::reduceInPlace(dst, part(q) + from, c, dtype, op);
    }
    if (op == vigilAvg) reduce::divideInPlace(dst, c, dtype, n);
    if (sink) sink(dst, done * elem, c * elem);
  }
}

void SymmetricHeap::allReduce(const void* send, void* recv, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  constexpr const char* kCall = "vigilAllReduceSymmetric";
  comm_->validate(OpDesc{.kind = OpKind::AllReduce, .send = send, .recv = recv, .count = count, .dtype = dtype, .redop = op});
  const size_t elem = dtypeSize(dtype);
  if (count > heapBytes_ / elem) {
    comm_->error(Errc::SymBadAddress).op(kCall).cause(count, " elements do not fit the symmetric heap").raise();
  }
  const size_t bytes = count * elem;
  locate(kCall, send, bytes, "sendbuff");
  locate(kCall, recv, bytes, "recvbuff");
  if (send != recv && static_cast<const uint8_t*>(send) < static_cast<uint8_t*>(recv) + bytes &&
      static_cast<uint8_t*>(recv) < static_cast<const uint8_t*>(send) + bytes) {
    comm_->error(Errc::ApiBadAliasing).op(kCall).cause("sendbuff and recvbuff overlap without being equal").raise();
  }
  requireAllLocal(kCall);
  const size_t sendAt = static_cast<size_t>(static_cast<const uint8_t*>(send) - mine_);
  const size_t recvAt = static_cast<size_t>(static_cast<uint8_t*>(recv) - mine_);
  const uint64_t fingerprint = symm::fingerprintOf({static_cast<uint64_t>(Call::AllReduce), count, static_cast<uint64_t>(dtype), static_cast<uint64_t>(op)});
  begin(Call::AllReduce, -1, sendAt, count);
  struct End {
    const SymmetricHeap& heap;
    ~End() { heap.end(); }
  } endOnExit{*this};

  localBarrier(kCall, BarrierKind::AllReduceEntry, fingerprint, count);

  const int n = static_cast<int>(localRanks_.size());
  const int me = localIndex_[static_cast<size_t>(rank_)];
  const algo::Blocks slices{count, n};
  const size_t first = slices.begin(me) * elem;
  // Reduced chunk by chunk into scratch_, then stored into every rank's recv.
  reduceParts(sendAt + first, slices.size(me), dtype, op, nullptr, [&](const uint8_t* chunk, size_t at, size_t bytes) {
    for (int q = 0; q < n; ++q) std::memcpy(part((me + q) % n) + recvAt + first + at, chunk, bytes);
  });
  localBarrier(kCall, BarrierKind::AllReduceExit, fingerprint, count);
}

}  // namespace vigil
