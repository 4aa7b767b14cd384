// Ring allgather: in step s every rank passes on the block it received in
// step s-1 (its own block first), so after n-1 steps every rank has all n.
// Blocks land directly in their final place in the output.

#include <cstring>

#include "algo/algo.hpp"
#include "core/dtype.hpp"

namespace vigil::algo {

void allGatherRing(StepRunner& r, const void* send, void* recv, size_t sendcount, vigilDataType_t dtype) {
  const size_t block = sendcount * dtypeSize(dtype);
  const int n = r.nranks(), me = r.rank();
  auto* out = static_cast<uint8_t*>(recv);
  uint8_t* mine = out + static_cast<size_t>(me) * block;
  if (send != mine && block > 0) std::memcpy(mine, send, block);
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = mod(me - s, n), recvBlock = mod(me - s - 1, n);
    const Transfer step[] = {Transfer::send(right, out + static_cast<size_t>(sendBlock) * block, block),
                             Transfer::recv(left, out + static_cast<size_t>(recvBlock) * block, block)};
    r.exchange(step);
  }
}

}  // namespace vigil::algo
