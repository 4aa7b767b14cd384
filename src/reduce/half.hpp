#pragma once
// IEEE binary16 and bfloat16 <-> float32 conversions, done with integer bit
// manipulation. Rounding must not depend on the FP environment (rounding mode,
// FTZ/DAZ set by some framework in the same process), because every rank has
// to round a reduced value to the same bits or the ranks' results diverge.
//
// Every candidate result is computed unconditionally and picked with a bit
// mask: with plain `?:` GCC sinks the unused arms into branches, and then
// refuses to if-convert them back (an FP multiply may trap), which keeps the
// reduction loops that call these from vectorising.

#include <bit>
#include <cstdint>

namespace vigil {
namespace half_detail {

// cond ? a : b, without a branch.
inline uint32_t select(bool cond, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(cond);
  return (a & mask) | (b & ~mask);
}

}  // namespace half_detail

inline float halfToFloat(uint16_t h) {
  using half_detail::select;
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7FFFu;  // exponent and mantissa
  // Normal: move the fields into place and rebias the exponent (15 -> 127).
  const uint32_t normal = (em << 13) + 0x38000000u;
  // Inf/NaN: keep the mantissa so the NaN payload (and quiet bit) survives.
  const uint32_t infNan = (em << 13) | 0x7F800000u;
  // Subnormal or zero: em * 2^-24 is exact in float32, which renormalises it
  // without a count-leading-zeros loop.
  const float subValue = static_cast<float>(static_cast<int32_t>(em)) * 0x1p-24f;
  const uint32_t sub = std::bit_cast<uint32_t>(subValue);
  const uint32_t mag = select(em >= 0x7C00u, infNan, select(em >= 0x0400u, normal, sub));
  return std::bit_cast<float>(sign | mag);
}

inline uint16_t floatToHalf(float f) {
  using half_detail::select;
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t x = bits & 0x7FFFFFFFu;

  // NaN: force the quiet bit so a payload that lives only in the low 13 bits
  // does not collapse into Inf.
  const uint32_t nan = 0x7E00u | ((x >> 13) & 0x03FFu);

  // Normal half range: rebias (127 -> 15) and round to nearest even by adding
  // just under half an ulp plus the lowest kept bit; a carry out of the
  // mantissa correctly bumps the exponent, up to 0x7C00 (Inf) from 65520 on.
  const uint32_t odd = (x >> 13) & 1u;
  const uint32_t normal = (x + 0xC8000FFFu + odd) >> 13;

  // Subnormal half range: the value is m * 2^(e-150) with the implicit bit in
  // m, and a half subnormal is h * 2^-24, so h = m >> (126 - e), rounded the
  // same way. Values below 2^-25 (e < 102) round to zero; 2^-25 itself is a
  // tie and goes to even, i.e. zero. A carry gives 0x0400, the smallest normal.
  const uint32_t e = x >> 23;
  const uint32_t m = (x & 0x007FFFFFu) | 0x00800000u;
  const uint32_t eSub = e < 102u ? 102u : (e > 112u ? 112u : e);  // keeps the shift defined
  const uint32_t shift = 126u - eSub;
  const uint32_t belowHalf = (1u << (shift - 1u)) - 1u;
  const uint32_t sub = select(e >= 102u, (m + belowHalf + ((m >> shift) & 1u)) >> shift, 0u);

  // 2^-14 is the smallest normal half; from 65536 up (Inf included) it is Inf.
  const uint32_t finite = select(x >= 0x38800000u, normal, sub);
  const uint32_t mag = select(x > 0x7F800000u, nan, select(x >= 0x47800000u, 0x7C00u, finite));
  return static_cast<uint16_t>(sign | mag);
}

inline float bfloat16ToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t floatToBfloat16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  // Round to nearest even; overflow carries into the exponent and ends at Inf.
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  // NaN: truncate and set the quiet bit, so rounding can never turn it into Inf.
  const uint32_t nan = (x >> 16) | 0x0040u;
  const bool isNan = (x & 0x7FFFFFFFu) > 0x7F800000u;
  return static_cast<uint16_t>(half_detail::select(isNan, nan, rounded));
}

}  // namespace vigil
