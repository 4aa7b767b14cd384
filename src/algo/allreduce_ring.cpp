// Ring allreduce = ring reduce-scatter + ring allgather over n blocks.
//
// Step s of the reduce-scatter sends block (rank - s) to the right neighbour
// and receives block (rank - s - 1) from the left one, adding it to the local
// copy. After n-1 steps rank r holds the full reduction of block (r + 1).
// Each block is reduced on exactly one rank and then copied everywhere, so
// every rank ends with bit-identical results (no rank-dependent rounding).
// Each rank moves 2(n-1)/n of the buffer: bandwidth-optimal for large counts.

#include <cstring>

#include "algo/algo.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

void allReduceRing(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  const size_t elem = dtypeSize(dtype);
  auto* out = static_cast<uint8_t*>(recv);
  if (send != recv && count > 0) std::memcpy(out, send, count * elem);
  const int n = r.nranks();
  if (n == 1) {
    return;  // avg over one rank is the value itself
  }
  const int me = r.rank();
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  const Blocks blocks{count, n};
  uint8_t* incoming = r.scratch(blocks.size(0) * elem);

  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = mod(me - s, n), recvBlock = mod(me - s - 1, n);
    const Transfer step[] = {Transfer::send(right, out + blocks.begin(sendBlock) * elem, blocks.size(sendBlock) * elem),
                             Transfer::recv(left, incoming, blocks.size(recvBlock) * elem)};
    r.exchange(step);
    reduce::reduceInPlace(out + blocks.begin(recvBlock) * elem, incoming, blocks.size(recvBlock), dtype, op);
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
