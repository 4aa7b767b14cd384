#pragma once
// One operation as the API layer hands it to a communicator and as the
// algorithms read it (algo/ is the lowest layer every user of it sees).

#include <cstddef>
#include <span>
#include <vector>

#include "core/op_kind.hpp"
#include "transport/transport.hpp"
#include "vigil/vigil.h"

namespace vigil {

struct OpDesc {
  OpKind kind = OpKind::Barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // the call's count argument
  vigilDataType_t dtype = vigilUint8;
  vigilRedOp_t redop = vigilSum;
  int root = -1;
  int peer = -1;
  // AllToAllV only.
  const size_t* sendcounts = nullptr;
  const size_t* sdispls = nullptr;
  const size_t* recvcounts = nullptr;
  const size_t* rdispls = nullptr;
  // Send/Recv inside the library only (MoE): a payload in pieces (count =
  // their total bytes, dtype uint8), and a send produced while the batch
  // runs (see Transfer). The buffer guard does not watch such sends.
  std::span<const IoSegment> segments{};
  const bool* ready = nullptr;
  // Runs over the communicator's own transport even where per-host and
  // leader communicators exist: the symmetric heap's barrier across hosts,
  // whose waits must progress the transport that carries one-sided accesses.
  bool flat = false;
  // Send/Recv of vigilSendTag/vigilRecvTag (comm/tagged.cpp): matched by
  // (source, tag); a receive's peer may be VIGIL_ANY_SOURCE and its tag
  // VIGIL_ANY_TAG, and `status` (may be null) gets what matched.
  bool tagged = false;
  int tag = 0;
  vigilStatus* status = nullptr;

  bool hasRedOp() const { return kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter; }
  bool hasRoot() const {
    return kind == OpKind::Broadcast || kind == OpKind::Reduce || kind == OpKind::Gather || kind == OpKind::Scatter;
  }
};

// An OpDesc that owns its all-to-all-v arrays: queued work must not point
// into the caller's arrays, which may be gone when the work runs.
class OwnedOpDesc {
 public:
  OwnedOpDesc(const OpDesc& op, int nranks) : op_(op) {
    if (op.kind != OpKind::AllToAllV) return;
    const auto n = static_cast<size_t>(nranks);
    arrays_.assign(op.sendcounts, op.sendcounts + n);
    arrays_.insert(arrays_.end(), op.sdispls, op.sdispls + n);
    arrays_.insert(arrays_.end(), op.recvcounts, op.recvcounts + n);
    arrays_.insert(arrays_.end(), op.rdispls, op.rdispls + n);
    op_.sendcounts = arrays_.data();
    op_.sdispls = arrays_.data() + n;
    op_.recvcounts = arrays_.data() + 2 * n;
    op_.rdispls = arrays_.data() + 3 * n;
  }
  OwnedOpDesc(const OwnedOpDesc& other) : OwnedOpDesc(other.op_, static_cast<int>(other.arrays_.size() / 4)) {}
  OwnedOpDesc& operator=(const OwnedOpDesc&) = delete;
  const OpDesc& get() const { return op_; }

 private:
  OpDesc op_;
  std::vector<size_t> arrays_;
};

}  // namespace vigil
