#include "perf_colls.hpp"

#include <iterator>

namespace vigil::perf {
namespace {

const CollInfo kColls[] = {
    {Coll::AllReduce, "allreduce", true, false, false},
    {Coll::AllGather, "allgather", false, false, true},
    {Coll::ReduceScatter, "reducescatter", true, false, true},
    {Coll::AllToAll, "alltoall", false, false, true},
    {Coll::Broadcast, "broadcast", false, true, false},
    {Coll::Reduce, "reduce", true, true, false},
    {Coll::Gather, "gather", false, true, true},
    {Coll::Scatter, "scatter", false, true, true},
    {Coll::SendRecv, "sendrecv", false, false, false},
    {Coll::SendRecvTag, "sendrecv_tag", false, false, false},
    {Coll::SendRecvAny, "sendrecv_any", false, false, false},
};

// Elements this rank's send buffer holds for the call: count, or one block per rank.
size_t sendElements(const Call& c) {
  const size_t n = static_cast<size_t>(c.nranks);
  switch (c.coll) {
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::Scatter: return c.count * n;
    default: return c.count;
  }
}

size_t recvElements(const Call& c) {
  const size_t n = static_cast<size_t>(c.nranks);
  switch (c.coll) {
    case Coll::AllGather:
    case Coll::AllToAll:
    case Coll::Gather: return c.count * n;
    default: return c.count;
  }
}

int previousRank(const Call& c) {
  return (c.rank + c.nranks - 1) % c.nranks;
}
int nextRank(const Call& c) {
  return (c.rank + 1) % c.nranks;
}

}  // namespace

const CollInfo& collInfo(Coll coll) {
  return kColls[static_cast<size_t>(coll)];
}

const CollInfo* allColls(size_t* howMany) {
  *howMany = std::size(kColls);
  return kColls;
}

double busBandwidthFactor(Coll coll, int nranks) {
  const double n = nranks;
  switch (coll) {
    // Each rank sends and receives 2(n-1)/n of the buffer in a ring: reduce-scatter + allgather.
    case Coll::AllReduce: return 2 * (n - 1) / n;
    // Each rank receives (or the root moves) n-1 of the n blocks; its own block stays local.
    case Coll::AllGather:
    case Coll::ReduceScatter:
    case Coll::AllToAll:
    case Coll::Gather:
    case Coll::Scatter: return (n - 1) / n;
    // The whole buffer crosses one link once.
    case Coll::Broadcast:
    case Coll::Reduce:
    case Coll::SendRecv:
    case Coll::SendRecvTag:
    case Coll::SendRecvAny: return 1;
  }
  return 1;
}

size_t countFor(Coll coll, size_t bytes, int nranks, vigilDataType_t dtype) {
  const size_t elements = bytes / dtypeInfo(dtype).size;
  return collInfo(coll).splitsByRanks ? elements / static_cast<size_t>(nranks) : elements;
}

vigilResult_t runCall(const Call& c) {
  switch (c.coll) {
    case Coll::AllReduce: return vigilAllReduce(c.send, c.recv, c.count, c.dtype, c.op, c.comm, nullptr);
    case Coll::AllGather: return vigilAllGather(c.send, c.recv, c.count, c.dtype, c.comm, nullptr);
    case Coll::ReduceScatter: return vigilReduceScatter(c.send, c.recv, c.count, c.dtype, c.op, c.comm, nullptr);
    case Coll::AllToAll: return vigilAllToAll(c.send, c.recv, c.count, c.dtype, c.comm, nullptr);
    case Coll::Broadcast: return vigilBroadcast(c.send, c.recv, c.count, c.dtype, c.root, c.comm, nullptr);
    case Coll::Reduce: return vigilReduce(c.send, c.recv, c.count, c.dtype, c.op, c.root, c.comm, nullptr);
    case Coll::Gather: return vigilGather(c.send, c.recv, c.count, c.dtype, c.root, c.comm, nullptr);
    case Coll::Scatter: return vigilScatter(c.send, c.recv, c.count, c.dtype, c.root, c.comm, nullptr);
    case Coll::SendRecv: {
      vigilResult_t result = vigilGroupStart();
      if (result != vigilSuccess) return result;
      // Issue both before either completes: a blocking send alone would wait for its receiver.
      const vigilResult_t sent = vigilSend(c.send, c.count, c.dtype, nextRank(c), c.comm, nullptr);
      const vigilResult_t received = vigilRecv(c.recv, c.count, c.dtype, previousRank(c), c.comm, nullptr);
      result = vigilGroupEnd();  // always close the group, even after a refused call
      if (sent != vigilSuccess) return sent;
      if (received != vigilSuccess) return received;
      return result;
    }
    case Coll::SendRecvTag:
      return vigilSendRecv(c.send, c.count, c.dtype, nextRank(c), c.rank, c.recv, c.count, c.dtype, previousRank(c),
                           previousRank(c), c.comm, nullptr, nullptr);
    case Coll::SendRecvAny: {
      // Any source cannot share a batch with a send: odd ranks receive first,
      // even ranks send first (with 2 ranks, a ping-pong).
      const bool sendFirst = c.rank % 2 == 0;
      vigilResult_t result = vigilSuccess;
      for (int step = 0; step < 2 && result == vigilSuccess; ++step) {
        result = (step == 0) == sendFirst ? vigilSendTag(c.send, c.count, c.dtype, nextRank(c), c.rank, c.comm, nullptr)
                                          : vigilRecvTag(c.recv, c.count, c.dtype, VIGIL_ANY_SOURCE, previousRank(c),
                                                         c.comm, nullptr, nullptr);
      }
      return result;
    }
  }
  return vigilInvalidArgument;
}

void fillInputs(const Call& c, const Pattern& pattern) {
  fillBuffer(c.send, sendElements(c), c.dtype, [&](size_t i) { return pattern.input(c.rank, i); });
}

void prepareCheck(const Call& c, const Pattern& pattern) {
  fillInputs(c, pattern);
  poisonBuffer(c.recv, recvElements(c), c.dtype);
}

size_t countWrongOutputs(const Call& c, const Pattern& p) {
  const size_t count = c.count;
  const size_t rankOffset = static_cast<size_t>(c.rank) * count;
  const double tol = p.tolerance();
  // Block b of an n-block output came from rank b.
  auto blockRank = [count](size_t i) { return static_cast<int>(i / count); };
  switch (c.coll) {
    case Coll::AllReduce: return countWrong(c.recv, count, c.dtype, tol, [&](size_t i) { return p.reduced(i); });
    case Coll::Reduce:
      if (c.rank != c.root) return 0;
      return countWrong(c.recv, count, c.dtype, tol, [&](size_t i) { return p.reduced(i); });
    case Coll::ReduceScatter:
      return countWrong(c.recv, count, c.dtype, tol, [&](size_t i) { return p.reduced(rankOffset + i); });
    case Coll::Gather:
      if (c.rank != c.root) return 0;
      [[fallthrough]];
    case Coll::AllGather:
      return countWrong(c.recv, recvElements(c), c.dtype, tol,
                        [&](size_t i) { return p.input(blockRank(i), i % count); });
    case Coll::AllToAll:
      return countWrong(c.recv, recvElements(c), c.dtype, tol,
                        [&](size_t i) { return p.input(blockRank(i), rankOffset + i % count); });
    case Coll::Broadcast: return countWrong(c.recv, count, c.dtype, tol, [&](size_t i) { return p.input(c.root, i); });
    case Coll::Scatter:
      return countWrong(c.recv, count, c.dtype, tol, [&](size_t i) { return p.input(c.root, rankOffset + i); });
    case Coll::SendRecv:
    case Coll::SendRecvTag:
    case Coll::SendRecvAny:
      return countWrong(c.recv, count, c.dtype, tol, [&](size_t i) { return p.input(previousRank(c), i); });
  }
  return 0;
}

}  // namespace vigil::perf
