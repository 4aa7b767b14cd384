// MoE dispatch: the handshake, the counts, the rows.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.hpp"
#include "moe/moe.hpp"
#include "reduce/half.hpp"

namespace vigil::moe {

float loadFloat(const uint8_t* row, int64_t i, vigilDataType_t type) {
  switch (type) {
    case vigilFloat16: {
      uint16_t v;
      std::memcpy(&v, row + 2 * i, 2);
      return halfToFloat(v);
    }
    case vigilBfloat16: {
      uint16_t v;
      std::memcpy(&v, row + 2 * i, 2);
      return bfloat16ToFloat(v);
    }
    default: {
      float v;
      std::memcpy(&v, row + 4 * i, 4);
      return v;
    }
  }
}

void storeFloat(uint8_t* row, int64_t i, vigilDataType_t type, float value) {
  if (type == vigilFloat32) {
    std::memcpy(row + 4 * i, &value, 4);
    return;
  }
  const uint16_t v = type == vigilFloat16 ? floatToHalf(value) : floatToBfloat16(value);
  std::memcpy(row + 2 * i, &v, 2);
}

OpDesc byteTransfer(OpKind kind, const void* send, void* recv, size_t bytes, int peer) {
  OpDesc op;
  op.kind = kind;
  op.send = send;
  op.recv = recv;
  op.count = bytes;
  op.dtype = vigilUint8;
  op.peer = peer;
  return op;
}

void agree(Communicator& comm, const char* call, const vigilMoeConfig* cfg, int64_t xType, int64_t last,
           const char* lastName, const std::optional<Error>& own) {
  constexpr int kAgreeFields = 10;
  const char* const names[kAgreeFields] = {"epWorldSize", "moeExpertNum", "sharedExpertNum",  "sharedExpertRankNum",
                                           "hidden",      "topK",         "maxTokensPerRank", "quantMode",
                                           "xType",       lastName};
  const vigilMoeConfig zero{};
  const vigilMoeConfig& c = cfg ? *cfg : zero;
  const int64_t fields[kAgreeFields] = {c.epWorldSize,
                                        c.moeExpertNum,
                                        c.sharedExpertNum,
                                        c.sharedExpertRankNum,
                                        c.hidden,
                                        c.topK,
                                        c.maxTokensPerRank,
                                        c.quantMode,
                                        xType,
                                        last};
  constexpr size_t kRecord = (kAgreeFields + 1) * sizeof(int64_t);
  const int n = comm.nranks();
  int64_t mine[kAgreeFields + 1];
  std::copy(std::begin(fields), std::end(fields), mine);
  mine[kAgreeFields] = own ? static_cast<int64_t>(own->errc()) + 1 : 0;
  std::vector<int64_t> all(static_cast<size_t>(n) * (kAgreeFields + 1));
  OpDesc op;
  op.kind = OpKind::AllGather;
  op.send = mine;
  op.recv = all.data();
  op.count = kRecord;
  op.dtype = vigilUint8;
  comm.run(op);
  if (own) throw *own;

  auto at = [&](int r, int f) { return all[static_cast<size_t>(r) * (kAgreeFields + 1) + static_cast<size_t>(f)]; };
  std::vector<int> refused;
  std::string ids;
  for (int r = 0; r < n; ++r) {
    if (at(r, kAgreeFields) == 0) continue;
    refused.push_back(r);
    ids += cat(ids.empty() ? "" : ", ", "rank ", r, ": ", errorId(static_cast<Errc>(at(r, kAgreeFields) - 1)));
  }
  if (!refused.empty()) {
    comm.error(Errc::MoePeerRefused)
        .op(call)
        .cause("rank(s) ", joinRanks(refused), " refused it in their own checks (", ids,
               "), so no rank moved any data; their own error names the cause")
        .raise();
  }
  for (int f = 0; f < kAgreeFields; ++f) {
    std::string differ;
    for (int r = 1; r < n; ++r) {
      if (at(r, f) != at(0, f)) differ += cat(", rank ", r, " has ", at(r, f));
    }
    if (differ.empty()) continue;
    comm.error(Errc::MoeConfigMismatch)
        .op(call)
        .cause("ranks disagree on ", names[f], ": rank 0 has ", at(0, f), differ)
        .raise();
  }
}

std::unique_ptr<Handle> dispatch(const std::shared_ptr<Communicator>& commPtr, const vigilMoeConfig* cfgPtr,
                                 const vigilMoeDispatchArgs* argsPtr, void* workspace, size_t workspaceBytes) {
  Communicator& comm = *commPtr;
  const uint64_t dispatchId = comm.nextMoeDispatch();
  std::optional<Error> own;
  try {
    validateDispatch(comm, cfgPtr, argsPtr, workspace, workspaceBytes, true);
  } catch (const Error& e) {
    own = e;
  }
  agree(comm, "vigilMoeDispatch", cfgPtr, argsPtr ? static_cast<int64_t>(argsPtr->xType) : -1,
        static_cast<int64_t>(dispatchId), "the dispatch number", own);

  // Every rank passed its checks and agrees: from here on, outputs are written.
  const vigilMoeConfig& cfg = *cfgPtr;
  const vigilMoeDispatchArgs& a = *argsPtr;
  const Placement p(cfg);
  const int me = comm.rank(), W = comm.nranks();
  const int64_t K = cfg.topK, Sh = cfg.sharedExpertNum, slots = K + Sh, H = cfg.hidden, L = p.localExperts(me);
  const bool quant = cfg.quantMode == 2;
  const size_t inRow = static_cast<size_t>(H) * dtypeSize(a.xType);
  const size_t outRow = quant ? static_cast<size_t>(H) : inRow;

  auto h = std::make_unique<Handle>();
  h->comm = commPtr;
  h->commId = &comm;
  h->configDigest = configDigest(cfg);
  h->dispatchId = dispatchId;
  h->bs = a.bs;
  h->hidden = H;
  h->slots = slots;
  h->localExperts = L;
  h->destBase.assign(static_cast<size_t>(W) + 1, 0);
  for (int d = 0; d < W; ++d)
    h->destBase[static_cast<size_t>(d) + 1] = h->destBase[static_cast<size_t>(d)] + p.localExperts(d);
  h->sendCount.assign(static_cast<size_t>(h->destBase[static_cast<size_t>(W)]), 0);

  // The active slots of every token, in (token, slot) order.
  struct Row {
    int32_t token, slot;
    int64_t dest, local, smoothRow;
    float weight;
  };
  std::vector<Row> rows;
  rows.reserve(static_cast<size_t>(a.bs * slots));
  for (int64_t t = 0; t < a.bs; ++t) {
    if (a.activeMask != nullptr && a.activeMaskDims == 1 && a.activeMask[t] == 0) continue;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = a.expertIds[t * K + k];
      if (e < 0 || (a.activeMask != nullptr && a.activeMaskDims == 2 && a.activeMask[t * K + k] == 0)) continue;
      rows.push_back({static_cast<int32_t>(t), static_cast<int32_t>(k), p.routedRank(e), p.routedLocal(e), Sh + e,
                      a.expertScales ? a.expertScales[t * K + k] : 1.0f});
    }
    for (int64_t s = 0; s < Sh; ++s) {
      rows.push_back({static_cast<int32_t>(t), static_cast<int32_t>(K + s), p.sharedRank(s, me), 0, s, 1.0f});
    }
  }
  for (const Row& r : rows) ++h->sendCount[static_cast<size_t>(h->destBase[static_cast<size_t>(r.dest)] + r.local)];

  // Counts: an all-to-all of rows per (destination, local expert).
  std::vector<int64_t> recvCount(static_cast<size_t>(W * L));
  {
    std::vector<size_t> sc(static_cast<size_t>(W)), sd(static_cast<size_t>(W)), rc(static_cast<size_t>(W)),
        rd(static_cast<size_t>(W));
    for (int d = 0; d < W; ++d) {
      sc[static_cast<size_t>(d)] = static_cast<size_t>(p.localExperts(d));
      sd[static_cast<size_t>(d)] = static_cast<size_t>(h->destBase[static_cast<size_t>(d)]);
      rc[static_cast<size_t>(d)] = static_cast<size_t>(L);
      rd[static_cast<size_t>(d)] = static_cast<size_t>(d * L);
    }
    OpDesc op;
    op.kind = OpKind::AllToAllV;
    op.send = h->sendCount.data();
    op.recv = recvCount.data();
    op.dtype = vigilInt64;
    op.sendcounts = sc.data();
    op.sdispls = sd.data();
    op.recvcounts = rc.data();
    op.rdispls = rd.data();
    comm.run(op);
  }

  // The receive layout: blocks ordered by (local expert, source rank).
  h->blockStart.assign(static_cast<size_t>(W * L), 0);
  h->blockRows.assign(static_cast<size_t>(W * L), 0);
  int64_t total = 0;
  for (int64_t j = 0; j < L; ++j) {
    int64_t expertRows = 0;
    for (int r = 0; r < W; ++r) {
      const size_t b = static_cast<size_t>(r * L + j);
      h->blockStart[b] = total;
      h->blockRows[b] = recvCount[b];
      total += recvCount[b];
      expertRows += recvCount[b];
      a.epRecvCounts[j * W + r] = static_cast<int32_t>(total);
    }
    a.expertTokenNums[j] = cfg.expertTokenNumsType == 1 ? expertRows : total;
  }
  if (total > a.expandXRows) {
    comm.error(Errc::Internal)
        .op("vigilMoeDispatch")
        .cause("peers announced ", total, " rows for ", a.expandXRows, " rows of capacity")
        .raise();
  }
  h->recvRows = total;

  // Where each row goes: into the workspace (per destination: rows, weights,
  // scales, in (local expert, token) order), or, for this rank itself,
  // straight into its final place in expandX.
  std::vector<int64_t> next(h->sendCount.size());  // next index per (destination, local expert)
  h->stagingBase.assign(static_cast<size_t>(W) + 1, 0);
  std::vector<size_t> wsData(static_cast<size_t>(W)), wsWeight(static_cast<size_t>(W)), wsScale(static_cast<size_t>(W));
  size_t ws = 0;
  for (int d = 0; d < W; ++d) {
    int64_t sent = 0;
    for (int64_t i = h->destBase[static_cast<size_t>(d)]; i < h->destBase[static_cast<size_t>(d) + 1]; ++i) {
      next[static_cast<size_t>(i)] = sent;
      sent += h->sendCount[static_cast<size_t>(i)];
    }
    h->stagingBase[static_cast<size_t>(d) + 1] = h->stagingBase[static_cast<size_t>(d)] + sent;
    if (d == me) continue;
    wsData[static_cast<size_t>(d)] = ws;
    ws += static_cast<size_t>(sent) * outRow;
    wsWeight[static_cast<size_t>(d)] = ws;
    ws += static_cast<size_t>(sent) * sizeof(float);
    wsScale[static_cast<size_t>(d)] = ws;
    ws += quant ? static_cast<size_t>(sent) * sizeof(float) : 0;
  }
  h->sentRows = h->stagingBase[static_cast<size_t>(W)];
  h->sentTokens.assign(static_cast<size_t>(W), {});
  h->sentSlots.assign(static_cast<size_t>(W), {});
  for (int d = 0; d < W; ++d) {
    const auto n =
        static_cast<size_t>(h->stagingBase[static_cast<size_t>(d) + 1] - h->stagingBase[static_cast<size_t>(d)]);
    h->sentTokens[static_cast<size_t>(d)].resize(n);
    h->sentSlots[static_cast<size_t>(d)].resize(n);
  }
  h->rowOf.assign(static_cast<size_t>(a.bs * slots), -1);

  auto* base = static_cast<uint8_t*>(workspace);
  auto* expandX = static_cast<uint8_t*>(a.expandX);
  const auto* x = static_cast<const uint8_t*>(a.x);
  std::vector<float> v(quant ? static_cast<size_t>(H) : 0);
  for (const Row& r : rows) {
    const size_t d = static_cast<size_t>(r.dest);
    const int64_t idx = next[static_cast<size_t>(h->destBase[d] + r.local)]++;  // index among the rows for d
    h->sentTokens[d][static_cast<size_t>(idx)] = r.token;
    h->sentSlots[d][static_cast<size_t>(idx)] = r.slot;
    h->rowOf[static_cast<size_t>(r.token * slots + r.slot)] = h->stagingBase[d] + idx;
    uint8_t* dst;
    float *weight, *scale;
    if (r.dest == me) {
      // Final row: the block of (local expert, this rank), at the row's place in it.
      int64_t inBlock = idx;
      for (int64_t j = 0; j < r.local; ++j) inBlock -= h->sendCount[static_cast<size_t>(h->destBase[d] + j)];
      const int64_t row = h->blockStart[static_cast<size_t>(me * L + r.local)] + inBlock;
      dst = expandX + static_cast<size_t>(row) * outRow;
      weight = a.expandScales ? a.expandScales + row : nullptr;
      scale = quant ? a.dynamicScales + row : nullptr;
    } else {
      dst = base + wsData[d] + static_cast<size_t>(idx) * outRow;
      weight = reinterpret_cast<float*>(base + wsWeight[d]) + idx;
      scale = quant ? reinterpret_cast<float*>(base + wsScale[d]) + idx : nullptr;
    }
    const uint8_t* src = x + static_cast<size_t>(r.token) * inRow;
    if (weight != nullptr) std::memcpy(weight, &r.weight, sizeof(float));  // the workspace may be unaligned
    if (!quant) {
      std::memcpy(dst, src, inRow);
      continue;
    }
    // Dynamic int8 per row, fused into the packing.
    float amax = 0.0f;
    const float* smooth = a.smoothScales ? a.smoothScales + r.smoothRow * H : nullptr;
    for (int64_t i = 0; i < H; ++i) {
      v[static_cast<size_t>(i)] = loadFloat(src, i, a.xType) * (smooth ? smooth[i] : 1.0f);
      amax = std::max(amax, std::fabs(v[static_cast<size_t>(i)]));
    }
    const float s = amax > 0.0f ? 127.0f / amax : 1.0f;
    for (int64_t i = 0; i < H; ++i) {
      const float q = std::clamp(std::nearbyint(v[static_cast<size_t>(i)] * s), -127.0f, 127.0f);
      dst[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
    }
    const float inverse = 1.0f / s;
    std::memcpy(scale, &inverse, sizeof(float));
  }

  // The rows, weights and scales of every (local expert, source) block land
  // at their final place; messages to one peer keep their order.
  std::vector<float> droppedWeights(a.expandScales ? 0 : static_cast<size_t>(total));
  float* weightsOut = a.expandScales ? a.expandScales : droppedWeights.data();
  std::vector<OpDesc> ops;
  auto add = [&](OpKind kind, const void* send, void* recv, size_t bytes, int peer) {
    ops.push_back(byteTransfer(kind, send, recv, bytes, peer));
  };
  for (int d = 0; d < W; ++d) {
    if (d == me) continue;
    size_t first = 0;
    for (int64_t i = h->destBase[static_cast<size_t>(d)]; i < h->destBase[static_cast<size_t>(d) + 1]; ++i) {
      const auto c = static_cast<size_t>(h->sendCount[static_cast<size_t>(i)]);
      if (c == 0) continue;
      add(OpKind::Send, base + wsData[static_cast<size_t>(d)] + first * outRow, nullptr, c * outRow, d);
      add(OpKind::Send, base + wsWeight[static_cast<size_t>(d)] + first * sizeof(float), nullptr, c * sizeof(float), d);
      if (quant) {
        add(OpKind::Send, base + wsScale[static_cast<size_t>(d)] + first * sizeof(float), nullptr, c * sizeof(float),
            d);
      }
      first += c;
    }
  }
  for (int r = 0; r < W; ++r) {
    if (r == me) continue;
    for (int64_t j = 0; j < L; ++j) {
      const size_t b = static_cast<size_t>(r * L + j);
      const auto c = static_cast<size_t>(h->blockRows[b]);
      if (c == 0) continue;
      const auto row = static_cast<size_t>(h->blockStart[b]);
      add(OpKind::Recv, nullptr, expandX + row * outRow, c * outRow, r);
      add(OpKind::Recv, nullptr, weightsOut + row, c * sizeof(float), r);
      if (quant) add(OpKind::Recv, nullptr, a.dynamicScales + row, c * sizeof(float), r);
    }
  }
  if (!ops.empty()) comm.runPointToPoint(ops);
  *a.recvRows = total;
  return h;
}

}  // namespace vigil::moe
