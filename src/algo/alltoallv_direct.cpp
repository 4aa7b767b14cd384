// All-to-all(v) in one step: every rank sends each peer its block and
// receives each peer's block at once; the data plane progresses all 2(n-1)
// messages together, so no rank waits for a turn. Right for the modest rank
// counts one host or a TCP cluster of a few hosts has; a pairwise schedule
// replaces it when the rank count grows.

#include <cstring>
#include <vector>

#include "algo/algo.hpp"
#include "core/dtype.hpp"

namespace vigil::algo {

namespace {

// Where each peer's block sits, in elements: the all-to-all-v arrays, or
// equal blocks of `uniform` elements (all-to-all) without any array.
struct BlockLayout {
  const size_t* counts = nullptr;
  const size_t* displs = nullptr;
  size_t uniform = 0;
  size_t count(size_t peer) const { return counts != nullptr ? counts[peer] : uniform; }
  size_t displ(size_t peer) const { return displs != nullptr ? displs[peer] : peer * uniform; }
};

void exchangeBlocks(StepRunner& r, const OpDesc& op, const BlockLayout& sent, const BlockLayout& received) {
  const size_t elem = dtypeSize(op.dtype);
  const int n = r.nranks(), me = r.rank();
  const auto* in = static_cast<const uint8_t*>(op.send);
  auto* out = static_cast<uint8_t*>(op.recv);
  const auto self = static_cast<size_t>(me);
  if (received.count(self) > 0) {
    std::memcpy(out + received.displ(self) * elem, in + sent.displ(self) * elem, received.count(self) * elem);
  }
  std::vector<Transfer> step;
  step.reserve(2 * static_cast<size_t>(n));
  // Start with the neighbour after us so that not every rank hits rank 0 first.
  for (int k = 1; k < n; ++k) {
    const auto to = static_cast<size_t>(mod(me + k, n)), from = static_cast<size_t>(mod(me - k, n));
    step.push_back(Transfer::send(static_cast<int>(to), in + sent.displ(to) * elem, sent.count(to) * elem));
    step.push_back(
        Transfer::recv(static_cast<int>(from), out + received.displ(from) * elem, received.count(from) * elem));
  }
  if (!step.empty()) r.exchange(step);
}

}  // namespace

void allToAllVDirect(StepRunner& r, const OpDesc& op) {
  exchangeBlocks(r, op, {.counts = op.sendcounts, .displs = op.sdispls},
                 {.counts = op.recvcounts, .displs = op.rdispls});
}

void allToAllDirect(StepRunner& r, const OpDesc& op) {
  exchangeBlocks(r, op, {.uniform = op.count}, {.uniform = op.count});
}

}  // namespace vigil::algo
