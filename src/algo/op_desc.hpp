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
  // Per-rank counts and displacements (elements), nranks entries each:
  //   alltoallv       all four
  //   allgatherv      recvcounts, rdispls (count = this rank's sendcount)
  //   gatherv         recvcounts, rdispls at the root (count = sendcount)
  //   scatterv        sendcounts, sdispls at the root (count = recvcount)
  //   reduce_scatterv recvcounts (blocks in rank order, no gaps; count unused)
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
  // A pre-multiplied sum (redop kRedOpPreMulSum, from an operator of
  // vigilRedOpCreatePreMulSum): this rank's scalar, one element of dtype,
  // read when the op runs: what preMulScalar points to (vigilScalarDevice),
  // else preMulValue's bytes (vigilScalarHostImmediate). Only
  // Communicator::resolveRedOp sets preMul.
  bool preMul = false;
  const void* preMulScalar = nullptr;
  uint64_t preMulValue = 0;

  bool hasRedOp() const { return opHasRedOp(kind); }
  bool hasRoot() const { return opHasRoot(kind); }
  const void* preMulFactor() const { return preMulScalar != nullptr ? preMulScalar : &preMulValue; }
};

// An OpDesc that owns its count and displacement arrays: queued work must
// not point into the caller's arrays, which may be gone when the work runs.
class OwnedOpDesc {
 public:
  OwnedOpDesc(const OpDesc& op, int nranks) : op_(op), nranks_(static_cast<size_t>(nranks)) {
    const size_t n = nranks_;
    const size_t* OpDesc::*const fields[] = {&OpDesc::sendcounts, &OpDesc::sdispls, &OpDesc::recvcounts,
                                             &OpDesc::rdispls};
    size_t given = 0;
    for (auto field : fields) given += op.*field != nullptr ? 1 : 0;
    if (given == 0) return;
    arrays_.reserve(given * n);  // no reallocation: the pointers below stay valid
    for (auto field : fields) {
      if (op.*field == nullptr) continue;
      op_.*field = arrays_.data() + arrays_.size();
      arrays_.insert(arrays_.end(), op.*field, op.*field + n);
    }
  }
  OwnedOpDesc(const OwnedOpDesc& other) : OwnedOpDesc(other.op_, static_cast<int>(other.nranks_)) {}
  OwnedOpDesc& operator=(const OwnedOpDesc&) = delete;
  const OpDesc& get() const { return op_; }

 private:
  OpDesc op_;
  size_t nranks_;
  std::vector<size_t> arrays_;
};

}  // namespace vigil
