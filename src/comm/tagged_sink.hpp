#pragma once
// What tagged receives share (comm/tagged.cpp, comm/requests.cpp): the
// matching rules, and the sink that judges each incoming tagged message.

#include <span>
#include <string>

#include "comm/communicator.hpp"
#include "core/dtype.hpp"
#include "core/strcat.hpp"

namespace vigil {
namespace tagged {

inline bool tagMatches(int wanted, int tag) {
  return wanted == VIGIL_ANY_TAG || wanted == tag;
}

inline bool sourceMatches(int wanted, int source) {
  return wanted == VIGIL_ANY_SOURCE || wanted == source;
}

inline std::string tagText(int tag) {
  return tag == VIGIL_ANY_TAG ? std::string("any tag") : cat("tag ", tag);
}

// `names`: how the communicator names ranks ("rank 2", or for a
// communicator of a larger group "rank 0 (rank 2 of 'g')").
inline std::string describeRecv(const OpDesc& r, const FaultReporter& names) {
  return cat("tagged receive from ", r.peer == VIGIL_ANY_SOURCE ? std::string("any source") : names.rankLabel(r.peer),
             " (", tagText(r.tag), ", up to ", r.count, " x ", dtypeName(r.dtype), ")");
}

inline std::string describeMessage(const FrameHeader& h) {
  const auto dtype = static_cast<vigilDataType_t>(h.dtype);
  switch (static_cast<FrameKind>(h.kind)) {
    case FrameKind::Tagged:
      return cat("tagged message #", h.seq, " (tag ", h.root, ", ", h.count, " x ", dtypeName(dtype), ")");
    case FrameKind::PointToPoint:
      return cat("untagged message (vigilSend #", h.seq, ", ", h.count, " x ", dtypeName(dtype), ")");
    default: return cat("message of its ", opName(static_cast<OpKind>(h.op)), " seq ", h.seq);
  }
}

inline void setStatus(const OpDesc& r, int source, const FrameHeader& h) {
  if (r.status != nullptr) *r.status = vigilStatus{source, h.root, h.count, h.bytes};
}

}  // namespace tagged

struct Communicator::TaggedRecv {
  const OpDesc* op;
  bool done = false;
};

// The sink of one receive transfer from `peer`: the message that comes
// fills the first of `recvs` it matches, else it is kept for later.
class Communicator::TaggedSink final : public RecvSink {
 public:
  TaggedSink(Communicator& comm, int peer, std::span<TaggedRecv> recvs) : comm_(comm), peer_(peer), recvs_(recvs) {}

  bool accept(const FrameHeader& got, ExchangeFault& fault) override {
    if (got.kind != static_cast<uint8_t>(FrameKind::Tagged)) {
      error_ = comm_.error(Errc::OpMismatch)
                   .op("recv")
                   .peer(peer_)
                   .cause("this rank waits for a tagged message from ", comm_.faults_.rankLabel(peer_),
                          ", but the next one it sent is a ", tagged::describeMessage(got))
                   .remedy(
                       "between two ranks, receive untagged sends (vigilSend) with vigilRecv and tagged ones "
                       "(vigilSendTag) with vigilRecvTag, in the order they were sent")
                   .build();
      fault.kind = ExchangeFault::Kind::HeaderMismatch;
      return false;
    }
    uint64_t& expected = comm_.taggedRecvSeq_[static_cast<size_t>(peer_)];
    if (got.seq != expected) {
      fault.kind = ExchangeFault::Kind::Protocol;
      return false;
    }
    ++expected;
    bytes = got.bytes;
    for (TaggedRecv& r : recvs_) {
      if (r.done || !tagged::sourceMatches(r.op->peer, peer_) || !tagged::tagMatches(r.op->tag, got.root)) continue;
      if (std::optional<Error> e = comm_.misfit(*r.op, peer_, got)) {
        error_ = std::move(e);
        fault.kind = ExchangeFault::Kind::HeaderMismatch;
        return false;
      }
      r.done = true;
      tagged::setStatus(*r.op, peer_, got);
      dest = r.op->recv;
      return true;
    }
    // For a later receive: kept, in arrival order.
    auto& queue = comm_.unexpected_[static_cast<size_t>(peer_)];
    queue.push_back({got, std::vector<uint8_t>(got.bytes), ++comm_.arrivals_});
    dest = queue.back().payload.data();
    return true;
  }

  // A drain leaves an untagged message (vigilSend, a collective the peer went on to) for its own operation.
  bool wants(const FrameHeader& next) const override { return next.kind == static_cast<uint8_t>(FrameKind::Tagged); }

  int peer() const { return peer_; }
  const std::optional<Error>& error() const { return error_; }

 private:
  Communicator& comm_;
  const int peer_;
  std::span<TaggedRecv> recvs_;
  std::optional<Error> error_;
};

}  // namespace vigil
