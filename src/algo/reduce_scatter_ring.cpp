// Ring reduce-scatter: in step s rank r sends its running partial result of
// block (r - s - 1) to the right and receives the left neighbour's partial
// of block (r - s - 2), adding its own contribution. After n-1 steps the
// partial that arrives is block r, complete. Each block is reduced along one
// chain of ranks, so the result does not depend on which rank computes it.

#include <algorithm>
#include <cstring>

#include "algo/ring.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

void ringReduceScatter(StepRunner& r, const RingReduceScatter& args) {
  const size_t elem = dtypeSize(args.dtype);
  const int n = r.nranks(), me = r.rank();
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  const Blocks& blocks = args.blocks;
  // Both ends cut a block into the same pieces.
  const size_t piece = std::max<size_t>(1, kPipelineBytes / elem);
  const size_t largest = blocks.size(0), pieceRoom = std::min(piece, largest);
  // One arriving piece, and two partial blocks (one is sent while the next
  // is reduced) when the caller keeps no partials.
  uint8_t* space = r.scratch((pieceRoom + (args.partials != nullptr ? 0 : 2 * largest)) * elem);
  uint8_t* incoming = space;
  auto partialOf = [&](int block, int step) -> uint8_t* {
    if (block == me) return args.owned;
    if (args.partials != nullptr) return args.partials + blocks.begin(block) * elem;
    return space + (pieceRoom + static_cast<size_t>(step % 2) * largest) * elem;
  };

  // Step 0 sends this rank's own contribution straight from the input.
  const uint8_t* outgoing = args.input + blocks.begin(mod(me - 1, n)) * elem;
  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = mod(me - s - 1, n), recvBlock = mod(me - s - 2, n);
    const size_t sendCount = blocks.size(sendBlock), recvCount = blocks.size(recvBlock);
    uint8_t* partial = partialOf(recvBlock, s);
    const uint8_t* mine = args.input + blocks.begin(recvBlock) * elem;
    for (size_t off = 0; off < std::max(sendCount, recvCount); off += piece) {
      Transfer step[2];
      size_t k = 0;
      if (off < sendCount) {
        step[k++] = Transfer::send(right, outgoing + off * elem, std::min(piece, sendCount - off) * elem);
      }
      const size_t got = off < recvCount ? std::min(piece, recvCount - off) : 0;
      if (got > 0) step[k++] = Transfer::recv(left, incoming, got * elem);
      r.exchange(std::span<const Transfer>(step, k));
      // mine OP theirs, written where the partial is kept: an in-place
      // input block is read before it is overwritten, never copied whole.
      if (got > 0) reduce::reduceInto(partial + off * elem, mine + off * elem, incoming, got, args.dtype, args.op);
    }
    outgoing = partial;
  }
  if (args.op == vigilAvg) reduce::divideInPlace(args.owned, blocks.size(me), args.dtype, n);
}

void reduceScatterRing(StepRunner& r, const OpDesc& op) {
  const int n = r.nranks();
  const size_t elem = dtypeSize(op.dtype), block = op.count * elem;
  const auto* in = static_cast<const uint8_t*>(op.send);
  auto* out = static_cast<uint8_t*>(op.recv);
  if (n == 1) {
    if (in != out && block > 0) std::memmove(out, in, block);
    return;
  }
  // recv may alias this rank's block of send (the in-place form).
  ringReduceScatter(r, {.input = in,
                        .owned = out,
                        .partials = nullptr,
                        .blocks = Blocks{op.count * static_cast<size_t>(n), n},
                        .dtype = op.dtype,
                        .op = op.redop});
}

}  // namespace vigil::algo
