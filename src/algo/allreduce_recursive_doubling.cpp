// Recursive-doubling allreduce for latency-bound sizes over sockets: log2(n)
// steps, each exchanging the whole vector with the partner whose rank
// differs in one bit. With n not a power of two, the first 2*rem ranks pair
// up first (even sends to odd, which joins on its behalf) and the even ones
// get the result at the end.
//
// Every combination is (lower ranks' partial) OP (higher ranks' partial), so
// all ranks compute the same expression tree and end with the same bits.

#include <cstring>
#include <utility>

#include "algo/algo.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

void allReduceRecursiveDoubling(StepRunner& r, const OpDesc& desc) {
  const size_t count = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const vigilRedOp_t op = desc.redop;
  const size_t bytes = count * dtypeSize(dtype);
  auto* out = static_cast<uint8_t*>(desc.recv);
  if (desc.send != desc.recv && bytes > 0) std::memcpy(out, desc.send, bytes);
  const int n = r.nranks(), me = r.rank();
  if (n == 1 || count == 0) return;
  int pof2 = 1;
  while (pof2 * 2 <= n) pof2 *= 2;
  const int rem = n - pof2;

  uint8_t* space = r.scratch(2 * bytes);
  uint8_t* incoming = space;
  uint8_t* spare = space + bytes;
  uint8_t* acc = out;  // the partial result; may move to scratch and back

  // Lower partial OP higher partial, into acc.
  auto combine = [&](bool incomingIsLower) {
    if (!incomingIsLower) {
      reduce::reduceInPlace(acc, incoming, count, dtype, op);
      return;
    }
    reduce::reduceInto(spare, incoming, acc, count, dtype, op);
    std::swap(acc, spare);
  };

  int newRank;
  if (me < 2 * rem) {
    if (me % 2 == 0) {  // hands its vector to me + 1 and waits for the result
      const Transfer give[] = {Transfer::send(me + 1, out, bytes)};
      r.exchange(give);
      const Transfer take[] = {Transfer::recv(me + 1, out, bytes)};
      r.exchange(take);
      return;
    }
    const Transfer take[] = {Transfer::recv(me - 1, incoming, bytes)};
    r.exchange(take);
    combine(true);
    newRank = me / 2;
  } else {
    newRank = me - rem;
  }
  auto realRank = [&](int nr) { return nr < rem ? 2 * nr + 1 : nr + rem; };

  for (int mask = 1; mask < pof2; mask <<= 1) {
    const int partner = realRank(newRank ^ mask);
    const Transfer step[] = {Transfer::send(partner, acc, bytes), Transfer::recv(partner, incoming, bytes)};
    r.exchange(step);
    combine((newRank & mask) != 0);
  }
  if (acc != out) std::memcpy(out, acc, bytes);
  if (op == vigilAvg) reduce::divideInPlace(out, count, dtype, n);
  if (me < 2 * rem) {  // odd partner of a folded even rank
    const Transfer give[] = {Transfer::send(me - 1, out, bytes)};
    r.exchange(give);
  }
}

}  // namespace vigil::algo
