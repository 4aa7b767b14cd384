// Ring allgather: in step s every rank passes on the block it received in
// step s-1 (its own block first), so after n-1 steps every rank has all n.
// Blocks land directly in their final place in the output, each in one
// message: nothing is computed between pieces, so cutting a block would
// only make its transfer wait for the previous piece's.

#include <cstring>

#include "algo/ring.hpp"
#include "core/dtype.hpp"

namespace vigil::algo {

void ringAllGather(StepRunner& r, uint8_t* data, const Blocks& blocks, size_t elem) {
  const int n = r.nranks(), me = r.rank();
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = mod(me - s, n), recvBlock = mod(me - s - 1, n);
    // An empty block is not sent: its receiver knows it is empty.
    Transfer step[2];
    size_t k = 0;
    if (blocks.size(sendBlock) > 0) {
      step[k++] = Transfer::send(right, data + blocks.begin(sendBlock) * elem, blocks.size(sendBlock) * elem);
    }
    if (blocks.size(recvBlock) > 0) {
      step[k++] = Transfer::recv(left, data + blocks.begin(recvBlock) * elem, blocks.size(recvBlock) * elem);
    }
    r.exchange(std::span<const Transfer>(step, k));
  }
}

void allGatherRing(StepRunner& r, const OpDesc& op) {
  const int n = r.nranks(), me = r.rank();
  const size_t elem = dtypeSize(op.dtype), block = op.count * elem;
  auto* out = static_cast<uint8_t*>(op.recv);
  uint8_t* mine = out + static_cast<size_t>(me) * block;
  if (op.send != mine && block > 0) std::memcpy(mine, op.send, block);
  if (n > 1) ringAllGather(r, out, Blocks{op.count * static_cast<size_t>(n), n}, elem);
}

// The same ring over blocks of recvcounts[p] elements at rdispls[p].
void allGatherVRing(StepRunner& r, const OpDesc& op) {
  const int n = r.nranks(), me = r.rank();
  const size_t elem = dtypeSize(op.dtype);
  const Blocks blocks{.count = 0, .parts = n, .starts = op.rdispls, .sizes = op.recvcounts};
  auto* out = static_cast<uint8_t*>(op.recv);
  uint8_t* mine = out + blocks.begin(me) * elem;
  if (op.send != mine && op.count > 0) std::memcpy(mine, op.send, op.count * elem);
  if (n > 1) ringAllGather(r, out, blocks, elem);
}

}  // namespace vigil::algo
