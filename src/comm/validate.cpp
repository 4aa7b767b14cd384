// Argument checks against the communicator, before any byte moves: a bad
// call fails on the calling rank with an id, and the communicator stays usable.

#include <limits>
#include <utility>

#include "comm/communicator.hpp"
#include "core/dtype.hpp"
#include "core/strcat.hpp"

namespace vigil {
namespace {

// A buffer of `bytes` at `p` that would end past the address space.
bool wraps(const void* p, size_t bytes) {
  return bytes > std::numeric_limits<uintptr_t>::max() - reinterpret_cast<uintptr_t>(p);
}

// Only for buffers that do not wrap (checked first).
bool overlaps(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  if (aBytes == 0 || bBytes == 0) return false;
  auto pa = reinterpret_cast<uintptr_t>(a), pb = reinterpret_cast<uintptr_t>(b);
  return pa < pb + bBytes && pb < pa + aBytes;
}

// How many count-sized blocks the op's send and receive buffers span here.
std::pair<size_t, size_t> blocksOf(const OpDesc& op, bool isRoot, size_t n) {
  switch (op.kind) {
    case OpKind::AllGather:
    case OpKind::Split: return {1, n};
    case OpKind::Gather: return {1, isRoot ? n : 0};
    case OpKind::ReduceScatter: return {n, 1};
    case OpKind::Scatter: return {isRoot ? n : 0, 1};
    case OpKind::AllToAll: return {n, n};
    case OpKind::Broadcast: return {isRoot ? 1 : 0, 1};
    case OpKind::Reduce: return {1, isRoot ? 1 : 0};
    case OpKind::Send: return {1, 0};
    case OpKind::Recv: return {0, 1};
    case OpKind::AllToAllV:
    case OpKind::AllGatherV:
    case OpKind::GatherV:
    case OpKind::ScatterV:
    case OpKind::ReduceScatterV:
    case OpKind::Barrier: return {0, 0};  // the v-variants check their arrays themselves
    default: return {1, 1};
  }
}

// The checks of one call, in the order a user would fix them: scalars, then the size of
// the buffers, then the buffers themselves.
class OpCheck {
 public:
  OpCheck(const Communicator& comm, const OpDesc& op)
      : comm_(comm),
        op_(op),
        name_(opName(op.kind)),
        n_(static_cast<size_t>(comm.nranks())),
        isRoot_(op.root == comm.rank()) {}

  void scalars() const {
    if (!validDataType(op_.dtype))
      fail(Errc::ApiBadDataType).cause("data type ", int(op_.dtype), " is not a vigilDataType_t").raise();
    if (op_.hasRedOp()) redOp();
    const int nranks = comm_.nranks();
    if (op_.hasRoot() && (op_.root < 0 || op_.root >= nranks)) {
      fail(Errc::ApiBadRoot).cause("root ", op_.root, " is outside [0, ", nranks, ")").raise();
    }
    const bool anySource = op_.tagged && op_.kind == OpKind::Recv && op_.peer == VIGIL_ANY_SOURCE;
    if (isPointToPoint(op_.kind) && !anySource && (op_.peer < 0 || op_.peer >= nranks)) {
      fail(Errc::ApiBadPeer)
          .cause("peer ", op_.peer, " is outside [0, ", nranks, ")",
                 op_.tagged && op_.kind == OpKind::Recv ? " and not VIGIL_ANY_SOURCE" : "")
          .raise();
    }
    if (op_.tagged && op_.tag < 0 && !(op_.kind == OpKind::Recv && op_.tag == VIGIL_ANY_TAG)) {
      fail(Errc::ApiBadTag)
          .cause("tag ", op_.tag, " is negative",
                 op_.kind == OpKind::Send ? " (a send names its tag; VIGIL_ANY_TAG is for receives)" : "")
          .raise();
    }
  }

  // The operator is one vigil has, and defined on the data type.
  void redOp() const {
    const vigilRedOp_t op = op_.redop;
    if (op == kRedOpPreMulSum ? !op_.preMul : !validRedOp(op)) {
      fail(Errc::ApiBadRedOp)
          .cause("reduction ", int(op), " is not a vigilRedOp_t",
                 createdRedOp(op) ? " nor an operator of this communicator" : "")
          .raise();
    }
    if (integerOnlyRedOp(op) && isFloatingType(op_.dtype)) {
      fail(Errc::ApiBadRedOp)
          .cause("reduction ", redOpName(op), " is defined on integer data types only, not on ", dtypeName(op_.dtype))
          .raise();
    }
    if (locRedOp(op) && !isLocPairType(op_.dtype)) {
      fail(Errc::ApiBadRedOp)
          .cause("reduction ", redOpName(op),
                 " is defined on the (value, index) pair types only (vigilFloat32Int32, vigilFloat64Int32, "
                 "vigilInt32Int32, vigilInt64Int32), not on ",
                 dtypeName(op_.dtype))
          .raise();
    }
    if (!locRedOp(op) && isLocPairType(op_.dtype)) {
      fail(Errc::ApiBadRedOp)
          .cause("reduction ", redOpName(op), " is not defined on the (value, index) pair type ", dtypeName(op_.dtype),
                 ": reduce pairs with vigilMinLoc or vigilMaxLoc")
          .raise();
    }
  }

  // The count times the element size, for every block the op spans, fits the address space.
  void extent() {
    elem_ = dtypeSize(op_.dtype);
    // The largest buffer an op touches is count * nranks elements.
    if (op_.count > std::numeric_limits<size_t>::max() / elem_ / n_) {
      fail(Errc::ApiCountOverflow).cause("count ", op_.count, " of ", dtypeName(op_.dtype), " overflows").raise();
    }
    bytes_ = op_.count * elem_;
    const auto [sendBlocks, recvBlocks] = blocksOf(op_, isRoot_, n_);
    const bool sendWraps = op_.send && wraps(op_.send, bytes_ * sendBlocks);
    if (sendWraps || (op_.recv && wraps(op_.recv, bytes_ * recvBlocks))) {
      fail(Errc::ApiCountOverflow)
          .cause("count ", op_.count, " of ", dtypeName(op_.dtype), " from ", sendWraps ? "sendbuff " : "recvbuff ",
                 sendWraps ? op_.send : op_.recv, " runs past the end of the address space")
          .raise();
    }
  }

  void buffers() const {
    const bool any = bytes_ > 0;
    switch (op_.kind) {
      case OpKind::AllReduce: return sameSize(any, any, true);
      case OpKind::Broadcast: return sameSize(isRoot_ && any, any, isRoot_, "sendbuff (at the root)");
      case OpKind::Reduce: return sameSize(any, isRoot_ && any, isRoot_, "sendbuff", "recvbuff (at the root)");
      case OpKind::AllGather:
      case OpKind::Split:
        return oneInMany(/*oneIsSend=*/true, any, any, true, "sendbuff", "recvbuff",
                         "sendbuff overlaps recvbuff but is not recvbuff + rank*sendcount (the in-place form)");
      case OpKind::ReduceScatter:
        return oneInMany(/*oneIsSend=*/false, any, any, true, "recvbuff", "sendbuff",
                         "recvbuff overlaps sendbuff but is not sendbuff + rank*recvcount (the in-place form)");
      case OpKind::Gather:
        return oneInMany(/*oneIsSend=*/true, any, isRoot_ && any, isRoot_, "sendbuff", "recvbuff (at the root)",
                         "sendbuff overlaps recvbuff but is not recvbuff + root*sendcount");
      case OpKind::Scatter:
        return oneInMany(/*oneIsSend=*/false, any, isRoot_ && any, isRoot_, "recvbuff", "sendbuff (at the root)",
                         "recvbuff overlaps sendbuff but is not sendbuff + root*recvcount");
      case OpKind::AllToAll:
        need(op_.send, any, "sendbuff");
        need(op_.recv, any, "recvbuff");
        if (overlaps(op_.send, bytes_ * n_, op_.recv, bytes_ * n_)) {
          fail(Errc::ApiBadAliasing).cause("alltoall has no in-place form; sendbuff and recvbuff overlap").raise();
        }
        return;
      case OpKind::AllToAllV: return allToAllV();
      case OpKind::AllGatherV: return allGatherV();
      case OpKind::GatherV: return gatherV();
      case OpKind::ScatterV: return scatterV();
      case OpKind::ReduceScatterV: return reduceScatterV();
      case OpKind::Scan:
      case OpKind::Exscan: return sameSize(any, any, true);
      case OpKind::Barrier: return;
      case OpKind::Send: return need(op_.send, any, "sendbuff");
      case OpKind::Recv: return need(op_.recv, any, "recvbuff");
    }
  }

 private:
  ErrorBuilder fail(Errc errc) const { return comm_.error(errc).op(name_); }

  void need(const void* p, bool required, const char* what) const {
    if (required && p == nullptr) {
      fail(Errc::ApiNullArgument)
          .cause(what, " is NULL but ", bytes_ > 0 ? "the count is " : "must be given: count ", op_.count)
          .raise();
    }
  }

  // Send and receive buffers of count elements each: equal (in place) or apart.
  void sameSize(bool needSend, bool needRecv, bool bothUsed, const char* sendName = "sendbuff",
                const char* recvName = "recvbuff") const {
    need(op_.send, needSend, sendName);
    need(op_.recv, needRecv, recvName);
    if (bothUsed && op_.send != op_.recv && overlaps(op_.send, bytes_, op_.recv, bytes_)) {
      fail(Errc::ApiBadAliasing).cause("sendbuff and recvbuff overlap without being equal").raise();
    }
  }

  // One buffer of count elements (sendbuff when oneIsSend) and one of nranks blocks (the
  // other): the one is block `rank` of the many (in place) or apart from it.
  void oneInMany(bool oneIsSend, bool needOne, bool needMany, bool bothUsed, const char* oneName, const char* manyName,
                 const char* overlapCause) const {
    const void* one = oneIsSend ? op_.send : op_.recv;
    const void* many = oneIsSend ? op_.recv : op_.send;
    need(op_.send, oneIsSend ? needOne : needMany, oneIsSend ? oneName : manyName);
    need(op_.recv, oneIsSend ? needMany : needOne, oneIsSend ? manyName : oneName);
    const void* inPlace = static_cast<const uint8_t*>(many) + static_cast<size_t>(comm_.rank()) * bytes_;
    if (bothUsed && one != inPlace && overlaps(one, bytes_, many, bytes_ * n_)) {
      fail(Errc::ApiBadAliasing).cause(overlapCause).raise();
    }
  }

  void allToAllV() const {
    if (!op_.sendcounts || !op_.sdispls || !op_.recvcounts || !op_.rdispls) {
      fail(Errc::ApiNullArgument).cause("sendcounts, sdispls, recvcounts and rdispls must all be given").raise();
    }
    size_t sendEnd = 0, recvEnd = 0;
    const size_t limit = std::numeric_limits<size_t>::max() / elem_;
    // displ + count <= limit, written so that neither side can wrap.
    auto fits = [limit](size_t count, size_t displ) { return displ <= limit && count <= limit - displ; };
    for (size_t p = 0; p < n_; ++p) {
      const bool sendOk = fits(op_.sendcounts[p], op_.sdispls[p]);
      if (!sendOk || !fits(op_.recvcounts[p], op_.rdispls[p])) {
        fail(Errc::ApiCountOverflow)
            .cause(sendOk ? "rdispls[" : "sdispls[", p, "] + ", sendOk ? "recvcounts[" : "sendcounts[", p,
                   "] = ", sendOk ? op_.rdispls[p] : op_.sdispls[p], " + ",
                   sendOk ? op_.recvcounts[p] : op_.sendcounts[p], " elements of ", dtypeName(op_.dtype),
                   " overflows the address space")
            .raise();
      }
      sendEnd = std::max(sendEnd, op_.sdispls[p] + op_.sendcounts[p]);
      recvEnd = std::max(recvEnd, op_.rdispls[p] + op_.recvcounts[p]);
    }
    need(op_.send, sendEnd > 0, "sendbuff");
    need(op_.recv, recvEnd > 0, "recvbuff");
    if (wraps(op_.send, sendEnd * elem_) || wraps(op_.recv, recvEnd * elem_)) {
      fail(Errc::ApiCountOverflow)
          .cause(wraps(op_.send, sendEnd * elem_) ? "sendbuff" : "recvbuff",
                 " + the largest displacement + count runs past the end of the address space")
          .raise();
    }
    if (overlaps(op_.send, sendEnd * elem_, op_.recv, recvEnd * elem_)) {
      fail(Errc::ApiBadAliasing).cause("alltoallv has no in-place form; sendbuff and recvbuff overlap").raise();
    }
  }

  // The end, in elements, of the blocks that counts (and displs; null: one
  // after another in rank order) lay out, each checked not to overflow.
  size_t blocksEnd(const size_t* counts, const size_t* displs, const char* countsName, const char* displsName) const {
    const size_t limit = std::numeric_limits<size_t>::max() / elem_;
    size_t end = 0, next = 0;
    for (size_t p = 0; p < n_; ++p) {
      const size_t displ = displs != nullptr ? displs[p] : next;
      if (displ > limit || counts[p] > limit - displ) {
        fail(Errc::ApiCountOverflow)
            .cause(countsName, "[", p, "] = ", counts[p], " elements of ", dtypeName(op_.dtype),
                   displs != nullptr ? cat(" at ", displsName, "[", p, "] = ", displ)
                                     : cat(" after the ", displ, " of the blocks before it"),
                   " overflow the address space")
            .raise();
      }
      next = displ + counts[p];
      end = std::max(end, next);
    }
    return end;
  }

  void needArrays(const size_t* counts, const char* countsName, const size_t* displs, const char* displsName,
                  bool displsUsed = true) const {
    if (counts == nullptr || (displsUsed && displs == nullptr)) {
      fail(Errc::ApiNullArgument)
          .cause(displsUsed ? cat(countsName, " and ", displsName, " must both be given") : cat(countsName, " is NULL"),
                 isRoot_ && op_.hasRoot() ? " at the root" : "")
          .raise();
    }
  }

  // counts[at] (this rank's own block) against the call's own count.
  void ownCount(const size_t* counts, const char* countsName, size_t at, const char* countName) const {
    if (counts[at] != op_.count) {
      fail(Errc::ApiCountsContradict)
          .cause(countsName, "[", at, "] = ", counts[at], " but ", countName, " = ", op_.count, ": the block rank ", at,
                 " (this rank) copies to itself would have two sizes")
          .raise();
    }
  }

  // A buffer of `elems` elements: given when non-empty, inside the address space.
  void region(const void* p, size_t elems, const char* name) const {
    if (elems > 0 && p == nullptr) {
      fail(Errc::ApiNullArgument)
          .cause(name, " is NULL but holds ", elems, " elements of ", dtypeName(op_.dtype))
          .raise();
    }
    if (p != nullptr && wraps(p, elems * elem_)) {
      fail(Errc::ApiCountOverflow)
          .cause(name, " + ", elems, " elements of ", dtypeName(op_.dtype), " runs past the end of the address space")
          .raise();
    }
  }

  // `one` (oneElems) is exactly element `at` of `many` (the in-place form) or apart from it.
  void inPlaceOrApart(const void* one, size_t oneElems, const void* many, size_t manyElems, size_t at,
                      const char* overlapCause) const {
    if (one == nullptr || many == nullptr) return;
    const void* inPlace = static_cast<const uint8_t*>(many) + at * elem_;
    if (one != inPlace && overlaps(one, oneElems * elem_, many, manyElems * elem_)) {
      fail(Errc::ApiBadAliasing).cause(overlapCause).raise();
    }
  }

  void allGatherV() const {
    needArrays(op_.recvcounts, "recvcounts", op_.rdispls, "rdispls");
    const size_t end = blocksEnd(op_.recvcounts, op_.rdispls, "recvcounts", "rdispls");
    const auto me = static_cast<size_t>(comm_.rank());
    ownCount(op_.recvcounts, "recvcounts", me, "sendcount");
    region(op_.send, op_.count, "sendbuff");
    region(op_.recv, end, "recvbuff");
    inPlaceOrApart(op_.send, op_.count, op_.recv, end, op_.rdispls[me],
                   "sendbuff overlaps recvbuff but is not recvbuff + rdispls[rank] (the in-place form)");
  }

  void gatherV() const {
    region(op_.send, op_.count, "sendbuff");
    if (!isRoot_) return;  // the arrays and recvbuff are the root's
    needArrays(op_.recvcounts, "recvcounts", op_.rdispls, "rdispls");
    const size_t end = blocksEnd(op_.recvcounts, op_.rdispls, "recvcounts", "rdispls");
    const auto root = static_cast<size_t>(op_.root);
    ownCount(op_.recvcounts, "recvcounts", root, "sendcount");
    region(op_.recv, end, "recvbuff (at the root)");
    inPlaceOrApart(op_.send, op_.count, op_.recv, end, op_.rdispls[root],
                   "sendbuff overlaps recvbuff but is not recvbuff + rdispls[root] (the in-place form)");
  }

  void scatterV() const {
    region(op_.recv, op_.count, "recvbuff");
    if (!isRoot_) return;  // the arrays and sendbuff are the root's
    needArrays(op_.sendcounts, "sendcounts", op_.sdispls, "sdispls");
    const size_t end = blocksEnd(op_.sendcounts, op_.sdispls, "sendcounts", "sdispls");
    const auto root = static_cast<size_t>(op_.root);
    ownCount(op_.sendcounts, "sendcounts", root, "recvcount");
    region(op_.send, end, "sendbuff (at the root)");
    inPlaceOrApart(op_.recv, op_.count, op_.send, end, op_.sdispls[root],
                   "recvbuff overlaps sendbuff but is not sendbuff + sdispls[root] (the in-place form)");
  }

  void reduceScatterV() const {
    needArrays(op_.recvcounts, "recvcounts", nullptr, nullptr, /*displsUsed=*/false);
    const size_t end = blocksEnd(op_.recvcounts, nullptr, "recvcounts", nullptr);
    const auto me = static_cast<size_t>(comm_.rank());
    size_t mine = 0;
    for (size_t p = 0; p < me; ++p) mine += op_.recvcounts[p];
    region(op_.send, end, "sendbuff");
    region(op_.recv, op_.recvcounts[me], "recvbuff");
    inPlaceOrApart(
        op_.recv, op_.recvcounts[me], op_.send, end, mine,
        "recvbuff overlaps sendbuff but is not sendbuff + the blocks of the lower ranks (the in-place form)");
  }

  const Communicator& comm_;
  const OpDesc& op_;
  const char* name_;
  const size_t n_;
  const bool isRoot_;
  size_t elem_ = 1, bytes_ = 0;
};

}  // namespace

void Communicator::validate(const OpDesc& op) const {
  OpCheck check(*this, op);
  check.scalars();
  check.extent();
  check.buffers();
}

}  // namespace vigil
