// MoE combine: every (local expert, source) block goes back to its source,
// which sums the rows of each token in slot order. After a dispatch on
// symmetric buffers, and with the expert outputs in the symmetric heap too,
// nothing travels: between an entry and an exit barrier each source sums its
// rows straight from the destinations' copies.

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/dtype.hpp"
#include "moe/moe.hpp"
#include "reduce/reduce.hpp"
#include "symm/heap.hpp"

namespace vigil::moe {

size_t combineWorkspaceBytes(const Handle& h) {
  // Staging for every row this rank sent, in the widest expert-output type.
  return static_cast<size_t>(h.sentRows) * static_cast<size_t>(h.hidden) * sizeof(float);
}

void checkCombine(const Communicator& comm, const vigilMoeConfig* cfg, const Handle* h, const vigilMoeCombineArgs* a,
                  const void* workspace, size_t workspaceBytes) {
  constexpr const char* kCall = "vigilMoeCombine";
  if (cfg == nullptr || a == nullptr) {
    comm.error(Errc::ApiNullArgument).op(kCall).cause(cfg ? "args" : "cfg", " is NULL").raise();
  }
  checkHandle(comm, *cfg, h, kCall);
  if (a->xType != vigilFloat32 && a->xType != vigilFloat16 && a->xType != vigilBfloat16) {
    comm.error(Errc::ApiBadDataType)
        .op(kCall)
        .cause("xType ", static_cast<int>(a->xType), " is not float32, float16 or bfloat16")
        .raise();
  }
  if (a->expandX == nullptr && h->recvRows > 0)
    comm.error(Errc::ApiNullArgument).op(kCall).cause("expandX is NULL").raise();
  if (a->out == nullptr && h->bs > 0) comm.error(Errc::ApiNullArgument).op(kCall).cause("out is NULL").raise();
  if (workspace == nullptr && combineWorkspaceBytes(*h) > 0) {
    comm.error(Errc::ApiNullArgument).op(kCall).cause("workspace is NULL").raise();
  }
  if (workspaceBytes < combineWorkspaceBytes(*h)) {
    comm.error(Errc::MoeTooSmall)
        .op(kCall)
        .cause("the workspace has ", workspaceBytes, " bytes, but this combine needs ", combineWorkspaceBytes(*h),
               " (vigilMoeCombineGetWorkspaceSize)")
        .raise();
  }
}

namespace {

// Every (local expert, source) block back to its source, one message per
// source; rows from every destination into staging, in the order that
// destination received them (local expert, token). This rank's own rows
// stay where they are.
void returnRows(Communicator& comm, const Handle& h, const uint8_t* expertOut, uint8_t* staging, size_t rowBytes) {
  const int me = comm.rank(), W = comm.nranks();
  const int64_t L = h.localExperts;
  Messages messages(static_cast<size_t>(W * L + W));
  for (int r = 0; r < W; ++r) {
    if (r == me) continue;
    for (int64_t j = 0; j < L; ++j) {
      const size_t b = static_cast<size_t>(r * L + j);
      messages.piece(expertOut + static_cast<size_t>(h.blockStart[b]) * rowBytes,
                     static_cast<size_t>(h.blockRows[b]) * rowBytes);
    }
    messages.end(OpKind::Send, r);
  }
  for (int d = 0; d < W; ++d) {
    if (d == me) continue;
    const auto first = static_cast<size_t>(h.stagingBase[static_cast<size_t>(d)]);
    messages.piece(staging + first * rowBytes,
                   static_cast<size_t>(h.stagingBase[static_cast<size_t>(d) + 1]) * rowBytes - first * rowBytes);
    messages.end(OpKind::Recv, d);
  }
  std::vector<OpDesc>& ops = messages.ops();
  if (!ops.empty()) comm.runPointToPoint(ops);
}

// Row `idx` of the staging order: received into staging, or one of this
// rank's own rows, which never left expandX.
class StagedRows {
 public:
  StagedRows(int me, const Handle& h, const uint8_t* expertOut, const uint8_t* staging, size_t rowBytes)
      : staging_(staging),
        rowBytes_(rowBytes),
        ownFirst_(h.stagingBase[static_cast<size_t>(me)]),
        ownRows_(static_cast<size_t>(h.stagingBase[static_cast<size_t>(me) + 1] - ownFirst_)) {
    for (int64_t j = 0, k = 0; j < h.localExperts; ++j) {
      const size_t b = static_cast<size_t>(me * h.localExperts + j);
      for (int64_t i = 0; i < h.blockRows[b]; ++i)
        ownRows_[static_cast<size_t>(k++)] = expertOut + static_cast<size_t>(h.blockStart[b] + i) * rowBytes;
    }
  }
  const uint8_t* operator[](int64_t idx) const {
    const int64_t own = idx - ownFirst_;
    return own >= 0 && own < static_cast<int64_t>(ownRows_.size()) ? ownRows_[static_cast<size_t>(own)]
                                                                   : staging_ + static_cast<size_t>(idx) * rowBytes_;
  }

 private:
  const uint8_t* staging_;
  size_t rowBytes_;
  int64_t ownFirst_;
  std::vector<const uint8_t*> ownRows_;
};

// Row `idx` of the staging order in its destination's copy of the expert
// outputs (symmetric buffers).
class PeerRows {
 public:
  PeerRows(const Handle& h, const SymmetricHeap& heap, size_t at, size_t rowBytes) {
    rows_.reserve(static_cast<size_t>(h.sentRows));
    const auto W = static_cast<int>(h.destBase.size()) - 1;
    for (int d = 0; d < W; ++d) {
      const uint8_t* copy = heap.at(d, at);
      for (int64_t i = h.destBase[static_cast<size_t>(d)]; i < h.destBase[static_cast<size_t>(d) + 1]; ++i) {
        const auto start = static_cast<size_t>(h.peerBlockStart[static_cast<size_t>(i)]);
        for (int64_t k = 0; k < h.sendCount[static_cast<size_t>(i)]; ++k)
          rows_.push_back(copy + (start + static_cast<size_t>(k)) * rowBytes);
      }
    }
  }
  const uint8_t* operator[](int64_t idx) const { return rows_[static_cast<size_t>(idx)]; }

 private:
  std::vector<const uint8_t*> rows_;
};

// out[t] = sum of w * row over active routed slots, then the shared
// experts' rows, then sharedExpertX, in float32, rounded once.
template <class Rows>
void sumPerToken(const vigilMoeConfig& cfg, const Handle& h, const vigilMoeCombineArgs& a, const Rows& rows) {
  const int64_t H = cfg.hidden, K = cfg.topK, Sh = cfg.sharedExpertNum;
  const size_t rowBytes = static_cast<size_t>(H) * dtypeSize(a.xType);
  auto* out = static_cast<uint8_t*>(a.out);
  const auto* shared = static_cast<const uint8_t*>(a.sharedExpertX);
  std::vector<float> acc(static_cast<size_t>(H));
  // acc += w * row, the row widened to float32.
  auto addRow = [&](const uint8_t* src, float w) {
    reduce::weightedAccumulate(acc.data(), w, src, static_cast<size_t>(H), a.xType);
  };
  for (int64_t t = 0; t < h.bs; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    bool any = false;
    for (int64_t slot = 0; slot < K + Sh; ++slot) {
      const int64_t idx = h.rowOf[static_cast<size_t>(t * h.slots + slot)];
      if (idx < 0) continue;
      any = true;
      addRow(rows[idx], slot < K && a.expertScales ? a.expertScales[t * K + slot] : 1.0f);
    }
    uint8_t* dst = out + static_cast<size_t>(t) * rowBytes;
    if (!any) {
      std::memset(dst, 0, rowBytes);  // a token with no active slot
      continue;
    }
    if (shared != nullptr) addRow(shared + static_cast<size_t>(t) * rowBytes, 1.0f);
    if (a.xType == vigilFloat32) {
      std::memcpy(dst, acc.data(), rowBytes);
    } else {
      for (int64_t i = 0; i < H; ++i) storeFloat(dst, i, a.xType, acc[static_cast<size_t>(i)]);
    }
  }
}

// The key (agree()) of expert outputs in the symmetric heap, for a handle
// whose dispatch ran on symmetric buffers; -1 otherwise.
int64_t symmetricKey(Communicator& comm, const Handle& h, const vigilMoeCombineArgs& a, size_t rowBytes, size_t* at) {
  if (h.peerBlockStart.empty()) return -1;
  const SymmetricHeap* heap = SymmetricHeap::of(comm, false);
  if (heap == nullptr || !heap->allLocal()) return -1;
  const auto place = heap->placeOf(a.expandX, static_cast<size_t>(h.recvRows) * rowBytes);
  if (!place) return -1;
  // Every row a source reads lies below its destination's recvRows, which
  // that destination found inside the same allocation; checked here too.
  const auto fit = static_cast<int64_t>(place->room / rowBytes);
  for (size_t i = 0; i < h.peerBlockStart.size(); ++i) {
    if (h.peerBlockStart[i] + h.sendCount[i] > fit) return -1;
  }
  *at = place->offset;
  return static_cast<int64_t>(symm::fingerprintOf({2, place->offset}) >> 1);
}

}  // namespace

void combine(const std::shared_ptr<Communicator>& commPtr, const vigilMoeConfig* cfg, const Handle* h,
             const vigilMoeCombineArgs* a, void* workspace, size_t workspaceBytes,
             const std::optional<Error>& refused) {
  Communicator& comm = *commPtr;
  constexpr const char* kCall = "vigilMoeCombine";
  std::optional<Error> own = refused;
  try {
    if (!own) checkCombine(comm, cfg, h, a, workspace, workspaceBytes);
  } catch (const Error& e) {
    own = e;
  }
  constexpr const char* kHandleField = "the dispatch of the handle";
  size_t symmetricAt = 0;
  const int64_t key =
      own ? -1 : symmetricKey(comm, *h, *a, static_cast<size_t>(cfg->hidden) * dtypeSize(a->xType), &symmetricAt);
  bool symmetric = false;
  try {
    symmetric = agree(comm, kCall, cfg, a ? static_cast<int64_t>(a->xType) : -1,
                      own ? -1 : static_cast<int64_t>(h->dispatchId), kHandleField, own, key);
  } catch (const Error& e) {
    // Handles of different dispatches: a usage error, like a foreign handle.
    if (e.errc() != Errc::MoeConfigMismatch || e.cause().find(kHandleField) == std::string::npos) throw;
    comm.error(Errc::MoeBadHandle).op(kCall).cause(e.cause()).raise();
  }

  const size_t rowBytes = static_cast<size_t>(cfg->hidden) * dtypeSize(a->xType);
  if (symmetric) {
    SymmetricHeap& heap = *SymmetricHeap::of(comm, false);
    const SymmetricHeap::KernelScope scope(heap, true, h->dispatchId);
    const uint64_t fingerprint =
        symm::fingerprintOf({h->configDigest, h->dispatchId, static_cast<uint64_t>(a->xType), symmetricAt});
    // Every expert output is final once its rank entered combine; no rank
    // may reuse its copy before every source has summed from it.
    heap.kernelBarrier(kCall, SymmetricHeap::KernelStage::MoeCombineEntry, fingerprint, h->dispatchId);
    sumPerToken(*cfg, *h, *a, PeerRows(*h, heap, symmetricAt, rowBytes));
    heap.kernelBarrier(kCall, SymmetricHeap::KernelStage::MoeCombineExit, fingerprint, h->dispatchId);
    return;
  }
  auto* staging = static_cast<uint8_t*>(workspace);
  const auto* expertOut = static_cast<const uint8_t*>(a->expandX);
  returnRows(comm, *h, expertOut, staging, rowBytes);
  sumPerToken(*cfg, *h, *a, StagedRows(comm.rank(), *h, expertOut, staging, rowBytes));
}

}  // namespace vigil::moe
