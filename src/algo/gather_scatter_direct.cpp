// Gather and scatter, root-centred: the root exchanges with every other rank
// in one step (all messages progress at once); the others make one transfer.
// The v-variants place rank p's block of counts[p] elements at displs[p]
// (the root's arrays); the others send or receive their own count. Every
// rank makes its transfer even when it is empty, so a root and a rank that
// disagree on a count meet in a size check instead of waiting for each other.

#include <cstring>
#include <vector>

#include "algo/algo.hpp"
#include "core/dtype.hpp"

namespace vigil::algo {

namespace {

// Where rank p's block sits in the root's buffer, in elements.
struct RootLayout {
  const size_t* counts = nullptr;  // null: `uniform` elements per rank, in rank order
  const size_t* displs = nullptr;
  size_t uniform = 0;
  size_t count(int p) const { return counts != nullptr ? counts[p] : uniform; }
  size_t displ(int p) const { return displs != nullptr ? displs[p] : static_cast<size_t>(p) * uniform; }
};

void gatherTo(StepRunner& r, const OpDesc& op, const RootLayout& at) {
  const size_t elem = dtypeSize(op.dtype);
  const int root = op.root;
  const int n = r.nranks(), me = r.rank();
  if (me != root) {
    const Transfer toRoot[] = {Transfer::send(root, op.send, op.count * elem)};
    r.exchange(toRoot);
    return;
  }
  auto* out = static_cast<uint8_t*>(op.recv);
  uint8_t* mine = out + at.displ(me) * elem;
  if (op.send != mine && op.count > 0) std::memcpy(mine, op.send, op.count * elem);
  std::vector<Transfer> step;
  for (int p = 0; p < n; ++p) {
    if (p != me) step.push_back(Transfer::recv(p, out + at.displ(p) * elem, at.count(p) * elem));
  }
  if (!step.empty()) r.exchange(step);
}

void scatterFrom(StepRunner& r, const OpDesc& op, const RootLayout& at) {
  const size_t elem = dtypeSize(op.dtype);
  const int root = op.root;
  const int n = r.nranks(), me = r.rank();
  if (me != root) {
    const Transfer fromRoot[] = {Transfer::recv(root, op.recv, op.count * elem)};
    r.exchange(fromRoot);
    return;
  }
  const auto* in = static_cast<const uint8_t*>(op.send);
  const uint8_t* mine = in + at.displ(me) * elem;
  if (op.recv != mine && op.count > 0) std::memcpy(op.recv, mine, op.count * elem);
  std::vector<Transfer> step;
  for (int p = 0; p < n; ++p) {
    if (p != me) step.push_back(Transfer::send(p, in + at.displ(p) * elem, at.count(p) * elem));
  }
  if (!step.empty()) r.exchange(step);
}

}  // namespace

void gatherDirect(StepRunner& r, const OpDesc& op) {
  gatherTo(r, op, {.uniform = op.count});
}

void scatterDirect(StepRunner& r, const OpDesc& op) {
  scatterFrom(r, op, {.uniform = op.count});
}

void gatherVDirect(StepRunner& r, const OpDesc& op) {
  gatherTo(r, op, {.counts = op.recvcounts, .displs = op.rdispls});
}

void scatterVDirect(StepRunner& r, const OpDesc& op) {
  scatterFrom(r, op, {.counts = op.sendcounts, .displs = op.sdispls});
}

}  // namespace vigil::algo
