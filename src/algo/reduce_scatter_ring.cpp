// Ring reduce-scatter: in step s rank r sends its running partial sum of
// block (r - s - 1) to the right and receives the left neighbour's partial of
// block (r - s - 2), adding its own contribution. After n-1 steps the partial
// that arrives is block r, complete. Two scratch blocks alternate: one is
// being sent while the next arrives.

#include <cstring>

#include "algo/algo.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

void reduceScatterRing(StepRunner& r, const void* send, void* recv, size_t recvcount, vigilDataType_t dtype,
                       vigilRedOp_t op) {
  const size_t block = recvcount * dtypeSize(dtype);
  const int n = r.nranks(), me = r.rank();
  const auto* in = static_cast<const uint8_t*>(send);
  auto blockOf = [&](int b) { return in + static_cast<size_t>(b) * block; };
  if (n == 1) {
    if (send != recv && block > 0) std::memmove(recv, send, block);
    return;
  }
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  uint8_t* space = r.scratch(2 * block);
  uint8_t* buffers[2] = {space, space + block};
  const uint8_t* outgoing = blockOf(mod(me - 1, n));  // step 0 sends our own contribution
  for (int s = 0; s < n - 1; ++s) {
    uint8_t* incoming = buffers[s % 2];
    const int recvBlock = mod(me - s - 2, n);
    const Transfer step[] = {Transfer::send(right, outgoing, block), Transfer::recv(left, incoming, block)};
    r.exchange(step);
    reduce::reduceInPlace(incoming, blockOf(recvBlock), recvcount, dtype, op);
    outgoing = incoming;
  }
  // The last partial is block `me`, complete. recv may alias our block of
  // send (the in-place form), which we no longer read.
  if (op == vigilAvg) reduce::divideInPlace(const_cast<uint8_t*>(outgoing), recvcount, dtype, n);
  if (block > 0) std::memcpy(recv, outgoing, block);
}

}  // namespace vigil::algo
