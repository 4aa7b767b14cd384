// Bruck all-to-all for small blocks: ceil(log2 n) steps of one message each
// way instead of n-1 messages per rank. Each rank first rotates its blocks
// so that slot i holds the block for rank (me + i). In the step for k = 1,
// 2, 4, ... it sends every slot whose index has bit k to rank me + k and
// receives the same slots from rank me - k, so a block moves i ranks in
// powers of two and arrives at its destination; slot i then holds the block
// from rank me - i. Each block travels about log2(n)/2 times: more bytes
// than the direct exchange, far fewer messages, which wins where each
// message costs more than its bytes (small blocks, many ranks over sockets).

#include <cstring>

#include "algo/algo.hpp"
#include "core/dtype.hpp"

namespace vigil::algo {

void allToAllBruck(StepRunner& r, const OpDesc& op) {
  const size_t block = op.count * dtypeSize(op.dtype);
  const int n = r.nranks(), me = r.rank();
  const auto* in = static_cast<const uint8_t*>(op.send);
  auto* out = static_cast<uint8_t*>(op.recv);
  if (block == 0) return;
  const auto nn = static_cast<size_t>(n);
  auto at = [block](auto* base, int slot) { return base + static_cast<size_t>(slot) * block; };
  // The rotated slots, then one packed message out and one in: no step
  // moves more than half of the slots.
  const size_t packedRoom = (nn + 1) / 2 * block;
  uint8_t* slots = r.scratch(nn * block + 2 * packedRoom);
  uint8_t* outgoing = slots + nn * block;
  uint8_t* incoming = outgoing + packedRoom;
  for (int i = 0; i < n; ++i) std::memcpy(at(slots, i), at(in, mod(me + i, n)), block);

  for (int k = 1; k < n; k <<= 1) {
    size_t packed = 0;
    for (int i = k; i < n; ++i) {
      if ((i & k) != 0) std::memcpy(outgoing + block * packed++, at(slots, i), block);
    }
    const Transfer step[] = {Transfer::send(mod(me + k, n), outgoing, packed * block),
                             Transfer::recv(mod(me - k, n), incoming, packed * block)};
    r.exchange(step);
    packed = 0;
    for (int i = k; i < n; ++i) {
      if ((i & k) != 0) std::memcpy(at(slots, i), incoming + block * packed++, block);
    }
  }
  for (int i = 0; i < n; ++i) std::memcpy(at(out, mod(me - i, n)), at(slots, i), block);
}

}  // namespace vigil::algo
