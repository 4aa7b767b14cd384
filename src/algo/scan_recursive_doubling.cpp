// Prefix reductions (MPI_Scan, MPI_Exscan) by recursive doubling: in round k
// every rank exchanges its partial with the rank whose number differs in bit
// k, when that rank exists. The partial is the reduction over the rank's
// aligned group of 2^(k+1) ranks; only what comes from lower ranks joins the
// result. ceil(log2 n) rounds of the whole vector, for any n.
//
// Every combination puts the lower ranks' operand first, so rank r's result
// is x0 OP x1 OP ... OP xr in rank order up to association. Rank 0's
// exclusive result is the operation's identity (0 for sum, 1 for prod, the
// lowest value for max, ...): the reduction over no rank.

#include <cstring>
#include <utility>

#include "algo/algo.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

void scanRecursiveDoubling(StepRunner& r, const OpDesc& desc) {
  const bool inclusive = desc.kind == OpKind::Scan;
  const size_t count = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const vigilRedOp_t op = desc.redop;
  const size_t bytes = count * dtypeSize(dtype);
  const int n = r.nranks(), me = r.rank();
  auto* out = static_cast<uint8_t*>(desc.recv);
  if (count == 0) return;

  uint8_t* space = r.scratch(4 * bytes);
  uint8_t* partial = space;
  uint8_t* spareP = space + bytes;
  uint8_t* incoming = space + 2 * bytes;
  uint8_t* spareR = space + 3 * bytes;
  // The input is read once, before the result may overwrite it (in place).
  std::memcpy(partial, desc.send, bytes);
  if (inclusive && desc.send != out) std::memcpy(out, desc.send, bytes);
  if (me == 0 && !inclusive) reduce::fillIdentity(out, count, dtype, op == vigilAvg ? vigilSum : op);
  uint8_t* acc = out;  // the result so far; moves between out and scratch
  bool haveResult = inclusive;

  for (int mask = 1; mask < n; mask <<= 1) {
    const int partner = me ^ mask;
    if (partner >= n) continue;
    const Transfer step[] = {Transfer::send(partner, partial, bytes), Transfer::recv(partner, incoming, bytes)};
    r.exchange(step);
    if (partner > me) {
      reduce::reduceInPlace(partial, incoming, count, dtype, op);
      continue;
    }
    reduce::reduceInto(spareP, incoming, partial, count, dtype, op);
    std::swap(partial, spareP);
    if (!haveResult) {
      std::memcpy(acc, incoming, bytes);
      haveResult = true;
    } else {
      reduce::reduceInto(spareR, incoming, acc, count, dtype, op);
      std::swap(acc, spareR);
    }
  }
  if (acc != out) std::memcpy(out, acc, bytes);
  const int contributors = inclusive ? me + 1 : me;
  if (op == vigilAvg && contributors > 1) reduce::divideInPlace(out, count, dtype, contributors);
}

}  // namespace vigil::algo
