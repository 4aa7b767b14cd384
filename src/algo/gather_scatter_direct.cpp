// Gather and scatter, root-centred: the root exchanges with every other rank
// in one step (all messages progress at once); the others make one transfer.

#include <cstring>
#include <vector>

#include "algo/algo.hpp"
#include "core/dtype.hpp"

namespace vigil::algo {

void gatherDirect(StepRunner& r, const OpDesc& op) {
  const size_t block = op.count * dtypeSize(op.dtype);
  const int root = op.root;
  const void* send = op.send;
  const int n = r.nranks(), me = r.rank();
  if (me != root) {
    const Transfer toRoot[] = {Transfer::send(root, send, block)};
    r.exchange(toRoot);
    return;
  }
  auto* out = static_cast<uint8_t*>(op.recv);
  uint8_t* mine = out + static_cast<size_t>(me) * block;
  if (send != mine && block > 0) std::memcpy(mine, send, block);
  std::vector<Transfer> step;
  for (int p = 0; p < n; ++p) {
    if (p != me) step.push_back(Transfer::recv(p, out + static_cast<size_t>(p) * block, block));
  }
  if (!step.empty()) r.exchange(step);
}

void scatterDirect(StepRunner& r, const OpDesc& op) {
  const size_t block = op.count * dtypeSize(op.dtype);
  const int root = op.root;
  void* recv = op.recv;
  const int n = r.nranks(), me = r.rank();
  if (me != root) {
    const Transfer fromRoot[] = {Transfer::recv(root, recv, block)};
    r.exchange(fromRoot);
    return;
  }
  const auto* in = static_cast<const uint8_t*>(op.send);
  const uint8_t* mine = in + static_cast<size_t>(me) * block;
  if (recv != mine && block > 0) std::memcpy(recv, mine, block);
  std::vector<Transfer> step;
  for (int p = 0; p < n; ++p) {
    if (p != me) step.push_back(Transfer::send(p, in + static_cast<size_t>(p) * block, block));
  }
  if (!step.empty()) r.exchange(step);
}

}  // namespace vigil::algo
