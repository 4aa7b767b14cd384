#pragma once
// A single-process reference of MoE dispatch and combine (docs: shared
// moe.md), independent of vigil's code: plain loops over all W ranks' inputs
// in one place. Only vigilDataType_t comes from vigil.h. Element conversions
// are written here (round half to even), so the reference does not share a
// bug with the library's own conversions.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "vigil/vigil.h"

namespace moeref {

// ---- Element conversions (round half to even) -------------------------------

inline uint16_t floatToHalf(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t a = bits & 0x7fffffffu;
  if (a >= 0x7f800000u) return sign | (a > 0x7f800000u ? 0x7e00 : 0x7c00);  // NaN, Inf
  if (a >= 0x477ff000u) return sign | 0x7c00;                               // >= 65520 rounds to Inf
  uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const int exp = static_cast<int>(a >> 23);  // biased float exponent
  int shift;                                  // bits of `mant` dropped
  uint32_t base;                              // exponent field of the result (before rounding)
  if (exp >= 113) {                           // a normal half
    shift = 13;
    base = static_cast<uint32_t>(exp - 112) << 10;
    mant &= 0x7fffffu;
  } else {                                 // a half subnormal (or zero): units of 2^-24
    if (a == 0 || exp < 102) return sign;  // below 2^-25: rounds to zero
    shift = 126 - exp;
    base = 0;
  }
  uint32_t q = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1);
  if (rem > half || (rem == half && (q & 1u))) ++q;  // carries into the exponent field when needed
  return static_cast<uint16_t>(sign | (base + q));
}

inline float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {  // zero or subnormal: mant * 2^-24, exact in float
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t floatToBf16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounded = bits + 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(rounded >> 16);
}

inline float bf16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline size_t elemSize(vigilDataType_t t) {
  return t == vigilFloat32 ? 4 : 2;
}

inline float load(vigilDataType_t t, const uint8_t* base, size_t i) {
  if (t == vigilFloat32) {
    float v;
    std::memcpy(&v, base + 4 * i, 4);
    return v;
  }
  uint16_t h;
  std::memcpy(&h, base + 2 * i, 2);
  return t == vigilFloat16 ? halfToFloat(h) : bf16ToFloat(h);
}

inline void store(vigilDataType_t t, uint8_t* base, size_t i, float v) {
  if (t == vigilFloat32) {
    std::memcpy(base + 4 * i, &v, 4);
    return;
  }
  const uint16_t h = t == vigilFloat16 ? floatToHalf(v) : floatToBf16(v);
  std::memcpy(base + 2 * i, &h, 2);
}

// ---- Config, placement, capacity --------------------------------------------

struct Config {
  int64_t W = 0, S = 0, Sh = 0, E = 0, H = 0, K = 0, maxTokens = 0;
  int quantMode = 0, tokenNumsType = 1;
};

inline int64_t localExperts(const Config& c, int64_t rank) {
  return rank < c.S ? 1 : c.E / (c.W - c.S);
}

inline int64_t requiredRows(const Config& c, int64_t rank) {
  if (rank < c.S) {
    const int64_t group = c.S / c.Sh;
    return c.maxTokens * ((c.W + group - 1) / group);
  }
  return c.maxTokens * c.W * std::min(localExperts(c, rank), c.K);
}

// Where slot `slot` of a token from `source` goes: (rank, local expert).
struct Target {
  int64_t rank, local;
};
inline Target routedTarget(const Config& c, int64_t e) {
  const int64_t L = c.E / (c.W - c.S);
  return {c.S + e / L, e % L};
}
inline Target sharedTarget(const Config& c, int64_t s, int64_t source) {
  const int64_t group = c.S / c.Sh;
  return {s * group + source % group, 0};
}

// ---- Inputs and outputs -----------------------------------------------------

struct RankInput {
  int64_t bs = 0;
  std::vector<uint8_t> x;           // [bs,H] in xType
  std::vector<int32_t> expertIds;   // [bs,K]
  std::vector<float> expertScales;  // [bs,K]; empty = NULL
  std::vector<uint8_t> activeMask;  // [bs] or [bs,K]; empty = NULL
  int activeMaskDims = 0;
};

struct Inputs {
  Config cfg;
  vigilDataType_t xType = vigilFloat32;
  std::vector<RankInput> ranks;  // W of them
  std::vector<float> smooth;     // [(Sh+E),H]; empty = NULL
};

struct RowOrigin {
  int64_t source, token, slot, local;
};

struct RankOutput {
  int64_t recvRows = 0;
  std::vector<uint8_t> expandX;            // [recvRows,H] in xType, or int8 when quantised
  std::vector<float> dynamicScales;        // [recvRows] when quantised
  std::vector<float> expandScales;         // [recvRows]
  std::vector<int64_t> expertTokenNums;    // [L]
  std::vector<int32_t> epRecvCounts;       // [L*W]
  std::vector<RowOrigin> rows;             // [recvRows]: where each row came from
  std::vector<int64_t> destRank, destRow;  // source side, [bs*(K+Sh)]: -1 when the slot is inactive
};

inline bool tokenMaskedOut(const RankInput& r, int64_t t) {
  return r.activeMaskDims == 1 && !r.activeMask.empty() && r.activeMask[t] == 0;
}

inline bool slotActive(const Config& c, const RankInput& r, int64_t t, int64_t slot) {
  if (tokenMaskedOut(r, t)) return false;
  if (slot >= c.K) return true;  // shared slots: a 2-d mask affects routed slots only
  if (r.expertIds[t * c.K + slot] < 0) return false;
  return !(r.activeMaskDims == 2 && !r.activeMask.empty() && r.activeMask[t * c.K + slot] == 0);
}

inline bool tokenHasActiveSlot(const Config& c, const RankInput& r, int64_t t) {
  for (int64_t slot = 0; slot < c.K + c.Sh; ++slot)
    if (slotActive(c, r, t, slot)) return true;
  return false;
}

// Dynamic int8 quantisation of one row (moe.md "Quantisation").
inline float quantiseRow(const Inputs& in, const uint8_t* xRow, int64_t smoothRow, int8_t* q) {
  const int64_t H = in.cfg.H;
  std::vector<float> v(H);
  float amax = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    const float s = in.smooth.empty() ? 1.0f : in.smooth[smoothRow * H + h];
    v[h] = load(in.xType, xRow, h) * s;
    amax = std::max(amax, std::fabs(v[h]));
  }
  const float scale = amax > 0.0f ? 127.0f / amax : 1.0f;
  for (int64_t h = 0; h < H; ++h) {
    const float r = std::nearbyint(v[h] * scale);  // the default rounding mode: half to even
    q[h] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
  return 1.0f / scale;
}

inline std::vector<RankOutput> dispatch(const Inputs& in) {
  const Config& c = in.cfg;
  const int64_t slots = c.K + c.Sh, H = c.H;
  const size_t rowBytes = c.quantMode == 2 ? static_cast<size_t>(H) : static_cast<size_t>(H) * elemSize(in.xType);
  std::vector<RankOutput> out(c.W);
  // Every active (token, slot) as (destination, local expert, source, token, slot).
  std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>> sends;
  for (int64_t r = 0; r < c.W; ++r) {
    const RankInput& ri = in.ranks[r];
    out[r].destRank.assign(ri.bs * slots, -1);
    out[r].destRow.assign(ri.bs * slots, -1);
    for (int64_t t = 0; t < ri.bs; ++t)
      for (int64_t slot = 0; slot < slots; ++slot) {
        if (!slotActive(c, ri, t, slot)) continue;
        const Target d = slot < c.K ? routedTarget(c, ri.expertIds[t * c.K + slot]) : sharedTarget(c, slot - c.K, r);
        sends.emplace_back(d.rank, d.local, r, t, slot);
      }
  }
  std::sort(sends.begin(), sends.end());  // (destination, local expert, source, token) ascending
  for (int64_t d = 0; d < c.W; ++d) {
    RankOutput& o = out[d];
    const int64_t L = localExperts(c, d);
    o.expertTokenNums.assign(L, 0);
    o.epRecvCounts.assign(L * c.W, 0);
    for (const auto& [dest, j, r, t, slot] : sends) {
      if (dest != d) continue;
      const int64_t row = o.recvRows++;
      o.rows.push_back({r, t, slot, j});
      out[r].destRank[t * slots + slot] = d;
      out[r].destRow[t * slots + slot] = row;
      const RankInput& ri = in.ranks[r];
      const uint8_t* xRow = ri.x.data() + static_cast<size_t>(t * H) * elemSize(in.xType);
      o.expandX.resize(o.expandX.size() + rowBytes);
      uint8_t* dst = o.expandX.data() + static_cast<size_t>(row) * rowBytes;
      if (c.quantMode == 2) {
        const int64_t smoothRow = slot < c.K ? c.Sh + ri.expertIds[t * c.K + slot] : slot - c.K;
        o.dynamicScales.push_back(quantiseRow(in, xRow, smoothRow, reinterpret_cast<int8_t*>(dst)));
      } else {
        std::memcpy(dst, xRow, rowBytes);
      }
      o.expandScales.push_back(slot < c.K && !ri.expertScales.empty() ? ri.expertScales[t * c.K + slot] : 1.0f);
      o.expertTokenNums[j] += 1;
    }
    int64_t running = 0;
    for (int64_t j = 0; j < L; ++j)
      for (int64_t r = 0; r < c.W; ++r) {
        for (const RowOrigin& row : o.rows) running += (row.local == j && row.source == r) ? 1 : 0;
        o.epRecvCounts[j * c.W + r] = static_cast<int32_t>(running);
      }
    if (c.tokenNumsType == 0)
      for (int64_t j = 1; j < L; ++j) o.expertTokenNums[j] += o.expertTokenNums[j - 1];
  }
  return out;
}

// ---- Experts and combine ----------------------------------------------------

// The input of one received row as float: the dequantised int8 row
// (q * dynamicScale) or the row itself.
inline float rowValue(const Inputs& in, const RankOutput& o, int64_t row, int64_t h) {
  if (in.cfg.quantMode == 2)
    return static_cast<float>(static_cast<int8_t>(o.expandX[row * in.cfg.H + h])) * o.dynamicScales[row];
  return load(in.xType, o.expandX.data() + static_cast<size_t>(row * in.cfg.H) * elemSize(in.xType), h);
}

// Expert outputs in `outType` for every rank's received rows: the identity,
// or (identity == false) a different factor per (rank, local expert).
inline float expertFactor(int64_t rank, int64_t local) {
  return 0.5f + 0.25f * static_cast<float>((rank * 5 + local * 3) % 7);
}
inline std::vector<std::vector<uint8_t>> expertOutputs(const Inputs& in, const std::vector<RankOutput>& d,
                                                       vigilDataType_t outType, bool identity) {
  std::vector<std::vector<uint8_t>> outs(in.cfg.W);
  for (int64_t r = 0; r < in.cfg.W; ++r) {
    const RankOutput& o = d[r];
    outs[r].assign(static_cast<size_t>(o.recvRows * in.cfg.H) * elemSize(outType), 0);
    for (int64_t row = 0; row < o.recvRows; ++row) {
      const float f = identity ? 1.0f : expertFactor(r, o.rows[row].local);
      for (int64_t h = 0; h < in.cfg.H; ++h)
        store(outType, outs[r].data(), row * in.cfg.H + h, rowValue(in, o, row, h) * f);
    }
  }
  return outs;
}

struct CombineInputs {
  vigilDataType_t xType = vigilFloat32;
  std::vector<std::vector<uint8_t>> expertOut;  // per rank, [recvRows,H] in xType
  std::vector<std::vector<float>> scales;       // per rank, [bs,K]; empty = NULL
  std::vector<std::vector<uint8_t>> sharedX;    // per rank, [bs,H] in xType; empty = NULL
};

// Combine's output on every rank: [bs,H] in c.xType.
inline std::vector<std::vector<uint8_t>> combine(const Inputs& in, const std::vector<RankOutput>& d,
                                                 const CombineInputs& c) {
  const Config& cfg = in.cfg;
  const int64_t slots = cfg.K + cfg.Sh, H = cfg.H;
  std::vector<std::vector<uint8_t>> outs(cfg.W);
  for (int64_t r = 0; r < cfg.W; ++r) {
    const RankInput& ri = in.ranks[r];
    outs[r].assign(static_cast<size_t>(ri.bs * H) * elemSize(c.xType), 0);
    for (int64_t t = 0; t < ri.bs; ++t) {
      const bool any = tokenHasActiveSlot(cfg, ri, t);
      for (int64_t h = 0; h < H; ++h) {
        if (!any) {
          store(c.xType, outs[r].data(), t * H + h, 0.0f);
          continue;
        }
        float acc = 0.0f;
        for (int64_t slot = 0; slot < slots; ++slot) {
          if (!slotActive(cfg, ri, t, slot)) continue;
          const int64_t dst = d[r].destRank[t * slots + slot], row = d[r].destRow[t * slots + slot];
          const float y = load(c.xType, c.expertOut[dst].data(), row * H + h);
          if (slot < cfg.K) {
            const float w = c.scales[r].empty() ? 1.0f : c.scales[r][t * cfg.K + slot];
            acc += w * y;
          } else {
            acc += y;
          }
        }
        if (!c.sharedX[r].empty()) acc += load(c.xType, c.sharedX[r].data(), t * H + h);
        store(c.xType, outs[r].data(), t * H + h, acc);
      }
    }
  }
  return outs;
}

}  // namespace moeref
