// Ring allreduce = ring reduce-scatter + ring allgather over n nearly equal
// blocks of the vector (ring.hpp), both pipelined. The reduce-scatter keeps
// its partial results in the output itself, so the input is never copied
// whole, in place or not; block r ends on rank r and the allgather passes
// it round. Each block is reduced on one chain of ranks and then copied
// everywhere, so every rank ends with bit-identical results. Each rank
// moves 2(n-1)/n of the buffer: bandwidth-optimal for large counts.

#include <cstring>

#include "algo/ring.hpp"
#include "core/dtype.hpp"

namespace vigil::algo {

void allReduceRing(StepRunner& r, const OpDesc& op) {
  const size_t elem = dtypeSize(op.dtype);
  const auto* in = static_cast<const uint8_t*>(op.send);
  auto* out = static_cast<uint8_t*>(op.recv);
  const int n = r.nranks();
  if (n == 1) {
    if (in != out && op.count > 0) std::memcpy(out, in, op.count * elem);
    return;  // avg over one rank is the value itself
  }
  const Blocks blocks{op.count, n};
  ringReduceScatter(r, {.input = in,
                        .owned = out + blocks.begin(r.rank()) * elem,
                        .partials = out,
                        .blocks = blocks,
                        .dtype = op.dtype,
                        .op = op.redop});
  ringAllGather(r, out, blocks, elem);
}

}  // namespace vigil::algo
