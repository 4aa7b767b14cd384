// Dissemination barrier: in round k each rank signals rank + 2^k and waits
// for rank - 2^k. After ceil(log2 n) rounds every rank has transitively
// heard from every other, for any n (not only powers of two). The messages
// are empty; their headers still carry the fingerprint.

#include "algo/algo.hpp"

namespace vigil::algo {

void barrierDissemination(StepRunner& r, const OpDesc& /*op*/) {
  const int n = r.nranks(), me = r.rank();
  for (int k = 1; k < n; k <<= 1) {
    const Transfer round[] = {Transfer::send(mod(me + k, n), nullptr, 0), Transfer::recv(mod(me - k, n), nullptr, 0)};
    r.exchange(round);
  }
}

}  // namespace vigil::algo
