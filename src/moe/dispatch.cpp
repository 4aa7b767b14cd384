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

void Messages::piece(const void* data, size_t bytes) {
  if (bytes == 0) return;
  auto* p = const_cast<uint8_t*>(static_cast<const uint8_t*>(data));
  if (pieces_.size() > start_ && static_cast<uint8_t*>(pieces_.back().data) + pieces_.back().bytes == p) {
    pieces_.back().bytes += bytes;  // contiguous with the previous piece
  } else {
    pieces_.push_back({p, bytes});
  }
}

void Messages::end(OpKind kind, int peer) {
  size_t bytes = 0;
  for (size_t i = start_; i < pieces_.size(); ++i) bytes += pieces_[i].bytes;
  if (bytes > 0) {
    OpDesc op;
    op.kind = kind;
    if (kind == OpKind::Send) {
      op.send = pieces_[start_].data;
    } else {
      op.recv = pieces_[start_].data;
    }
    op.count = bytes;
    op.dtype = vigilUint8;
    op.peer = peer;
    ops_.push_back(op);
    ranges_.emplace_back(start_, pieces_.size());
  }
  start_ = pieces_.size();
}

std::vector<OpDesc>& Messages::ops(const bool* ready) {
  for (size_t i = 0; i < ops_.size(); ++i) {
    const auto [first, end] = ranges_[i];
    ops_[i].segments = std::span<const IoSegment>(pieces_.data() + first, end - first);
    if (ready != nullptr && ops_[i].kind == OpKind::Send) ops_[i].ready = ready + ops_[i].peer;
  }
  return ops_;
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

void dispatch(const std::shared_ptr<Communicator>& commPtr, const vigilMoeConfig* cfgPtr,
              const vigilMoeDispatchArgs* argsPtr, void* workspace, size_t workspaceBytes, Handle& into,
              const std::optional<Error>& refused) {
  Communicator& comm = *commPtr;
  const uint64_t dispatchId = comm.nextMoeDispatch();
  std::optional<Error> own = refused;
  try {
    if (!own) validateDispatch(comm, cfgPtr, argsPtr, workspace, workspaceBytes, true);
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

  Handle* const h = &into;
  if (h->commId == nullptr) {  // else set when the dispatch was queued, and read meanwhile
    h->comm = commPtr;
    h->commId = &comm;
    h->configDigest = configDigest(cfg);
  }
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

  // Staging order: per destination, its rows by (local expert, token). It
  // is the order they travel in, and where combine brings them back to.
  std::vector<int64_t> next(h->sendCount.size());  // next index per (destination, local expert)
  h->stagingBase.assign(static_cast<size_t>(W) + 1, 0);
  for (int d = 0; d < W; ++d) {
    int64_t sent = 0;
    for (int64_t i = h->destBase[static_cast<size_t>(d)]; i < h->destBase[static_cast<size_t>(d) + 1]; ++i) {
      next[static_cast<size_t>(i)] = sent;
      sent += h->sendCount[static_cast<size_t>(i)];
    }
    h->stagingBase[static_cast<size_t>(d) + 1] = h->stagingBase[static_cast<size_t>(d)] + sent;
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
  std::vector<int32_t> order(static_cast<size_t>(h->sentRows));  // staging index -> index in `rows`
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    const size_t d = static_cast<size_t>(r.dest);
    const int64_t idx = next[static_cast<size_t>(h->destBase[d] + r.local)]++;
    h->sentTokens[d][static_cast<size_t>(idx)] = r.token;
    h->sentSlots[d][static_cast<size_t>(idx)] = r.slot;
    h->rowOf[static_cast<size_t>(r.token * slots + r.slot)] = h->stagingBase[d] + idx;
    order[static_cast<size_t>(h->stagingBase[d] + idx)] = static_cast<int32_t>(i);
  }

  // One message per peer and direction: [rows][weights][scales], each in
  // (local expert, token) order. Unquantised rows go straight from x; the
  // weights, and quantised rows with their scales, are packed per
  // destination into the workspace, while earlier destinations' messages
  // travel. The receiver scatters every message into its blocks in place.
  auto* base = static_cast<uint8_t*>(workspace);
  auto* expandX = static_cast<uint8_t*>(a.expandX);
  const auto* x = static_cast<const uint8_t*>(a.x);
  std::vector<float> droppedWeights(a.expandScales ? 0 : static_cast<size_t>(total));
  float* weightsOut = a.expandScales ? a.expandScales : droppedWeights.data();
  std::vector<size_t> packedAt(static_cast<size_t>(W));  // workspace offset of each destination's part
  {
    size_t ws = 0;
    for (int d = 0; d < W; ++d) {
      packedAt[static_cast<size_t>(d)] = ws;
      if (d == me) continue;
      const auto n =
          static_cast<size_t>(h->stagingBase[static_cast<size_t>(d) + 1] - h->stagingBase[static_cast<size_t>(d)]);
      ws += n * ((quant ? outRow + sizeof(float) : 0) + sizeof(float));
    }
  }
  std::vector<float> v(quant ? static_cast<size_t>(H) : 0);
  // One row as the receiver stores it, with its weight and scale.
  auto packRow = [&](const Row& r, uint8_t* dst, uint8_t* weight, uint8_t* scale) {
    if (weight != nullptr) std::memcpy(weight, &r.weight, sizeof(float));  // the workspace may be unaligned
    const uint8_t* src = x + static_cast<size_t>(r.token) * inRow;
    if (!quant) {
      if (dst != nullptr) std::memcpy(dst, src, inRow);
      return;
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
  };
  // Destination d's rows: to this rank itself, straight to their final place.
  auto pack = [&](int d) {
    const int64_t first = h->stagingBase[static_cast<size_t>(d)];
    const auto n = static_cast<size_t>(h->stagingBase[static_cast<size_t>(d) + 1] - first);
    if (d == me) {
      int64_t idx = first;
      for (int64_t j = 0; j < L; ++j) {
        const int64_t start = h->blockStart[static_cast<size_t>(me * L + j)];
        for (int64_t k = 0; k < h->blockRows[static_cast<size_t>(me * L + j)]; ++k, ++idx) {
          const int64_t row = start + k;
          packRow(rows[static_cast<size_t>(order[static_cast<size_t>(idx)])],
                  expandX + static_cast<size_t>(row) * outRow, reinterpret_cast<uint8_t*>(weightsOut + row),
                  quant ? reinterpret_cast<uint8_t*>(a.dynamicScales + row) : nullptr);
        }
      }
      return;
    }
    uint8_t* part = base + packedAt[static_cast<size_t>(d)];
    uint8_t* weights = part + (quant ? n * outRow : 0);
    uint8_t* scales = weights + n * sizeof(float);
    for (size_t k = 0; k < n; ++k) {
      packRow(rows[static_cast<size_t>(order[static_cast<size_t>(first) + k])], quant ? part + k * outRow : nullptr,
              weights + k * sizeof(float), quant ? scales + k * sizeof(float) : nullptr);
    }
  };

  Messages messages(static_cast<size_t>(h->sentRows) + static_cast<size_t>(3 * W * L + W));
  auto ready = std::make_unique<bool[]>(static_cast<size_t>(W));
  for (int d = 0; d < W; ++d) {
    if (d == me) continue;
    const int64_t first = h->stagingBase[static_cast<size_t>(d)];
    const auto n = static_cast<size_t>(h->stagingBase[static_cast<size_t>(d) + 1] - first);
    if (quant) {
      messages.piece(base + packedAt[static_cast<size_t>(d)], n * (outRow + 2 * sizeof(float)));
    } else {
      for (size_t k = 0; k < n; ++k) {
        messages.piece(
            x + static_cast<size_t>(rows[static_cast<size_t>(order[static_cast<size_t>(first) + k])].token) * inRow,
            inRow);
      }
      messages.piece(base + packedAt[static_cast<size_t>(d)], n * sizeof(float));
    }
    messages.end(OpKind::Send, d);
  }
  for (int r = 0; r < W; ++r) {
    if (r == me) continue;
    for (int64_t j = 0; j < L; ++j) {
      const size_t b = static_cast<size_t>(r * L + j);
      messages.piece(expandX + static_cast<size_t>(h->blockStart[b]) * outRow,
                     static_cast<size_t>(h->blockRows[b]) * outRow);
    }
    for (int64_t j = 0; j < L; ++j) {
      const size_t b = static_cast<size_t>(r * L + j);
      messages.piece(weightsOut + h->blockStart[b], static_cast<size_t>(h->blockRows[b]) * sizeof(float));
    }
    if (quant) {
      for (int64_t j = 0; j < L; ++j) {
        const size_t b = static_cast<size_t>(r * L + j);
        messages.piece(a.dynamicScales + h->blockStart[b], static_cast<size_t>(h->blockRows[b]) * sizeof(float));
      }
    }
    messages.end(OpKind::Recv, r);
  }
  // Packing, one destination per unit, starting after this rank (each rank
  // feeds a different peer first) and ending with this rank's own rows.
  using PackFn = decltype(pack);
  class Packer final : public ExchangeWork {
   public:
    Packer(int me, int W, bool* ready, const PackFn& pack) : me_(me), W_(W), ready_(ready), pack_(pack) {}
    bool pending() const override { return done_ < W_; }
    void runOne() override {
      const int d = (me_ + 1 + done_++) % W_;
      pack_(d);
      ready_[d] = true;
    }

   private:
    int me_, W_, done_ = 0;
    bool* ready_;
    const PackFn& pack_;
  };
  Packer packer(me, W, ready.get(), pack);
  std::vector<OpDesc>& ops = messages.ops(ready.get());
  if (!ops.empty()) comm.runPointToPoint(ops, {}, &packer);
  while (packer.pending()) packer.runOne();  // what the transfers did not wait for
  *a.recvRows = total;
  h->complete = true;
}

}  // namespace vigil::moe
