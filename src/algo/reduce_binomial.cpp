// Binomial-tree reduce, the broadcast tree run backwards: in round k the
// ranks with bit k set (relative to the root) send their partial result to
// the rank 2^k below and leave; the others add what they receive. Leaves
// send straight from the user's buffer; only inner ranks need scratch.

#include <cstring>

#include "algo/algo.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

void reduceBinomial(StepRunner& r, const OpDesc& desc) {
  const size_t count = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const vigilRedOp_t op = desc.redop;
  const int root = desc.root;
  const void* send = desc.send;
  void* recv = desc.recv;
  const size_t bytes = count * dtypeSize(dtype);
  const int n = r.nranks(), me = r.rank();
  const int vr = mod(me - root, n);
  // The partial result: the root accumulates in its output; inner ranks in scratch.
  const void* partial = send;
  uint8_t* accumulator = nullptr;
  uint8_t* incoming = nullptr;
  auto ensureAccumulator = [&] {
    if (accumulator != nullptr) return;
    uint8_t* space = r.scratch(2 * bytes);
    incoming = space + bytes;
    accumulator = me == root ? static_cast<uint8_t*>(recv) : space;
    if (accumulator != send && bytes > 0) std::memcpy(accumulator, send, bytes);
    partial = accumulator;
  };
  if (me == root) ensureAccumulator();

  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      const Transfer toParent[] = {Transfer::send(mod(vr - mask + root, n), partial, bytes)};
      r.exchange(toParent);
      return;
    }
    if (vr + mask < n) {
      ensureAccumulator();
      const Transfer fromChild[] = {Transfer::recv(mod(vr + mask + root, n), incoming, bytes)};
      r.exchange(fromChild);
      reduce::reduceInPlace(accumulator, incoming, count, dtype, op);
    }
  }
  // Only the root gets here.
  if (op == vigilAvg) reduce::divideInPlace(recv, count, dtype, n);
}

}  // namespace vigil::algo
