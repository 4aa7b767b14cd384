// MoE: placement, capacity, and the local checks of docs/moe.md "Validation"
// 1-5, which every rank runs before the handshake.

#include <algorithm>

#include "core/dtype.hpp"
#include "moe/moe.hpp"

namespace vigil::moe {

namespace {

bool supportedX(vigilDataType_t t) {
  return t == vigilFloat32 || t == vigilFloat16 || t == vigilBfloat16;
}

}  // namespace

Placement::Placement(const vigilMoeConfig& cfg)
    : W(cfg.epWorldSize),
      S(cfg.sharedExpertRankNum),
      Sh(cfg.sharedExpertNum),
      E(cfg.moeExpertNum),
      K(cfg.topK),
      H(cfg.hidden),
      maxTokens(cfg.maxTokensPerRank),
      routedPerRank(cfg.epWorldSize > cfg.sharedExpertRankNum
                        ? cfg.moeExpertNum / (cfg.epWorldSize - cfg.sharedExpertRankNum)
                        : 0) {}

int64_t Placement::requiredRows(int64_t rank) const {
  if (rank < S) {
    const int64_t group = S / Sh;  // source ranks served by one shared-expert rank: every group-th
    return maxTokens * ((W + group - 1) / group);
  }
  return maxTokens * W * std::min(routedPerRank, K);
}

uint64_t configDigest(const vigilMoeConfig& cfg) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (int64_t v : {cfg.epWorldSize, cfg.moeExpertNum, cfg.sharedExpertNum, cfg.sharedExpertRankNum, cfg.hidden,
                    cfg.topK, cfg.maxTokensPerRank, static_cast<int64_t>(cfg.quantMode)}) {
    for (int i = 0; i < 8; ++i) {
      h ^= static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i));
      h *= 0x100000001b3ULL;
    }
  }
  return h;
}

size_t dispatchWorkspaceBytes(const vigilMoeConfig& cfg, const vigilMoeDispatchArgs& args) {
  // Per row this rank can send, packed per destination: its weight, and
  // when quantised, the int8 row and its scale. Unquantised rows travel
  // straight from x.
  (void)args;
  const auto slots = static_cast<size_t>(cfg.topK + cfg.sharedExpertNum);
  const size_t perRow =
      cfg.quantMode == vigilMoeQuantDynamicInt8 ? static_cast<size_t>(cfg.hidden) + 2 * sizeof(float) : sizeof(float);
  return static_cast<size_t>(cfg.maxTokensPerRank) * slots * perRow;
}

std::string configProblem(const vigilMoeConfig& c) {
  const int64_t W = c.epWorldSize, S = c.sharedExpertRankNum, Sh = c.sharedExpertNum, E = c.moeExpertNum;
  if (c.size != sizeof(vigilMoeConfig)) {
    return cat("cfg->size is ", c.size, ", expected sizeof(vigilMoeConfig) = ", sizeof(vigilMoeConfig));
  }
  if (W <= 0) return cat("epWorldSize ", W, " must be > 0");
  if (S < 0 || S >= W) return cat("sharedExpertRankNum ", S, " is outside [0, epWorldSize ", W, ")");
  if (Sh < 0 || Sh > 4) return cat("sharedExpertNum ", Sh, " is outside [0, 4]");
  if ((S == 0) != (Sh == 0))
    return cat("sharedExpertRankNum ", S, " and sharedExpertNum ", Sh, " must both be 0 or both > 0");
  if (Sh > 0 && S % Sh != 0) return cat("sharedExpertRankNum ", S, " is not a multiple of sharedExpertNum ", Sh);
  if (E <= 0) return cat("moeExpertNum ", E, " must be > 0");
  if (E % (W - S) != 0) return cat("moeExpertNum ", E, " is not a multiple of the ", W - S, " routed-expert ranks");
  if (c.topK <= 0 || c.topK > E) return cat("topK ", c.topK, " is outside [1, moeExpertNum ", E, "]");
  if (c.hidden <= 0) return cat("hidden ", c.hidden, " must be > 0");
  if (c.maxTokensPerRank < 0) return cat("maxTokensPerRank ", c.maxTokensPerRank, " must be >= 0");
  if (c.quantMode != vigilMoeQuantNone && c.quantMode != vigilMoeQuantDynamicInt8) {
    return cat("quantMode ", c.quantMode, " is neither 0 nor 2");
  }
  if (c.expertTokenNumsType != vigilMoeExpertTokenNumsPrefixSum &&
      c.expertTokenNumsType != vigilMoeExpertTokenNumsCount) {
    return cat("expertTokenNumsType ", c.expertTokenNumsType, " is neither 0 (prefix sum) nor 1 (counts)");
  }
  return {};
}

void validateDispatch(const Communicator& comm, const vigilMoeConfig* cfg, const vigilMoeDispatchArgs* args,
                      const void* workspace, size_t workspaceBytes, bool checkWorkspace) {
  const char* call = checkWorkspace ? "vigilMoeDispatch" : "vigilMoeDispatchGetWorkspaceSize";
  auto fail = [&](Errc errc) {
    ErrorBuilder b = comm.error(errc);
    b.op(call);
    return b;
  };
  // 1. Pointers and types.
  if (cfg == nullptr || args == nullptr) fail(Errc::ApiNullArgument).cause(cfg ? "args" : "cfg", " is NULL").raise();
  if (!supportedX(args->xType)) {
    fail(Errc::ApiBadDataType)
        .cause("xType ", static_cast<int>(args->xType), " is not float32, float16 or bfloat16")
        .raise();
  }
  // 2. The declared group is the real one.
  if (cfg->epWorldSize != comm.nranks()) {
    fail(Errc::MoeWorldMismatch)
        .cause("declared epWorldSize ", cfg->epWorldSize, ", but the communicator has ", comm.nranks(), " ranks (rank ",
               comm.rank(), ")")
        .raise();
  }
  if (cfg->epRankId != comm.rank()) {
    fail(Errc::MoeWorldMismatch)
        .cause("declared epRankId ", cfg->epRankId, ", but this is rank ", comm.rank(), " of the communicator")
        .raise();
  }
  // 3. Ranges.
  if (std::string why = configProblem(*cfg); !why.empty()) fail(Errc::MoeBadConfig).cause(why).raise();
  auto bad = [&](const auto&... why) { fail(Errc::MoeBadConfig).cause(why...).raise(); };
  if (args->bs < 0 || args->bs > cfg->maxTokensPerRank) {
    bad("bs ", args->bs, " is outside [0, maxTokensPerRank ", cfg->maxTokensPerRank, "]");
  }
  if (args->activeMask != nullptr && args->activeMaskDims != 1 && args->activeMaskDims != 2) {
    bad("activeMaskDims ", args->activeMaskDims, " is neither 1 ([bs]) nor 2 ([bs, topK])");
  }
  // 1 again, now that the shapes are known: the buffers that must exist.
  const Placement p(*cfg);
  const int64_t required = p.requiredRows(comm.rank());
  auto need = [&](const void* ptr, bool needed, const char* name) {
    if (ptr == nullptr && needed) fail(Errc::ApiNullArgument).cause(name, " is NULL").raise();
  };
  need(args->x, args->bs > 0, "x");
  need(args->expertIds, args->bs > 0, "expertIds");
  need(args->expandX, required > 0, "expandX");
  need(args->dynamicScales, cfg->quantMode == vigilMoeQuantDynamicInt8 && required > 0, "dynamicScales (quantMode 2)");
  need(args->expertTokenNums, true, "expertTokenNums");
  need(args->epRecvCounts, true, "epRecvCounts");
  need(args->recvRows, true, "recvRows");
  // 4. Expert ids of the active slots.
  const int64_t K = cfg->topK;
  for (int64_t t = 0; t < args->bs; ++t) {
    if (args->activeMask != nullptr && args->activeMaskDims == 1 && args->activeMask[t] == 0) continue;
    for (int64_t k = 0; k < K; ++k) {
      if (args->activeMask != nullptr && args->activeMaskDims == 2 && args->activeMask[t * K + k] == 0) continue;
      const int32_t id = args->expertIds[t * K + k];
      if (id == -1) continue;
      if (id < -1 || id >= cfg->moeExpertNum) {
        fail(Errc::MoeBadExpertId)
            .cause("rank ", comm.rank(), ", token ", t, ", slot ", k, ": expert id ", id, " is outside [-1, ",
                   cfg->moeExpertNum, ")")
            .raise();
      }
      for (int64_t k2 = 0; k2 < k; ++k2) {
        if (args->activeMask != nullptr && args->activeMaskDims == 2 && args->activeMask[t * K + k2] == 0) continue;
        if (args->expertIds[t * K + k2] == id) {
          fail(Errc::MoeBadExpertId)
              .cause("rank ", comm.rank(), ", token ", t, ": expert ", id, " is chosen twice (slots ", k2, " and ", k,
                     ")")
              .raise();
        }
      }
    }
  }
  // 5. Room for the result and the staging.
  if (args->expandXRows < required) {
    fail(Errc::MoeTooSmall)
        .cause("expandXRows is ", args->expandXRows, ", but rank ", comm.rank(), " may receive up to ", required,
               " rows (vigilMoeRequiredRows)")
        .raise();
  }
  if (checkWorkspace) {
    const size_t needed = dispatchWorkspaceBytes(*cfg, *args);
    if (workspace == nullptr && needed > 0) fail(Errc::ApiNullArgument).cause("workspace is NULL").raise();
    if (workspaceBytes < needed) {
      fail(Errc::MoeTooSmall)
          .cause("the workspace has ", workspaceBytes, " bytes, but this dispatch needs ", needed,
                 " (vigilMoeDispatchGetWorkspaceSize)")
          .raise();
    }
  }
}

void checkHandle(const Communicator& comm, const vigilMoeConfig& cfg, const Handle* h, const char* call,
                 bool queuedOk) {
  auto fail = [&](const auto&... why) { comm.error(Errc::MoeBadHandle).op(call).cause(why...).raise(); };
  if (h == nullptr) fail("the handle is NULL");
  if (h->commId != &comm) fail("the handle comes from a dispatch on another communicator");
  if (configDigest(cfg) != h->configDigest) fail("the configuration differs from the one of the handle's dispatch");
  if (!queuedOk && !h->complete) {
    fail("the handle's dispatch did not complete: it failed on its stream (vigilStreamSynchronize returns why)");
  }
}

}  // namespace vigil::moe
