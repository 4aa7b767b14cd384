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

void allToAllVDirect(StepRunner& r, const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                     const size_t* recvcounts, const size_t* rdispls, vigilDataType_t dtype) {
  const size_t elem = dtypeSize(dtype);
  const int n = r.nranks(), me = r.rank();
  const auto* in = static_cast<const uint8_t*>(send);
  auto* out = static_cast<uint8_t*>(recv);
  const auto self = static_cast<size_t>(me);
  if (recvcounts[self] > 0) std::memcpy(out + rdispls[self] * elem, in + sdispls[self] * elem, recvcounts[self] * elem);
  std::vector<Transfer> step;
  step.reserve(2 * static_cast<size_t>(n));
  // Start with the neighbour after us so that not every rank hits rank 0 first.
  for (int k = 1; k < n; ++k) {
    const auto to = static_cast<size_t>(mod(me + k, n)), from = static_cast<size_t>(mod(me - k, n));
    step.push_back(Transfer::send(static_cast<int>(to), in + sdispls[to] * elem, sendcounts[to] * elem));
    step.push_back(Transfer::recv(static_cast<int>(from), out + rdispls[from] * elem, recvcounts[from] * elem));
  }
  if (!step.empty()) r.exchange(step);
}

}  // namespace vigil::algo
