// MoE combine: every (local expert, source) block goes back to its source,
// which sums the rows of each token in slot order.

#include <cstring>

#include "core/dtype.hpp"
#include "moe/moe.hpp"
#include "reduce/reduce.hpp"

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
  try {
    agree(comm, kCall, cfg, a ? static_cast<int64_t>(a->xType) : -1, own ? -1 : static_cast<int64_t>(h->dispatchId),
          kHandleField, own);
  } catch (const Error& e) {
    // Handles of different dispatches: a usage error, like a foreign handle.
    if (e.errc() != Errc::MoeConfigMismatch || e.cause().find(kHandleField) == std::string::npos) throw;
    comm.error(Errc::MoeBadHandle).op(kCall).cause(e.cause()).raise();
  }

  const int me = comm.rank(), W = comm.nranks();
  const int64_t H = cfg->hidden, K = cfg->topK, Sh = cfg->sharedExpertNum, L = h->localExperts;
  const size_t row = static_cast<size_t>(H) * dtypeSize(a->xType);
  auto* staging = static_cast<uint8_t*>(workspace);
  const auto* expertOut = static_cast<const uint8_t*>(a->expandX);

  // Blocks back to their sources, one message per source; rows from every
  // destination into staging, in the order that destination received them
  // (local expert, token). This rank's own rows stay where they are.
  Messages messages(static_cast<size_t>(W * L + W));
  for (int r = 0; r < W; ++r) {
    if (r == me) continue;
    for (int64_t j = 0; j < L; ++j) {
      const size_t b = static_cast<size_t>(r * L + j);
      messages.piece(expertOut + static_cast<size_t>(h->blockStart[b]) * row,
                     static_cast<size_t>(h->blockRows[b]) * row);
    }
    messages.end(OpKind::Send, r);
  }
  for (int d = 0; d < W; ++d) {
    if (d == me) continue;
    const auto first = static_cast<size_t>(h->stagingBase[static_cast<size_t>(d)]);
    messages.piece(staging + first * row,
                   static_cast<size_t>(h->stagingBase[static_cast<size_t>(d) + 1]) * row - first * row);
    messages.end(OpKind::Recv, d);
  }
  std::vector<OpDesc>& ops = messages.ops();
  if (!ops.empty()) comm.runPointToPoint(ops);

  // Row `idx` of the staging order: received, or one of this rank's own in expandX.
  const int64_t ownFirst = h->stagingBase[static_cast<size_t>(me)];
  std::vector<const uint8_t*> ownRows(static_cast<size_t>(h->stagingBase[static_cast<size_t>(me) + 1] - ownFirst));
  for (int64_t j = 0, k = 0; j < L; ++j) {
    const size_t b = static_cast<size_t>(me * L + j);
    for (int64_t i = 0; i < h->blockRows[b]; ++i)
      ownRows[static_cast<size_t>(k++)] = expertOut + static_cast<size_t>(h->blockStart[b] + i) * row;
  }
  auto rowAt = [&](int64_t idx) {
    const int64_t o = idx - ownFirst;
    return o >= 0 && o < static_cast<int64_t>(ownRows.size()) ? ownRows[static_cast<size_t>(o)]
                                                              : staging + static_cast<size_t>(idx) * row;
  };

  // out[t] = sum of w * row over active routed slots, then the shared
  // experts' rows, then sharedExpertX, in float32, rounded once.
  auto* out = static_cast<uint8_t*>(a->out);
  const auto* shared = static_cast<const uint8_t*>(a->sharedExpertX);
  std::vector<float> acc(static_cast<size_t>(H));
  // acc += w * row, the row widened to float32.
  auto addRow = [&](const uint8_t* src, float w) {
    reduce::weightedAccumulate(acc.data(), w, src, static_cast<size_t>(H), a->xType);
  };
  for (int64_t t = 0; t < h->bs; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    bool any = false;
    for (int64_t slot = 0; slot < K + Sh; ++slot) {
      const int64_t idx = h->rowOf[static_cast<size_t>(t * h->slots + slot)];
      if (idx < 0) continue;
      any = true;
      addRow(rowAt(idx), slot < K && a->expertScales ? a->expertScales[t * K + slot] : 1.0f);
    }
    uint8_t* dst = out + static_cast<size_t>(t) * row;
    if (!any) {
      std::memset(dst, 0, row);  // a token with no active slot
      continue;
    }
    if (shared != nullptr) addRow(shared + static_cast<size_t>(t) * row, 1.0f);
    if (a->xType == vigilFloat32) {
      std::memcpy(dst, acc.data(), row);
    } else {
      for (int64_t i = 0; i < H; ++i) storeFloat(dst, i, a->xType, acc[static_cast<size_t>(i)]);
    }
  }
}

}  // namespace vigil::moe
