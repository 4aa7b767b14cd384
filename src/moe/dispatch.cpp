// MoE dispatch: the handshake, then its steps: planRoutes (top-k ids to
// destinations), exchangeCounts, layOutReceive and layOutStaging (where every
// row lands and leaves from), exchangeRows (packing, int8, the data exchange).
// On symmetric buffers (every rank's outputs in the communicator's symmetric
// heap, all ranks on one host), gatherCounts and writeRowsSymmetric take the
// place of the two exchanges: each source packs its rows straight into the
// destinations' copies of expandX.

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/dtype.hpp"
#include "moe/moe.hpp"
#include "reduce/half.hpp"
#include "symm/heap.hpp"

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

bool agree(Communicator& comm, const char* call, const vigilMoeConfig* cfg, int64_t xType, int64_t last,
           const char* lastName, const std::optional<Error>& own, int64_t symmetricKey) {
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
  constexpr size_t kStride = kAgreeFields + 2;  // the fields, the verdict, the symmetric key
  constexpr size_t kRecord = kStride * sizeof(int64_t);
  const int n = comm.nranks();
  int64_t mine[kStride];
  std::copy(std::begin(fields), std::end(fields), mine);
  mine[kAgreeFields] = own ? static_cast<int64_t>(own->errc()) + 1 : 0;
  mine[kAgreeFields + 1] = symmetricKey;
  std::vector<int64_t> all(static_cast<size_t>(n) * kStride);
  OpDesc op;
  op.kind = OpKind::AllGather;
  op.send = mine;
  op.recv = all.data();
  op.count = kRecord;
  op.dtype = vigilUint8;
  comm.run(op);
  if (own) throw *own;

  auto at = [&](int r, int f) { return all[static_cast<size_t>(r) * kStride + static_cast<size_t>(f)]; };
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
  for (int r = 0; r < n; ++r) {
    if (at(r, kAgreeFields + 1) < 0 || at(r, kAgreeFields + 1) != at(0, kAgreeFields + 1)) return false;
  }
  return true;
}

namespace {

size_t toSize(int64_t n) {
  return static_cast<size_t>(n);
}

// One active (token, slot) of this rank: the row it sends, where, and what
// travels with it.
struct Route {
  int32_t token, slot;
  int64_t destRank, localExpert, smoothRow;
  float weight;
};

// What the steps of one dispatch hand on to each other, for a config and
// arguments that passed the local checks and the handshake. The part of the
// routing that combine needs as well lives in the handle.
struct DispatchPlan {
  DispatchPlan(const Communicator& comm, const vigilMoeConfig& config, const vigilMoeDispatchArgs& arguments,
               Handle& into)
      : cfg(config),
        args(arguments),
        handle(into),
        placement(config),
        me(comm.rank()),
        worldSize(comm.nranks()),
        topK(config.topK),
        sharedExperts(config.sharedExpertNum),
        slots(config.topK + config.sharedExpertNum),
        hidden(config.hidden),
        localExperts(placement.localExperts(comm.rank())),
        quantised(config.quantMode == vigilMoeQuantDynamicInt8),
        inRowBytes(toSize(config.hidden) * dtypeSize(arguments.xType)),
        outRowBytes(quantised ? toSize(config.hidden) : inRowBytes) {}

  const vigilMoeConfig& cfg;
  const vigilMoeDispatchArgs& args;
  Handle& handle;
  const Placement placement;
  const int me, worldSize;
  const int64_t topK, sharedExperts, slots, hidden;
  const int64_t localExperts;  // L of this rank
  const bool quantised;
  const size_t inRowBytes, outRowBytes;  // a row of x; a row of expandX

  std::vector<Route> routes;               // planRoutes: the active slots, in (token, slot) order
  std::vector<int64_t> recvCount;          // exchangeCounts: [source * L + j] rows from each source
  int64_t recvRows = 0;                    // layOutReceive
  std::vector<int32_t> routeOfStagingRow;  // layOutStaging: staging index -> index in `routes`

  int64_t stagingRows(int dest) const {
    return handle.stagingBase[toSize(dest) + 1] - handle.stagingBase[toSize(dest)];
  }
};

// Planning: the active slots of every token, each with its destination rank
// and local expert there, and the rows per (destination, local expert).
void planRoutes(DispatchPlan& plan) {
  const vigilMoeDispatchArgs& a = plan.args;
  const Placement& placement = plan.placement;
  Handle& h = plan.handle;
  const int W = plan.worldSize;
  const int64_t K = plan.topK;
  h.destBase.assign(toSize(W) + 1, 0);
  for (int d = 0; d < W; ++d) h.destBase[toSize(d) + 1] = h.destBase[toSize(d)] + placement.localExperts(d);
  h.sendCount.assign(toSize(h.destBase[toSize(W)]), 0);

  std::vector<Route>& routes = plan.routes;
  routes.reserve(toSize(a.bs * plan.slots));
  for (int64_t t = 0; t < a.bs; ++t) {
    if (a.activeMask != nullptr && a.activeMaskDims == 1 && a.activeMask[t] == 0) continue;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t e = a.expertIds[t * K + k];
      if (e < 0 || (a.activeMask != nullptr && a.activeMaskDims == 2 && a.activeMask[t * K + k] == 0)) continue;
      routes.push_back({static_cast<int32_t>(t), static_cast<int32_t>(k), placement.routedRank(e),
                        placement.routedLocal(e), plan.sharedExperts + e,
                        a.expertScales ? a.expertScales[t * K + k] : 1.0f});
    }
    for (int64_t s = 0; s < plan.sharedExperts; ++s) {
      routes.push_back(
          {static_cast<int32_t>(t), static_cast<int32_t>(K + s), placement.sharedRank(s, plan.me), 0, s, 1.0f});
    }
  }
  for (const Route& r : routes) ++h.sendCount[toSize(h.destBase[toSize(r.destRank)] + r.localExpert)];
}

// Count exchange: an all-to-all of rows per (destination, local expert), so
// that every rank learns how many rows each source sends to each of its experts.
void exchangeCounts(Communicator& comm, DispatchPlan& plan) {
  const int W = plan.worldSize;
  const int64_t L = plan.localExperts;
  plan.recvCount.assign(toSize(W * L), 0);
  std::vector<size_t> sendCounts(toSize(W)), sendDispls(toSize(W)), recvCounts(toSize(W)), recvDispls(toSize(W));
  for (int d = 0; d < W; ++d) {
    sendCounts[toSize(d)] = toSize(plan.placement.localExperts(d));
    sendDispls[toSize(d)] = toSize(plan.handle.destBase[toSize(d)]);
    recvCounts[toSize(d)] = toSize(L);
    recvDispls[toSize(d)] = toSize(d * L);
  }
  OpDesc op;
  op.kind = OpKind::AllToAllV;
  op.send = plan.handle.sendCount.data();
  op.recv = plan.recvCount.data();
  op.dtype = vigilInt64;
  op.sendcounts = sendCounts.data();
  op.sdispls = sendDispls.data();
  op.recvcounts = recvCounts.data();
  op.rdispls = recvDispls.data();
  comm.run(op);
}

// Receive layout: blocks ordered by (local expert, source rank), with
// epRecvCounts and expertTokenNums describing them.
void layOutReceive(const Communicator& comm, DispatchPlan& plan) {
  const vigilMoeDispatchArgs& a = plan.args;
  Handle& h = plan.handle;
  const int W = plan.worldSize;
  const int64_t L = plan.localExperts;
  const bool perExpertCounts = plan.cfg.expertTokenNumsType == vigilMoeExpertTokenNumsCount;
  h.blockStart.assign(toSize(W * L), 0);
  h.blockRows.assign(toSize(W * L), 0);
  int64_t total = 0;
  for (int64_t j = 0; j < L; ++j) {
    int64_t expertRows = 0;
    for (int r = 0; r < W; ++r) {
      const size_t block = toSize(r * L + j);
      h.blockStart[block] = total;
      h.blockRows[block] = plan.recvCount[block];
      total += plan.recvCount[block];
      expertRows += plan.recvCount[block];
      a.epRecvCounts[j * W + r] = static_cast<int32_t>(total);
    }
    a.expertTokenNums[j] = perExpertCounts ? expertRows : total;
  }
  if (total > a.expandXRows) {
    comm.error(Errc::Internal)
        .op("vigilMoeDispatch")
        .cause("peers announced ", total, " rows for ", a.expandXRows, " rows of capacity")
        .raise();
  }
  h.recvRows = total;
  plan.recvRows = total;
}

// Staging order: per destination, its rows by (local expert, token). It is
// the order they travel in, and where combine brings them back to.
void layOutStaging(DispatchPlan& plan) {
  Handle& h = plan.handle;
  const int W = plan.worldSize;
  std::vector<int64_t> next(h.sendCount.size());  // next staging index per (destination, local expert)
  h.stagingBase.assign(toSize(W) + 1, 0);
  for (int d = 0; d < W; ++d) {
    int64_t sent = 0;
    for (int64_t i = h.destBase[toSize(d)]; i < h.destBase[toSize(d) + 1]; ++i) {
      next[toSize(i)] = sent;
      sent += h.sendCount[toSize(i)];
    }
    h.stagingBase[toSize(d) + 1] = h.stagingBase[toSize(d)] + sent;
  }
  h.sentRows = h.stagingBase[toSize(W)];
  h.sentTokens.assign(toSize(W), {});
  h.sentSlots.assign(toSize(W), {});
  for (int d = 0; d < W; ++d) {
    h.sentTokens[toSize(d)].resize(toSize(plan.stagingRows(d)));
    h.sentSlots[toSize(d)].resize(toSize(plan.stagingRows(d)));
  }
  h.rowOf.assign(toSize(plan.args.bs * plan.slots), -1);
  plan.routeOfStagingRow.resize(toSize(h.sentRows));
  for (size_t i = 0; i < plan.routes.size(); ++i) {
    const Route& r = plan.routes[i];
    const auto d = toSize(r.destRank);
    const int64_t idx = next[toSize(h.destBase[d] + r.localExpert)]++;
    h.sentTokens[d][toSize(idx)] = r.token;
    h.sentSlots[d][toSize(idx)] = r.slot;
    h.rowOf[toSize(r.token * plan.slots + r.slot)] = h.stagingBase[d] + idx;
    plan.routeOfStagingRow[toSize(h.stagingBase[d] + idx)] = static_cast<int32_t>(i);
  }
}

// Packing: each destination's rows as the receiver stores them, with their
// weights and, when quantised, their scales. A peer's part goes to the
// workspace, [int8 rows][weights][scales] when quantised, else [weights]
// (unquantised rows travel straight from x); this rank's own rows go
// straight to their blocks of expandX. It runs one destination at a time
// while the transfers wait, and marks that destination's message ready.
class RowPacker final : public ExchangeWork {
 public:
  RowPacker(const DispatchPlan& plan, void* workspace);

  uint8_t* packedPart(int dest) const { return workspace_ + packedAt_[toSize(dest)]; }
  float* weightsOut() const { return weightsOut_; }
  const bool* ready() const { return ready_.get(); }

  // One row as the receiver stores it (`row` NULL: it travels from x as it
  // is), with its weight (`weight` NULL: dropped) and, when quantised, its scale.
  void packRow(const Route& route, uint8_t* row, uint8_t* weight, uint8_t* scale);

  // One destination per unit, starting after this rank (each rank feeds a
  // different peer first) and ending with this rank's own rows.
  bool pending() const override { return done_ < plan_.worldSize; }
  void runOne() override {
    const int dest = (plan_.me + 1 + done_++) % plan_.worldSize;
    if (dest == plan_.me) {
      packOwnRows();
    } else {
      packPeerRows(dest);
    }
    ready_[toSize(dest)] = true;
  }

 private:
  void packOwnRows();
  void packPeerRows(int dest);
  void quantiseRow(const uint8_t* src, const Route& route, uint8_t* row, uint8_t* scale);

  const DispatchPlan& plan_;
  uint8_t* const workspace_;
  std::vector<size_t> packedAt_;       // workspace offset of each destination's part
  std::vector<float> droppedWeights_;  // where the weights land when expandScales is NULL
  float* weightsOut_;
  std::vector<float> scaledRow_;  // the row being quantised, times its smooth scales
  std::unique_ptr<bool[]> ready_;
  int done_ = 0;
};

RowPacker::RowPacker(const DispatchPlan& plan, void* workspace)
    : plan_(plan),
      workspace_(static_cast<uint8_t*>(workspace)),
      packedAt_(toSize(plan.worldSize)),
      droppedWeights_(plan.args.expandScales ? 0 : toSize(plan.recvRows)),
      weightsOut_(plan.args.expandScales ? plan.args.expandScales : droppedWeights_.data()),
      scaledRow_(plan.quantised ? toSize(plan.hidden) : 0),
      ready_(std::make_unique<bool[]>(toSize(plan.worldSize))) {
  const size_t perRow = (plan.quantised ? plan.outRowBytes + sizeof(float) : 0) + sizeof(float);
  size_t offset = 0;
  for (int d = 0; d < plan.worldSize; ++d) {
    packedAt_[toSize(d)] = offset;
    if (d != plan.me) offset += toSize(plan.stagingRows(d)) * perRow;
  }
}

void RowPacker::packOwnRows() {
  const DispatchPlan& plan = plan_;
  const Handle& h = plan.handle;
  auto* expandX = static_cast<uint8_t*>(plan.args.expandX);
  int64_t idx = h.stagingBase[toSize(plan.me)];
  for (int64_t j = 0; j < plan.localExperts; ++j) {
    const size_t block = toSize(plan.me * plan.localExperts + j);
    for (int64_t k = 0; k < h.blockRows[block]; ++k, ++idx) {
      const int64_t row = h.blockStart[block] + k;
      packRow(plan.routes[toSize(plan.routeOfStagingRow[toSize(idx)])], expandX + toSize(row) * plan.outRowBytes,
              reinterpret_cast<uint8_t*>(weightsOut_ + row),
              plan.quantised ? reinterpret_cast<uint8_t*>(plan.args.dynamicScales + row) : nullptr);
    }
  }
}

void RowPacker::packPeerRows(int dest) {
  const DispatchPlan& plan = plan_;
  const int64_t first = plan.handle.stagingBase[toSize(dest)];
  const auto n = toSize(plan.stagingRows(dest));
  uint8_t* part = packedPart(dest);
  uint8_t* weights = part + (plan.quantised ? n * plan.outRowBytes : 0);
  uint8_t* scales = weights + n * sizeof(float);
  for (size_t k = 0; k < n; ++k) {
    packRow(plan.routes[toSize(plan.routeOfStagingRow[toSize(first) + k])],
            plan.quantised ? part + k * plan.outRowBytes : nullptr, weights + k * sizeof(float),
            plan.quantised ? scales + k * sizeof(float) : nullptr);
  }
}

void RowPacker::packRow(const Route& route, uint8_t* row, uint8_t* weight, uint8_t* scale) {
  if (weight != nullptr) std::memcpy(weight, &route.weight, sizeof(float));  // the workspace may be unaligned
  const uint8_t* src = static_cast<const uint8_t*>(plan_.args.x) + toSize(route.token) * plan_.inRowBytes;
  if (!plan_.quantised) {
    if (row != nullptr) std::memcpy(row, src, plan_.inRowBytes);
    return;
  }
  quantiseRow(src, route, row, scale);
}

// Dynamic int8 per row (moe.md "Quantisation"), fused into the packing.
void RowPacker::quantiseRow(const uint8_t* src, const Route& route, uint8_t* row, uint8_t* scale) {
  const vigilMoeDispatchArgs& a = plan_.args;
  const int64_t H = plan_.hidden;
  const float* smooth = a.smoothScales ? a.smoothScales + route.smoothRow * H : nullptr;
  float amax = 0.0f;
  for (int64_t i = 0; i < H; ++i) {
    scaledRow_[toSize(i)] = loadFloat(src, i, a.xType) * (smooth ? smooth[i] : 1.0f);
    amax = std::max(amax, std::fabs(scaledRow_[toSize(i)]));
  }
  const float s = amax > 0.0f ? 127.0f / amax : 1.0f;
  for (int64_t i = 0; i < H; ++i) {
    const float q = std::clamp(std::nearbyint(scaledRow_[toSize(i)] * s), -127.0f, 127.0f);
    row[i] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
  const float inverse = 1.0f / s;
  std::memcpy(scale, &inverse, sizeof(float));
}

// One message to each peer: [rows][weights][scales] in staging order.
// Unquantised rows are gathered straight from x; the rest is packed.
void describeSends(Messages& messages, const DispatchPlan& plan, const RowPacker& packer) {
  const auto* x = static_cast<const uint8_t*>(plan.args.x);
  for (int d = 0; d < plan.worldSize; ++d) {
    if (d == plan.me) continue;
    const int64_t first = plan.handle.stagingBase[toSize(d)];
    const auto n = toSize(plan.stagingRows(d));
    if (plan.quantised) {
      messages.piece(packer.packedPart(d), n * (plan.outRowBytes + 2 * sizeof(float)));
    } else {
      for (size_t k = 0; k < n; ++k) {
        const Route& route = plan.routes[toSize(plan.routeOfStagingRow[toSize(first) + k])];
        messages.piece(x + toSize(route.token) * plan.inRowBytes, plan.inRowBytes);
      }
      messages.piece(packer.packedPart(d), n * sizeof(float));
    }
    messages.end(OpKind::Send, d);
  }
}

// One message from each peer, scattered on arrival into its block of every
// local expert: the rows, then the weights, then the scales.
void describeReceives(Messages& messages, const DispatchPlan& plan, const RowPacker& packer) {
  const Handle& h = plan.handle;
  const int64_t L = plan.localExperts;
  auto* expandX = static_cast<uint8_t*>(plan.args.expandX);
  for (int r = 0; r < plan.worldSize; ++r) {
    if (r == plan.me) continue;
    for (int64_t j = 0; j < L; ++j) {
      const size_t block = toSize(r * L + j);
      messages.piece(expandX + toSize(h.blockStart[block]) * plan.outRowBytes,
                     toSize(h.blockRows[block]) * plan.outRowBytes);
    }
    for (int64_t j = 0; j < L; ++j) {
      const size_t block = toSize(r * L + j);
      messages.piece(packer.weightsOut() + h.blockStart[block], toSize(h.blockRows[block]) * sizeof(float));
    }
    if (plan.quantised) {
      for (int64_t j = 0; j < L; ++j) {
        const size_t block = toSize(r * L + j);
        messages.piece(plan.args.dynamicScales + h.blockStart[block], toSize(h.blockRows[block]) * sizeof(float));
      }
    }
    messages.end(OpKind::Recv, r);
  }
}

// Pack and exchange: one message per peer and direction, each destination's
// packing running while the messages to earlier ones travel.
void exchangeRows(Communicator& comm, const DispatchPlan& plan, void* workspace) {
  RowPacker packer(plan, workspace);
  const auto W = toSize(plan.worldSize), L = toSize(plan.localExperts);
  Messages messages(toSize(plan.handle.sentRows) + 3 * W * L + W);
  describeSends(messages, plan, packer);
  describeReceives(messages, plan, packer);
  std::vector<OpDesc>& ops = messages.ops(packer.ready());
  if (!ops.empty()) comm.runPointToPoint(ops, {}, &packer);
  packer.runRest();
}

// ---- On symmetric buffers ----

// Where this rank's outputs lie in the symmetric heap.
struct SymmetricOutputs {
  SymmetricHeap* heap = nullptr;
  size_t x = 0, scales = 0, dynamic = 0;  // heap offsets (scales, dynamic: when passed)
  int64_t rows = 0;                       // rows that every rank's allocations hold from there
  int64_t key = -1;                       // for agree()
};

// The outputs of a dispatch that passed its local checks, if they all lie in
// symmetric allocations and every rank is on this host.
SymmetricOutputs symmetricOutputs(Communicator& comm, const vigilMoeConfig& cfg, const vigilMoeDispatchArgs& a) {
  SymmetricOutputs out;
  if (comm.nranks() < 2) return out;
  SymmetricHeap* heap = SymmetricHeap::of(comm, false);
  if (heap == nullptr || !heap->allLocal()) return out;
  const bool quantised = cfg.quantMode == vigilMoeQuantDynamicInt8;
  const size_t rowBytes = toSize(cfg.hidden) * (quantised ? 1 : dtypeSize(a.xType));
  const size_t rows = toSize(a.expandXRows);
  const auto x = heap->placeOf(a.expandX, rows * rowBytes);
  if (!x || rowBytes == 0) return out;
  size_t fit = x->room / rowBytes;
  constexpr size_t kNone = ~size_t{0};
  size_t scales = kNone, dynamic = kNone;
  for (auto [ptr, at] :
       {std::pair{a.expandScales, &scales}, std::pair{quantised ? a.dynamicScales : nullptr, &dynamic}}) {
    if (ptr == nullptr) continue;
    const auto place = heap->placeOf(ptr, rows * sizeof(float));
    if (!place) return out;
    *at = place->offset;
    fit = std::min(fit, place->room / sizeof(float));
  }
  out.heap = heap;
  out.x = x->offset;
  out.scales = scales;
  out.dynamic = dynamic;
  out.rows = static_cast<int64_t>(fit);
  out.key = static_cast<int64_t>(symm::fingerprintOf({1, x->offset, scales, dynamic}) >> 1);
  return out;
}

// Counts on symmetric buffers: a source must know where its rows go in each
// destination's expandX, so the rows per (destination, local expert) of
// every source are all-gathered. Each rank takes its own receive counts from
// them, and the first row of each of its blocks at every destination (blocks
// ordered by local expert, then source rank).
void gatherCounts(Communicator& comm, DispatchPlan& plan, int64_t rowsThatFit) {
  Handle& h = plan.handle;
  const int W = plan.worldSize, me = plan.me;
  const int64_t L = plan.localExperts;
  const auto n = toSize(h.destBase[toSize(W)]);
  std::vector<int64_t> all(toSize(W) * n);
  comm.run(OpDesc{
      .kind = OpKind::AllGather, .send = h.sendCount.data(), .recv = all.data(), .count = n, .dtype = vigilInt64});
  auto count = [&](int source, int64_t i) { return all[toSize(source) * n + toSize(i)]; };
  plan.recvCount.assign(toSize(W * L), 0);
  for (int r = 0; r < W; ++r) {
    for (int64_t j = 0; j < L; ++j) plan.recvCount[toSize(r * L + j)] = count(r, h.destBase[toSize(me)] + j);
  }
  h.peerBlockStart.assign(n, 0);
  for (int d = 0; d < W; ++d) {
    int64_t rows = 0;  // rows of d's earlier local experts
    for (int64_t i = h.destBase[toSize(d)]; i < h.destBase[toSize(d) + 1]; ++i) {
      int64_t before = 0;
      for (int r = 0; r < me; ++r) before += count(r, i);
      h.peerBlockStart[toSize(i)] = rows + before;
      for (int r = 0; r < W; ++r) rows += count(r, i);
    }
    if (rows > rowsThatFit) {
      comm.error(Errc::Internal)
          .op("vigilMoeDispatch")
          .cause("rank ", d, " receives ", rows, " rows, but the symmetric allocations of expandX",
                 " (and its scales) hold ", rowsThatFit)
          .raise();
    }
  }
}

// Every row packed (copied, or quantised) straight into its destination's
// copy of expandX, with its weight and scale; destinations in turn, starting
// after this rank. The exit barrier then makes them visible to their owners.
void writeRowsSymmetric(const DispatchPlan& plan, const SymmetricOutputs& o, void* workspace) {
  RowPacker packer(plan, workspace);  // its packRow; the workspace stays unused
  const Handle& h = plan.handle;
  const bool scales = plan.args.expandScales != nullptr;
  for (int step = 1; step <= plan.worldSize; ++step) {
    const int d = (plan.me + step) % plan.worldSize;
    uint8_t* x = o.heap->at(d, o.x);
    uint8_t* weights = scales ? o.heap->at(d, o.scales) : nullptr;
    uint8_t* dynamic = plan.quantised ? o.heap->at(d, o.dynamic) : nullptr;
    int64_t idx = h.stagingBase[toSize(d)];
    for (int64_t i = h.destBase[toSize(d)]; i < h.destBase[toSize(d) + 1]; ++i) {
      const int64_t start = h.peerBlockStart[toSize(i)];
      for (int64_t k = 0; k < h.sendCount[toSize(i)]; ++k, ++idx) {
        const auto row = toSize(start + k);
        packer.packRow(plan.routes[toSize(plan.routeOfStagingRow[toSize(idx)])], x + row * plan.outRowBytes,
                       weights ? weights + row * sizeof(float) : nullptr,
                       dynamic ? dynamic + row * sizeof(float) : nullptr);
      }
    }
  }
}

}  // namespace

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
  SymmetricOutputs symmetricOut;
  if (!own) symmetricOut = symmetricOutputs(comm, *cfgPtr, *argsPtr);
  const bool symmetric = agree(comm, "vigilMoeDispatch", cfgPtr, argsPtr ? static_cast<int64_t>(argsPtr->xType) : -1,
                               static_cast<int64_t>(dispatchId), "the dispatch number", own, symmetricOut.key);

  // Every rank passed its checks and agrees: from here on, outputs are written.
  DispatchPlan plan(comm, *cfgPtr, *argsPtr, into);
  if (into.commId == nullptr) {  // else set when the dispatch was queued, and read meanwhile
    into.comm = commPtr;
    into.commId = &comm;
    into.configDigest = configDigest(*cfgPtr);
  }
  into.dispatchId = dispatchId;
  into.bs = argsPtr->bs;
  into.hidden = plan.hidden;
  into.slots = plan.slots;
  into.localExperts = plan.localExperts;

  planRoutes(plan);
  std::optional<SymmetricHeap::KernelScope> scope;
  if (symmetric) {
    scope.emplace(*symmetricOut.heap, false, dispatchId);
    gatherCounts(comm, plan, symmetricOut.rows);
  } else {
    into.peerBlockStart.clear();
    exchangeCounts(comm, plan);
  }
  layOutReceive(comm, plan);
  layOutStaging(plan);
  if (symmetric) {
    writeRowsSymmetric(plan, symmetricOut, workspace);
    symmetricOut.heap->kernelBarrier("vigilMoeDispatch", SymmetricHeap::KernelStage::MoeDispatchExit,
                                     symm::fingerprintOf({into.configDigest, dispatchId}), dispatchId);
  } else {
    exchangeRows(comm, plan, workspace);
  }
  *argsPtr->recvRows = plan.recvRows;
  into.complete = true;
}

}  // namespace vigil::moe
