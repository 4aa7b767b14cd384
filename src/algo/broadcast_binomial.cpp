// Binomial-tree broadcast: in round k every rank that has the data sends it
// to the rank 2^k further away (relative to the root), so all n ranks have
// it after ceil(log2 n) rounds. A rank forwards to all its children in one
// step; their sends progress concurrently.

#include <cstring>
#include <vector>

#include "algo/algo.hpp"
#include "core/dtype.hpp"

namespace vigil::algo {

void broadcastBinomial(StepRunner& r, const OpDesc& op) {
  const size_t bytes = op.count * dtypeSize(op.dtype);
  const int root = op.root;
  const void* send = op.send;
  void* recv = op.recv;
  const int n = r.nranks(), me = r.rank();
  if (me == root && send != recv && bytes > 0) std::memcpy(recv, send, bytes);
  if (n == 1) return;
  const int vr = mod(me - root, n);  // rank relative to the root
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      const Transfer fromParent[] = {Transfer::recv(mod(vr - mask + root, n), recv, bytes)};
      r.exchange(fromParent);
      break;
    }
    mask <<= 1;
  }
  std::vector<Transfer> toChildren;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) toChildren.push_back(Transfer::send(mod(vr + mask + root, n), recv, bytes));
  }
  if (!toChildren.empty()) r.exchange(toChildren);
}

}  // namespace vigil::algo
