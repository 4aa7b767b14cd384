#pragma once
// What the MoE tests share: a case (a spec, its generated inputs, the
// reference's dispatch and combine), one rank's buffers (inputs with slack,
// outputs pre-filled with 0xA5 and followed by guard areas), a run of
// dispatch + combine through the C API checked against the reference, and
// the checks of a refusal (result code, error id, what the text names).

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/thread_ranks.hpp"
#include "moe/moe_reference.hpp"
#include "vigil/vigil.h"

namespace vigil::test::moe {

using moeref::Config;
using moeref::elemSize;
using moeref::Inputs;
using moeref::RankOutput;

struct Spec {
  int64_t W = 2, S = 0, Sh = 0, E = 4, H = 16, K = 2, maxTokens = 6;
  std::vector<int64_t> bs{};  // per rank; empty = maxTokens on every rank
  vigilDataType_t xType = vigilFloat32;
  int quantMode = 0, tokenNumsType = 1, maskDims = 0;
  int unusedPercent = 0;  // chance (%) of -1 in a routed slot
  bool scales = true, smooth = false, expandScales = true;
  bool hot = false;   // every token's first min(L,K) experts live on rank S: it receives its full capacity
  bool ties = false;  // rows of +-127 and k + 0.5: scale 1, every other q a tie (round half to even)
  bool identity = true, combineScales = true, sharedX = false;
  int combineType = -1;  // -1: xType
  uint64_t seed = 1;
};

struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  float uniform(float lo, float hi) { return lo + (hi - lo) * static_cast<float>(next() >> 40) / 16777216.0f; }
};

inline Config configOf(const Spec& s) {
  return Config{s.W, s.S, s.Sh, s.E, s.H, s.K, s.maxTokens, s.quantMode, s.tokenNumsType};
}

inline vigilDataType_t combineTypeOf(const Spec& s) {
  return s.combineType < 0 ? s.xType : static_cast<vigilDataType_t>(s.combineType);
}

inline Inputs generate(const Spec& s) {
  Inputs in;
  in.cfg = configOf(s);
  in.xType = s.xType;
  in.ranks.resize(s.W);
  Rng rng{s.seed * 7919 + 17};
  const int64_t L = s.E / (s.W - s.S), hotCount = std::min(L, s.K);
  for (int64_t r = 0; r < s.W; ++r) {
    moeref::RankInput& ri = in.ranks[r];
    ri.bs = s.bs.empty() ? s.maxTokens : s.bs[r];
    ri.x.assign(static_cast<size_t>(ri.bs * s.H) * elemSize(s.xType), 0);
    for (int64_t i = 0; i < ri.bs * s.H; ++i) {
      const bool zeroRow = s.quantMode == 2 && r == 0 && i < s.H;  // an all-zero row is legal
      float v = zeroRow ? 0.0f : rng.uniform(-4.0f, 4.0f);
      if (s.ties)
        v = i % s.H == 0 ? (rng.below(2) ? 127.0f : -127.0f) : static_cast<float>(rng.below(241) - 120) + 0.5f;
      moeref::store(s.xType, ri.x.data(), i, v);
    }
    for (int64_t t = 0; t < ri.bs; ++t) {
      std::vector<int32_t> perm(s.E);
      for (int64_t e = 0; e < s.E; ++e) perm[e] = static_cast<int32_t>(e);
      int64_t first = 0;
      if (s.hot) first = hotCount;  // experts 0..hotCount-1: all on rank S
      for (int64_t k = first; k < s.K; ++k) std::swap(perm[k], perm[k + rng.below(s.E - k)]);
      for (int64_t k = 0; k < s.K; ++k) {
        const bool unused = s.unusedPercent > 0 && rng.below(100) < s.unusedPercent;
        ri.expertIds.push_back(unused ? -1 : perm[k]);
      }
    }
    if (s.scales)
      for (int64_t i = 0; i < ri.bs * s.K; ++i) ri.expertScales.push_back(rng.uniform(0.0625f, 1.0625f));
    ri.activeMaskDims = s.maskDims;
    if (s.maskDims > 0) {
      const int64_t n = s.maskDims == 1 ? ri.bs : ri.bs * s.K;
      for (int64_t i = 0; i < n; ++i) ri.activeMask.push_back(rng.below(4) == 0 ? 0 : 1);
    }
  }
  if (s.smooth)
    for (int64_t i = 0; i < (s.Sh + s.E) * s.H; ++i) in.smooth.push_back(rng.uniform(0.5f, 2.0f));
  return in;
}

// Everything one test needs about a case, computed once before the ranks start.
struct Case {
  Spec spec;
  Inputs in;
  std::vector<RankOutput> ref;
  moeref::CombineInputs cin;
  std::vector<std::vector<uint8_t>> refOut;
};

inline Case makeCase(const Spec& s) {
  Case k{s, generate(s), {}, {}, {}};
  k.ref = moeref::dispatch(k.in);
  const vigilDataType_t ct = combineTypeOf(s);
  k.cin.xType = ct;
  k.cin.expertOut = moeref::expertOutputs(k.in, k.ref, ct, s.identity);
  Rng rng{s.seed * 104729 + 3};
  k.cin.scales.resize(s.W);
  k.cin.sharedX.resize(s.W);
  for (int64_t r = 0; r < s.W; ++r) {
    const int64_t bs = k.in.ranks[r].bs;
    if (s.combineScales)
      for (int64_t i = 0; i < bs * s.K; ++i) k.cin.scales[r].push_back(rng.uniform(0.25f, 1.25f));
    if (s.sharedX) {
      k.cin.sharedX[r].assign(static_cast<size_t>(bs * s.H) * elemSize(ct), 0);
      for (int64_t i = 0; i < bs * s.H; ++i) moeref::store(ct, k.cin.sharedX[r].data(), i, rng.uniform(-1.0f, 1.0f));
    }
  }
  k.refOut = moeref::combine(k.in, k.ref, k.cin);
  return k;
}

inline vigilMoeConfig cConfig(const Config& c, int64_t rank) {
  vigilMoeConfig m{};
  m.size = sizeof(vigilMoeConfig);
  m.epWorldSize = c.W;
  m.epRankId = rank;
  m.moeExpertNum = c.E;
  m.sharedExpertNum = c.Sh;
  m.sharedExpertRankNum = c.S;
  m.hidden = c.H;
  m.topK = c.K;
  m.maxTokensPerRank = c.maxTokens;
  m.quantMode = c.quantMode;
  m.expertTokenNumsType = c.tokenNumsType;
  return m;
}

constexpr uint8_t kFill = 0xA5;
constexpr int64_t kGuardRows = 2;

template <class T>
void fillA5(std::vector<T>& v) {
  std::memset(v.data(), kFill, v.size() * sizeof(T));
}

// One rank's buffers for a case: inputs copied with slack (so that a test may
// raise bs or topK without reading past them), outputs pre-filled with 0xA5,
// each larger than required by a guard area.
struct RankBuffers {
  vigilMoeConfig cfg{};
  vigilDataType_t xType = vigilFloat32;
  int64_t bs = 0, capacity = 0, rowBytes = 0;
  bool quant = false, hasScales = false, hasSmooth = false, hasExpandScales = false;
  int maskDims = 0;
  std::vector<uint8_t> x, mask;
  std::vector<int32_t> ids;
  std::vector<float> scales, smooth;
  std::vector<uint8_t> expandX;
  std::vector<float> dyn, expandScales;
  std::vector<int64_t> tokenNums, recvRows;
  std::vector<int32_t> recvCounts;

  RankBuffers(const Case& k, int64_t rank) {
    const Config& c = k.in.cfg;
    const moeref::RankInput& ri = k.in.ranks[rank];
    cfg = cConfig(c, rank);
    xType = k.in.xType;
    bs = ri.bs;
    quant = c.quantMode == 2;
    hasScales = !ri.expertScales.empty();
    hasSmooth = !k.in.smooth.empty();
    hasExpandScales = k.spec.expandScales;
    maskDims = ri.activeMaskDims;
    const size_t slackTokens = static_cast<size_t>(c.maxTokens + 2), slackSlots = slackTokens * (c.K + 8);
    x.assign(slackTokens * c.H * 4, 0);
    std::copy(ri.x.begin(), ri.x.end(), x.begin());
    ids.assign(slackSlots, 0);
    std::copy(ri.expertIds.begin(), ri.expertIds.end(), ids.begin());
    scales.assign(slackSlots, 1.0f);
    std::copy(ri.expertScales.begin(), ri.expertScales.end(), scales.begin());
    mask.assign(slackSlots, 1);
    std::copy(ri.activeMask.begin(), ri.activeMask.end(), mask.begin());
    smooth.assign(static_cast<size_t>((c.Sh + c.E + 8) * c.H), 1.0f);
    std::copy(k.in.smooth.begin(), k.in.smooth.end(), smooth.begin());
    capacity = moeref::requiredRows(c, rank);
    rowBytes = quant ? c.H : c.H * static_cast<int64_t>(elemSize(xType));
    const int64_t L = moeref::localExperts(c, rank);
    expandX.resize(static_cast<size_t>((capacity + kGuardRows) * rowBytes));
    dyn.resize(capacity + kGuardRows);
    expandScales.resize(capacity + kGuardRows);
    tokenNums.resize(4 * L + 8);
    recvCounts.resize(4 * c.W * L + 64);
    recvRows.resize(2);
    fill();
  }
  void fill() {
    fillA5(expandX), fillA5(dyn), fillA5(expandScales), fillA5(tokenNums), fillA5(recvCounts), fillA5(recvRows);
  }
  vigilMoeDispatchArgs args() {
    vigilMoeDispatchArgs a{};
    a.x = x.data();
    a.xType = xType;
    a.bs = bs;
    a.expertIds = ids.data();
    a.expertScales = hasScales ? scales.data() : nullptr;
    a.activeMask = maskDims > 0 ? mask.data() : nullptr;
    a.activeMaskDims = maskDims;
    a.smoothScales = hasSmooth ? smooth.data() : nullptr;
    a.expandX = expandX.data();
    a.expandXRows = capacity;
    a.dynamicScales = quant ? dyn.data() : nullptr;
    a.expandScales = hasExpandScales ? expandScales.data() : nullptr;
    a.expertTokenNums = tokenNums.data();
    a.epRecvCounts = recvCounts.data();
    a.recvRows = recvRows.data();
    return a;
  }
};

// The index of the first byte of [p, p+n) that is not 0xA5, or -1.
inline int64_t firstWritten(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i)
    if (b[i] != kFill) return static_cast<int64_t>(i);
  return -1;
}

template <class T>
void expectUnwritten(const std::vector<T>& v, size_t fromElem, const std::string& what) {
  if (fromElem >= v.size()) return;
  const int64_t i = firstWritten(v.data() + fromElem, (v.size() - fromElem) * sizeof(T));
  EXPECT_EQ(i, -1) << what << ": byte " << i << " past element " << fromElem << " was written (not 0xA5)";
}

inline void expectSameBytes(const void* got, const void* want, size_t n, const std::string& what) {
  const auto *g = static_cast<const uint8_t*>(got), *w = static_cast<const uint8_t*>(want);
  for (size_t i = 0; i < n; ++i)
    if (g[i] != w[i]) {
      ADD_FAILURE() << what << ": first difference at byte " << i << " of " << n << ": got 0x" << std::hex << int(g[i])
                    << ", want 0x" << int(w[i]);
      return;
    }
}

inline bool untouched(const RankBuffers& b) {
  return firstWritten(b.expandX.data(), b.expandX.size()) < 0 && firstWritten(b.dyn.data(), b.dyn.size() * 4) < 0 &&
         firstWritten(b.expandScales.data(), b.expandScales.size() * 4) < 0 &&
         firstWritten(b.tokenNums.data(), b.tokenNums.size() * 8) < 0 &&
         firstWritten(b.recvCounts.data(), b.recvCounts.size() * 4) < 0 &&
         firstWritten(b.recvRows.data(), b.recvRows.size() * 8) < 0;
}

// The dispatch outputs of one rank against the reference.
inline void checkDispatch(const Case& k, int64_t rank, const RankBuffers& b) {
  const RankOutput& ref = k.ref[rank];
  const Config& c = k.in.cfg;
  const std::string at = "rank " + std::to_string(rank) + " ";
  ASSERT_EQ(b.recvRows[0], ref.recvRows) << at << "recvRows";
  expectUnwritten(b.recvRows, 1, at + "recvRows guard");
  const int64_t L = moeref::localExperts(c, rank), n = ref.recvRows;
  expectSameBytes(b.expandX.data(), ref.expandX.data(), static_cast<size_t>(n * b.rowBytes), at + "expandX rows");
  expectUnwritten(b.expandX, static_cast<size_t>(n * b.rowBytes), at + "expandX beyond recvRows");
  if (b.quant) {
    expectSameBytes(b.dyn.data(), ref.dynamicScales.data(), n * 4, at + "dynamicScales");
    expectUnwritten(b.dyn, n, at + "dynamicScales beyond recvRows");
  }
  if (b.hasExpandScales) {
    expectSameBytes(b.expandScales.data(), ref.expandScales.data(), n * 4, at + "expandScales");
    expectUnwritten(b.expandScales, n, at + "expandScales beyond recvRows");
  } else {
    expectUnwritten(b.expandScales, 0, at + "expandScales (not passed)");
  }
  EXPECT_EQ(std::vector<int64_t>(b.tokenNums.begin(), b.tokenNums.begin() + L), ref.expertTokenNums)
      << at << "expertTokenNums (type " << c.tokenNumsType << ")";
  expectUnwritten(b.tokenNums, L, at + "expertTokenNums beyond L");
  EXPECT_EQ(std::vector<int32_t>(b.recvCounts.begin(), b.recvCounts.begin() + L * c.W), ref.epRecvCounts)
      << at << "epRecvCounts";
  expectUnwritten(b.recvCounts, L * c.W, at + "epRecvCounts beyond W*L");
}

// Every rank's verdict, so that no rank goes on to an operation its peers skip.
inline bool allAgree(vigilComm_t comm, bool mine) {
  int32_t v = mine ? 1 : 0, all = 0;
  if (vigilAllReduce(&v, &all, 1, vigilInt32, vigilMin, comm, nullptr) != vigilSuccess) {
    ADD_FAILURE() << "agreement allreduce: " << vigilGetLastError(comm);
    return false;
  }
  return all == 1;
}

// out == x * (sum of the active routed weights + shared experts) + sharedX,
// within float rounding (identity expert, no smooth scales).
inline void checkIdentity(const Case& k, int64_t rank, const uint8_t* out) {
  const Spec& s = k.spec;
  if (!s.identity || s.smooth) return;
  const Config& c = k.in.cfg;
  const moeref::RankInput& ri = k.in.ranks[rank];
  const vigilDataType_t ct = k.cin.xType;
  auto unit = [](vigilDataType_t t) { return t == vigilFloat32 ? 0x1p-24 : t == vigilFloat16 ? 0x1p-11 : 0x1p-8; };
  const double u = std::max(unit(ct), unit(k.in.xType)) * static_cast<double>(c.K + c.Sh + 3);
  for (int64_t t = 0; t < ri.bs; ++t) {
    const bool any = moeref::tokenHasActiveSlot(c, ri, t);
    double sumW = 0, sumAbsW = 0, amax = 0;
    for (int64_t slot = 0; slot < c.K + c.Sh; ++slot) {
      if (!moeref::slotActive(c, ri, t, slot)) continue;
      const double w = slot < c.K && !k.cin.scales[rank].empty() ? k.cin.scales[rank][t * c.K + slot] : 1.0;
      sumW += w, sumAbsW += std::fabs(w);
    }
    for (int64_t h = 0; h < c.H; ++h)
      amax = std::max(amax, std::fabs(double(moeref::load(k.in.xType, ri.x.data(), t * c.H + h))));
    for (int64_t h = 0; h < c.H; ++h) {
      const double x = moeref::load(k.in.xType, ri.x.data(), t * c.H + h);
      const double sx = k.cin.sharedX[rank].empty() ? 0.0 : moeref::load(ct, k.cin.sharedX[rank].data(), t * c.H + h);
      const double want = any ? x * sumW + sx : 0.0;
      double tol = (std::fabs(x) * sumAbsW + std::fabs(sx)) * u + 0x1p-20;
      if (c.quantMode == 2) tol += sumAbsW * amax / 254.0 * (1 + 1e-5);
      const double got = moeref::load(ct, out, t * c.H + h);
      ASSERT_NEAR(got, want, tol) << "rank " << rank << " token " << t << " h " << h << ": identity combine";
    }
  }
}

// The int8 round trip of every received row: |q * dynamicScale - v| <= amax / 254.
inline void checkRoundTrip(const Case& k, int64_t rank, const RankBuffers& b) {
  if (!b.quant) return;
  const Config& c = k.in.cfg;
  for (int64_t row = 0; row < b.recvRows[0] && row < k.ref[rank].recvRows; ++row) {
    const moeref::RowOrigin& o = k.ref[rank].rows[row];
    const moeref::RankInput& ri = k.in.ranks[o.source];
    const int64_t smoothRow = o.slot < c.K ? c.Sh + ri.expertIds[o.token * c.K + o.slot] : o.slot - c.K;
    std::vector<float> v(c.H);
    float amax = 0;
    for (int64_t h = 0; h < c.H; ++h) {
      const float s = k.in.smooth.empty() ? 1.0f : k.in.smooth[smoothRow * c.H + h];
      v[h] = moeref::load(k.in.xType, ri.x.data(), o.token * c.H + h) * s;
      amax = std::max(amax, std::fabs(v[h]));
    }
    for (int64_t h = 0; h < c.H; ++h) {
      const float back = static_cast<float>(static_cast<int8_t>(b.expandX[row * c.H + h])) * b.dyn[row];
      ASSERT_LE(std::fabs(back - v[h]), amax / 254.0f * (1 + 1e-5f))
          << "rank " << rank << " row " << row << " h " << h << ": int8 round trip";
    }
  }
}

// Combine's inputs on this rank (the reference's expert outputs, with some
// slack after each buffer) and its output, pre-filled with kFill.
struct CombineBuffers {
  std::vector<uint8_t> expertOut, sharedX, out;
  std::vector<float> scales;
  size_t outBytes = 0;
  vigilMoeCombineArgs args{};

  CombineBuffers(const Case& k, int64_t rank)
      : expertOut(k.cin.expertOut[rank]), sharedX(k.cin.sharedX[rank]), scales(k.cin.scales[rank]) {
    outBytes = static_cast<size_t>(k.in.ranks[rank].bs * k.in.cfg.H) * elemSize(k.cin.xType);
    out.assign(outBytes + 64, kFill);
    expertOut.resize(expertOut.size() + 16, 0);
    sharedX.resize(sharedX.size() + 16, 0);
    scales.resize(scales.size() + 4, 1.0f);
    args.expandX = expertOut.data();
    args.xType = k.cin.xType;
    args.expertScales = k.cin.scales[rank].empty() ? nullptr : scales.data();
    args.sharedExpertX = k.cin.sharedX[rank].empty() ? nullptr : sharedX.data();
    args.out = out.data();
  }
  CombineBuffers(const CombineBuffers&) = delete;
  CombineBuffers& operator=(const CombineBuffers&) = delete;
};

// One dispatch + combine on this rank, checked against the reference. Appends
// every output byte to `capture` when given. Returns false when a call failed.
inline bool runExact(int64_t rank, vigilComm_t comm, const Case& k, std::vector<uint8_t>* capture = nullptr) {
  RankBuffers b(k, rank);
  EXPECT_EQ(vigilMoeRequiredRows(&b.cfg, static_cast<int>(rank)), b.capacity) << "rank " << rank;
  vigilMoeDispatchArgs a = b.args();
  size_t ws = 0;
  vigilResult_t rc = vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws);
  EXPECT_EQ(rc, vigilSuccess) << "rank " << rank << " dispatch first phase: " << vigilGetLastError(comm);
  std::vector<uint8_t> work(std::max<size_t>(ws, 1), kFill);
  vigilMoeHandle_t h = nullptr;
  if (rc == vigilSuccess) rc = vigilMoeDispatch(&b.cfg, &a, work.data(), ws, &h, comm, nullptr);
  if (rc != vigilSuccess) ADD_FAILURE() << "rank " << rank << " dispatch: " << vigilGetLastError(comm);
  if (!allAgree(comm, rc == vigilSuccess)) {
    if (h != nullptr) vigilMoeHandleDestroy(h);
    return false;
  }
  EXPECT_NE(h, nullptr) << "rank " << rank;
  checkDispatch(k, rank, b);
  checkRoundTrip(k, rank, b);

  CombineBuffers cb(k, rank);
  const size_t outBytes = cb.outBytes;
  std::vector<uint8_t>& out = cb.out;
  vigilMoeCombineArgs ca = cb.args;
  size_t cws = 0;
  rc = vigilMoeCombineGetWorkspaceSize(&b.cfg, h, comm, &cws);
  EXPECT_EQ(rc, vigilSuccess) << "rank " << rank << " combine first phase: " << vigilGetLastError(comm);
  std::vector<uint8_t> cwork(std::max<size_t>(cws, 1), kFill);
  if (rc == vigilSuccess) rc = vigilMoeCombine(&b.cfg, h, &ca, cwork.data(), cws, comm, nullptr);
  if (rc != vigilSuccess) ADD_FAILURE() << "rank " << rank << " combine: " << vigilGetLastError(comm);
  const bool ok = allAgree(comm, rc == vigilSuccess);
  if (ok) {
    expectSameBytes(out.data(), k.refOut[rank].data(), outBytes, "rank " + std::to_string(rank) + " combine out");
    expectUnwritten(out, outBytes, "rank " + std::to_string(rank) + " combine out beyond bs rows");
    checkIdentity(k, rank, out.data());
  }
  EXPECT_EQ(vigilMoeHandleDestroy(h), vigilSuccess) << vigilGetLastError(comm);
  if (capture != nullptr) {
    for (const auto* v : {&b.expandX, &out}) capture->insert(capture->end(), v->begin(), v->end());
    const auto* d = reinterpret_cast<const uint8_t*>(b.dyn.data());
    capture->insert(capture->end(), d, d + b.dyn.size() * 4);
  }
  return ok;
}

// ---- Refusals ---------------------------------------------------------------

struct Outcome {
  vigilResult_t rc = vigilSuccess;
  std::string text;
};
inline Outcome outcome(vigilResult_t rc, vigilComm_t comm) {
  return {rc, rc == vigilSuccess ? std::string() : std::string(vigilGetLastError(comm))};
}

// (No std::regex: with GCC 12 and the sanitizers it trips -Wmaybe-uninitialized.)
inline bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
inline bool isWordChar(char c) {
  return isDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// The text holds `value` as a whole number.
inline bool hasNumber(const std::string& text, int64_t value) {
  const std::string v = std::to_string(value);
  for (size_t at = text.find(v); at != std::string::npos; at = text.find(v, at + 1)) {
    const bool before =
        at == 0 || (!isDigit(text[at - 1]) && text[at - 1] != '.' && (value < 0 || text[at - 1] != '-'));
    const size_t end = at + v.size();
    if (before && (end == text.size() || !isDigit(text[end]))) return true;
  }
  return false;
}

// The text names `value` right after `word` (or in a list that follows it):
// "rank 1", "ranks 0 and 1", "rank(s) 1", "slots 0, 2", "token=3", "token [3]".
inline bool names(const std::string& text, const std::string& word, int64_t value) {
  std::string lower = text, w = word;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (char& c : w) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string v = std::to_string(value);
  for (size_t at = lower.find(w); at != std::string::npos; at = lower.find(w, at + 1)) {
    if (at > 0 && isWordChar(lower[at - 1])) continue;
    size_t p = at + w.size();
    auto skipSpaces = [&] {
      while (p < lower.size() && lower[p] == ' ') ++p;
    };
    while (p < lower.size() && isWordChar(lower[p]) && !isDigit(lower[p])) ++p;  // "ranks", "slots"
    if (lower.compare(p, 3, "(s)") == 0) p += 3;
    skipSpaces();
    if (p < lower.size() && (lower[p] == ':' || lower[p] == '=' || lower[p] == '#')) ++p;
    skipSpaces();
    if (p < lower.size() && (lower[p] == '[' || lower[p] == '(' || lower[p] == '{')) ++p;
    for (;;) {
      skipSpaces();
      size_t q = p;
      if (q < lower.size() && lower[q] == '-') ++q;
      while (q < lower.size() && isDigit(lower[q])) ++q;
      if (q == p || (q == p + 1 && lower[p] == '-')) break;  // no number here
      if (lower.compare(p, q - p, v) == 0 && q - p == v.size() && (q == lower.size() || lower[q] != '.')) return true;
      p = q;
      skipSpaces();
      if (p < lower.size() && (lower[p] == ',' || lower[p] == '&')) {
        ++p;
      } else if (lower.compare(p, 3, "and") == 0) {
        p += 3;
      } else {
        break;
      }
    }
  }
  return false;
}

// The text without the generated communicator name (hex digits that could
// pass for a number the text names).
inline std::string withoutCommName(std::string text) {
  const size_t at = text.find("(comm '");
  if (at == std::string::npos) return text;
  const size_t end = text.find("')", at);
  return end == std::string::npos ? text : text.replace(at, end + 2 - at, "(comm)");
}

struct Expect {
  vigilResult_t rc = vigilSuccess;
  std::string id;
  std::vector<std::string> contains;                   // substrings
  std::vector<std::pair<std::string, int64_t>> named;  // names(text, word, value)
  std::vector<int64_t> numbers;                        // hasNumber(text, n)
};

inline void expectRefusal(const Outcome& o, const Expect& e, const std::string& what) {
  if (std::getenv("VIGIL_MOE_TEST_PRINT") != nullptr) std::printf("%s: %s\n", what.c_str(), o.text.c_str());
  EXPECT_EQ(o.rc, e.rc) << what << ": " << o.text;
  EXPECT_EQ(o.text.rfind(e.id, 0), 0u) << what << ": want error id " << e.id << ", text: " << o.text;
  const std::string text = withoutCommName(o.text);
  for (const std::string& s : e.contains)
    EXPECT_NE(text.find(s), std::string::npos) << what << ": text lacks \"" << s << "\": " << o.text;
  for (const auto& [word, value] : e.named)
    EXPECT_TRUE(names(text, word, value)) << what << ": text does not name " << word << " " << value << ": " << o.text;
  for (int64_t n : e.numbers) EXPECT_TRUE(hasNumber(text, n)) << what << ": text lacks " << n << ": " << o.text;
}

}  // namespace vigil::test::moe
