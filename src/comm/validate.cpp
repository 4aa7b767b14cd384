// Argument checks against the communicator, before any byte moves: a bad
// call fails on the calling rank with an id, and the communicator stays usable.

#include <limits>
#include <utility>

#include "comm/communicator.hpp"
#include "core/dtype.hpp"

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
    case OpKind::Barrier: return {0, 0};  // all-to-all-v checks its displacements itself
    default: return {1, 1};
  }
}

}  // namespace

void Communicator::validate(const OpDesc& op) const {
  const char* name = opName(op.kind);
  auto fail = [&](Errc errc) { return error(errc).op(name); };
  if (!validDataType(op.dtype))
    fail(Errc::ApiBadDataType).cause("data type ", int(op.dtype), " is not a vigilDataType_t").raise();
  if (op.hasRedOp() && !validRedOp(op.redop)) {
    fail(Errc::ApiBadRedOp).cause("reduction ", int(op.redop), " is not a vigilRedOp_t").raise();
  }
  if (op.hasRoot() && (op.root < 0 || op.root >= nranks_)) {
    fail(Errc::ApiBadRoot).cause("root ", op.root, " is outside [0, ", nranks_, ")").raise();
  }
  if (isPointToPoint(op.kind) && op.peer == rank_) {
    fail(Errc::ApiBadPeer).cause("peer ", op.peer, " is this rank itself").remedy("copy locally instead").raise();
  }
  if (isPointToPoint(op.kind) && (op.peer < 0 || op.peer >= nranks_)) {
    fail(Errc::ApiBadPeer).cause("peer ", op.peer, " is outside [0, ", nranks_, ")").raise();
  }
  const size_t elem = dtypeSize(op.dtype);
  const size_t n = static_cast<size_t>(nranks_);
  // The largest buffer an op touches is count * nranks elements.
  if (op.count > std::numeric_limits<size_t>::max() / elem / n) {
    fail(Errc::ApiCountOverflow).cause("count ", op.count, " of ", dtypeName(op.dtype), " overflows").raise();
  }
  const size_t bytes = op.count * elem;
  const bool isRoot = op.root == rank_;
  auto need = [&](const void* p, bool required, const char* what) {
    if (required && p == nullptr) {
      fail(Errc::ApiNullArgument)
          .cause(what, " is NULL but ", bytes > 0 ? "the count is " : "must be given: count ", op.count)
          .raise();
    }
  };
  if (const auto [sendBlocks, recvBlocks] = blocksOf(op, isRoot, n);
      (op.send && wraps(op.send, bytes * sendBlocks)) || (op.recv && wraps(op.recv, bytes * recvBlocks))) {
    fail(Errc::ApiCountOverflow)
        .cause("count ", op.count, " of ", dtypeName(op.dtype), " from ",
               op.send && wraps(op.send, bytes * sendBlocks) ? "sendbuff " : "recvbuff ",
               op.send && wraps(op.send, bytes * sendBlocks) ? op.send : op.recv,
               " runs past the end of the address space")
        .raise();
  }
  switch (op.kind) {
    case OpKind::AllReduce:
      need(op.send, bytes > 0, "sendbuff");
      need(op.recv, bytes > 0, "recvbuff");
      if (op.send != op.recv && overlaps(op.send, bytes, op.recv, bytes)) {
        fail(Errc::ApiBadAliasing).cause("sendbuff and recvbuff overlap without being equal").raise();
      }
      break;
    case OpKind::Broadcast:
      need(op.send, isRoot && bytes > 0, "sendbuff (at the root)");
      need(op.recv, bytes > 0, "recvbuff");
      if (isRoot && op.send != op.recv && overlaps(op.send, bytes, op.recv, bytes)) {
        fail(Errc::ApiBadAliasing).cause("sendbuff and recvbuff overlap without being equal").raise();
      }
      break;
    case OpKind::Reduce:
      need(op.send, bytes > 0, "sendbuff");
      need(op.recv, isRoot && bytes > 0, "recvbuff (at the root)");
      if (isRoot && op.send != op.recv && overlaps(op.send, bytes, op.recv, bytes)) {
        fail(Errc::ApiBadAliasing).cause("sendbuff and recvbuff overlap without being equal").raise();
      }
      break;
    case OpKind::AllGather:
    case OpKind::Split: {
      need(op.send, bytes > 0, "sendbuff");
      need(op.recv, bytes > 0, "recvbuff");
      const void* inPlace = static_cast<const uint8_t*>(op.recv) + static_cast<size_t>(rank_) * bytes;
      if (op.send != inPlace && overlaps(op.send, bytes, op.recv, bytes * n)) {
        fail(Errc::ApiBadAliasing)
            .cause("sendbuff overlaps recvbuff but is not recvbuff + rank*sendcount (the in-place form)")
            .raise();
      }
      break;
    }
    case OpKind::ReduceScatter: {
      need(op.send, bytes > 0, "sendbuff");
      need(op.recv, bytes > 0, "recvbuff");
      const void* inPlace = static_cast<const uint8_t*>(op.send) + static_cast<size_t>(rank_) * bytes;
      if (op.recv != inPlace && overlaps(op.send, bytes * n, op.recv, bytes)) {
        fail(Errc::ApiBadAliasing)
            .cause("recvbuff overlaps sendbuff but is not sendbuff + rank*recvcount (the in-place form)")
            .raise();
      }
      break;
    }
    case OpKind::AllToAll:
      need(op.send, bytes > 0, "sendbuff");
      need(op.recv, bytes > 0, "recvbuff");
      if (overlaps(op.send, bytes * n, op.recv, bytes * n)) {
        fail(Errc::ApiBadAliasing).cause("alltoall has no in-place form; sendbuff and recvbuff overlap").raise();
      }
      break;
    case OpKind::AllToAllV: {
      if (!op.sendcounts || !op.sdispls || !op.recvcounts || !op.rdispls) {
        fail(Errc::ApiNullArgument).cause("sendcounts, sdispls, recvcounts and rdispls must all be given").raise();
      }
      size_t sendEnd = 0, recvEnd = 0;
      const size_t limit = std::numeric_limits<size_t>::max() / elem;
      // displ + count <= limit, written so that neither side can wrap.
      auto fits = [limit](size_t count, size_t displ) { return displ <= limit && count <= limit - displ; };
      for (size_t p = 0; p < n; ++p) {
        const bool sendOk = fits(op.sendcounts[p], op.sdispls[p]);
        if (!sendOk || !fits(op.recvcounts[p], op.rdispls[p])) {
          fail(Errc::ApiCountOverflow)
              .cause(sendOk ? "rdispls[" : "sdispls[", p, "] + ", sendOk ? "recvcounts[" : "sendcounts[", p,
                     "] = ", sendOk ? op.rdispls[p] : op.sdispls[p], " + ",
                     sendOk ? op.recvcounts[p] : op.sendcounts[p], " elements of ", dtypeName(op.dtype),
                     " overflows the address space")
              .raise();
        }
        sendEnd = std::max(sendEnd, op.sdispls[p] + op.sendcounts[p]);
        recvEnd = std::max(recvEnd, op.rdispls[p] + op.recvcounts[p]);
      }
      need(op.send, sendEnd > 0, "sendbuff");
      need(op.recv, recvEnd > 0, "recvbuff");
      if (wraps(op.send, sendEnd * elem) || wraps(op.recv, recvEnd * elem)) {
        fail(Errc::ApiCountOverflow)
            .cause(wraps(op.send, sendEnd * elem) ? "sendbuff" : "recvbuff",
                   " + the largest displacement + count runs past the end of the address space")
            .raise();
      }
      if (overlaps(op.send, sendEnd * elem, op.recv, recvEnd * elem)) {
        fail(Errc::ApiBadAliasing).cause("alltoallv has no in-place form; sendbuff and recvbuff overlap").raise();
      }
      break;
    }
    case OpKind::Gather: {
      need(op.send, bytes > 0, "sendbuff");
      need(op.recv, isRoot && bytes > 0, "recvbuff (at the root)");
      const void* inPlace = static_cast<const uint8_t*>(op.recv) + static_cast<size_t>(rank_) * bytes;
      if (isRoot && op.send != inPlace && overlaps(op.send, bytes, op.recv, bytes * n)) {
        fail(Errc::ApiBadAliasing).cause("sendbuff overlaps recvbuff but is not recvbuff + root*sendcount").raise();
      }
      break;
    }
    case OpKind::Scatter: {
      need(op.send, isRoot && bytes > 0, "sendbuff (at the root)");
      need(op.recv, bytes > 0, "recvbuff");
      const void* inPlace = static_cast<const uint8_t*>(op.send) + static_cast<size_t>(rank_) * bytes;
      if (isRoot && op.recv != inPlace && overlaps(op.send, bytes * n, op.recv, bytes)) {
        fail(Errc::ApiBadAliasing).cause("recvbuff overlaps sendbuff but is not sendbuff + root*recvcount").raise();
      }
      break;
    }
    case OpKind::Barrier: break;
    case OpKind::Send: need(op.send, bytes > 0, "sendbuff"); break;
    case OpKind::Recv: need(op.recv, bytes > 0, "recvbuff"); break;
  }
}

}  // namespace vigil
