// Ring allreduce = ring reduce-scatter + ring allgather over n blocks.
//
// Step s of the reduce-scatter sends block (rank - s) to the right neighbour
// and receives block (rank - s - 1) from the left one, adding its own
// contribution into the output. After n-1 steps rank r holds the full reduction of block (r + 1).
// Each block is reduced on exactly one rank and then copied everywhere, so
// every rank ends with bit-identical results (no rank-dependent rounding).
// Each rank moves 2(n-1)/n of the buffer: bandwidth-optimal for large counts.

#include <algorithm>
#include <cstring>

#include "algo/algo.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

void allReduceRing(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  const size_t elem = dtypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  const int n = r.nranks();
  if (n == 1) {
    if (send != recv && count > 0) std::memcpy(out, send, count * elem);
    return;  // avg over one rank is the value itself
  }
  const int me = r.rank();
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  const Blocks blocks{count, n};
  uint8_t* incoming = r.scratch(blocks.size(0) * elem);

  // Each block moves in pieces: while this rank adds piece j, piece j+1
  // already streams into the socket's buffer, so the link does not idle
  // during the arithmetic. Both ends cut a block the same way.
  const size_t piece = std::max<size_t>(1, kPipelineBytes / elem);
  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = mod(me - s, n), recvBlock = mod(me - s - 1, n);
    const size_t sendCount = blocks.size(sendBlock), recvCount = blocks.size(recvBlock);
    for (size_t off = 0; off < std::max(sendCount, recvCount); off += piece) {
      Transfer step[2];
      size_t k = 0;
      if (off < sendCount) {
        // Step 0 sends this rank's own block straight from the input; later
        // steps send what the previous step reduced into the output.
        const uint8_t* from = s == 0 ? in : out;
        step[k++] = Transfer::send(right, from + (blocks.begin(sendBlock) + off) * elem,
                                   std::min(piece, sendCount - off) * elem);
      }
      const size_t got = off < recvCount ? std::min(piece, recvCount - off) : 0;
      if (got > 0) step[k++] = Transfer::recv(left, incoming + off * elem, got * elem);
      r.exchange(std::span<const Transfer>(step, k));
      if (got > 0) {
        // Each step reaches a block this rank has not touched yet: its output
        // copy is made here (mine OP theirs), so the input is never copied whole.
        const size_t at = (blocks.begin(recvBlock) + off) * elem;
        reduce::reduceInto(out + at, in + at, incoming + off * elem, got, dtype, op);
      }
    }
  }
  const int owned = mod(me + 1, n);
  if (op == vigilAvg) reduce::divideInPlace(out + blocks.begin(owned) * elem, blocks.size(owned), dtype, n);

  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = mod(me + 1 - s, n), recvBlock = mod(me - s, n);
    const Transfer step[] = {Transfer::send(right, out + blocks.begin(sendBlock) * elem, blocks.size(sendBlock) * elem),
                             Transfer::recv(left, out + blocks.begin(recvBlock) * elem, blocks.size(recvBlock) * elem)};
    r.exchange(step);
  }
}

}  // namespace vigil::algo
