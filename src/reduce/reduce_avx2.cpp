// AVX2 + F16C reduction kernels, called by reduce.cpp once the CPU has them.
//
// Every function here carries a target attribute instead of the file being
// built with -mavx2: such a translation unit could also emit AVX2 copies of
// inline functions from shared headers, and the linker may keep those copies
// for callers that run on CPUs without AVX2. FMA is left out of the target on
// purpose: no kernel needs it, and without it the compiler cannot contract a
// multiply and an add into one differently rounded instruction.
//
// Bits must equal those of the portable loops in reduce.cpp for every input,
// so each formula there is mirrored lane by lane:
//  - float sum/prod use `a` for both operands when it is NaN; max/min pick
//    `a` when it is NaN, else `b` when it is NaN, else by integer order keys;
//  - float16 goes through F16C: vcvtph2ps is exact (it quiets a signalling
//    NaN, which the narrowing would do anyway), and vcvtps2ph with an
//    immediate round-to-nearest-even gives floatToHalf's bits for all 2^32
//    inputs (NaN: quiet bit set, top payload bits kept), whatever MXCSR holds;
//  - bfloat16 uses the integer rounding of floatToBfloat16 on 32-bit lanes.
// Tails shorter than a block go through the same vector code on zero-padded
// copies, so no element is computed by a different formula.

#include "reduce/kernels.hpp"

#if VIGIL_REDUCE_HAVE_AVX2

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#define VIGIL_AVX2 __attribute__((target("avx2,f16c")))

namespace vigil::reduce::avx2 {
namespace {

// ---- Lane arithmetic ---------------------------------------------------------

VIGIL_AVX2 inline void loadVec(__m256& v, const void* p) {
  v = _mm256_loadu_ps(static_cast<const float*>(p));
}
VIGIL_AVX2 inline void loadVec(__m256d& v, const void* p) {
  v = _mm256_loadu_pd(static_cast<const double*>(p));
}
VIGIL_AVX2 inline void loadVec(__m256i& v, const void* p) {
  v = _mm256_loadu_si256(static_cast<const __m256i*>(p));
}
VIGIL_AVX2 inline void storeVec(void* p, __m256 v) {
  _mm256_storeu_ps(static_cast<float*>(p), v);
}
VIGIL_AVX2 inline void storeVec(void* p, __m256d v) {
  _mm256_storeu_pd(static_cast<double*>(p), v);
}
VIGIL_AVX2 inline void storeVec(void* p, __m256i v) {
  _mm256_storeu_si256(static_cast<__m256i*>(p), v);
}

template <typename E>
struct Arith;

// Float max/min compare orderKey()s as in reduce.cpp: maxps/minps or a float
// compare would see denormals as zero under DAZ.
template <>
struct Arith<float> {
  using V = __m256;
  template <vigilRedOp_t kOp>
  VIGIL_AVX2 static V apply(V a, V b) {
    const V aNan = _mm256_cmp_ps(a, a, _CMP_UNORD_Q);
    if constexpr (kOp == vigilProd) return _mm256_mul_ps(a, _mm256_blendv_ps(b, a, aNan));
    if constexpr (kOp == vigilMax || kOp == vigilMin) {
      const __m256i ka = orderKey(a), kb = orderKey(b);
      const __m256i wins = kOp == vigilMax ? _mm256_cmpgt_epi32(ka, kb) : _mm256_cmpgt_epi32(kb, ka);
      const V bNan = _mm256_cmp_ps(b, b, _CMP_UNORD_Q);
      return _mm256_blendv_ps(b, a, _mm256_or_ps(aNan, _mm256_andnot_ps(bNan, _mm256_castsi256_ps(wins))));
    }
    return _mm256_add_ps(a, _mm256_blendv_ps(b, a, aNan));  // sum, avg
  }
  VIGIL_AVX2 static __m256i orderKey(V v) {
    const __m256i bits = _mm256_castps_si256(v);
    const __m256i negative = _mm256_srai_epi32(bits, 31);
    const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi32(0x7FFFFFFF));
    return _mm256_sub_epi32(_mm256_xor_si256(magnitude, negative), negative);
  }
  VIGIL_AVX2 static V divide(V a, int divisor) { return _mm256_div_ps(a, _mm256_set1_ps(static_cast<float>(divisor))); }
};

template <>
struct Arith<double> {
  using V = __m256d;
  template <vigilRedOp_t kOp>
  VIGIL_AVX2 static V apply(V a, V b) {
    const V aNan = _mm256_cmp_pd(a, a, _CMP_UNORD_Q);
    if constexpr (kOp == vigilProd) return _mm256_mul_pd(a, _mm256_blendv_pd(b, a, aNan));
    if constexpr (kOp == vigilMax || kOp == vigilMin) {
      const __m256i ka = orderKey(a), kb = orderKey(b);
      const __m256i wins = kOp == vigilMax ? _mm256_cmpgt_epi64(ka, kb) : _mm256_cmpgt_epi64(kb, ka);
      const V bNan = _mm256_cmp_pd(b, b, _CMP_UNORD_Q);
      return _mm256_blendv_pd(b, a, _mm256_or_pd(aNan, _mm256_andnot_pd(bNan, _mm256_castsi256_pd(wins))));
    }
    return _mm256_add_pd(a, _mm256_blendv_pd(b, a, aNan));
  }
  VIGIL_AVX2 static __m256i orderKey(V v) {
    const __m256i bits = _mm256_castpd_si256(v);
    const __m256i negative = _mm256_cmpgt_epi64(_mm256_setzero_si256(), bits);  // no 64-bit arithmetic shift
    const __m256i magnitude = _mm256_and_si256(bits, _mm256_set1_epi64x(INT64_MAX));
    return _mm256_sub_epi64(_mm256_xor_si256(magnitude, negative), negative);
  }
  VIGIL_AVX2 static V divide(V a, int divisor) {
    return _mm256_div_pd(a, _mm256_set1_pd(static_cast<double>(divisor)));
  }
};

// Integers wrap in every lane; only the widths AVX2 lacks an instruction for
// need work: 8-bit products (two 16-bit multiplies, each keeping the low byte
// of its lane) and 64-bit products (schoolbook on 32-bit halves, dropping the
// high*high term that only affects bits >= 64) and compares.
template <typename E>
requires std::is_integral_v<E>
struct Arith<E> {
  using V = __m256i;
  static constexpr bool kSigned = std::is_signed_v<E>;

  template <vigilRedOp_t kOp>
  VIGIL_AVX2 static V apply(V a, V b) {
    if constexpr (kOp == vigilProd) return mul(a, b);
    if constexpr (kOp == vigilMax) return max(a, b);
    if constexpr (kOp == vigilMin) return min(a, b);
    return add(a, b);
  }

  VIGIL_AVX2 static V add(V a, V b) {
    if constexpr (sizeof(E) == 1) return _mm256_add_epi8(a, b);
    if constexpr (sizeof(E) == 4) return _mm256_add_epi32(a, b);
    return _mm256_add_epi64(a, b);
  }

  VIGIL_AVX2 static V mul(V a, V b) {
    if constexpr (sizeof(E) == 1) {
      const V even = _mm256_mullo_epi16(a, b);
      const V odd = _mm256_mullo_epi16(_mm256_srli_epi16(a, 8), _mm256_srli_epi16(b, 8));
      return _mm256_or_si256(_mm256_and_si256(even, _mm256_set1_epi16(0x00FF)), _mm256_slli_epi16(odd, 8));
    }
    if constexpr (sizeof(E) == 4) return _mm256_mullo_epi32(a, b);
    const V low = _mm256_mul_epu32(a, b);
    const V cross =
        _mm256_add_epi64(_mm256_mul_epu32(_mm256_srli_epi64(a, 32), b), _mm256_mul_epu32(a, _mm256_srli_epi64(b, 32)));
    return _mm256_add_epi64(low, _mm256_slli_epi64(cross, 32));
  }

  // 64-bit lanes have only a signed compare, so unsigned ones are biased into
  // signed order first.
  VIGIL_AVX2 static V greater64(V a, V b) {
    if constexpr (kSigned) return _mm256_cmpgt_epi64(a, b);
    const V bias = _mm256_set1_epi64x(INT64_MIN);
    return _mm256_cmpgt_epi64(_mm256_xor_si256(a, bias), _mm256_xor_si256(b, bias));
  }

  VIGIL_AVX2 static V max(V a, V b) {
    if constexpr (sizeof(E) == 1) return kSigned ? _mm256_max_epi8(a, b) : _mm256_max_epu8(a, b);
    if constexpr (sizeof(E) == 4) return kSigned ? _mm256_max_epi32(a, b) : _mm256_max_epu32(a, b);
    return _mm256_blendv_epi8(b, a, greater64(a, b));
  }

  VIGIL_AVX2 static V min(V a, V b) {
    if constexpr (sizeof(E) == 1) return kSigned ? _mm256_min_epi8(a, b) : _mm256_min_epu8(a, b);
    if constexpr (sizeof(E) == 4) return kSigned ? _mm256_min_epi32(a, b) : _mm256_min_epu32(a, b);
    return _mm256_blendv_epi8(a, b, greater64(a, b));
  }
};

// ---- Codecs: a block of storage elements <-> two vectors of lanes -------------

// Two vectors per block unrolls the native loops once, which keeps two loads
// in flight per operand; half types fill two float32 vectors from 16 elements.
// (Each codec declares its own Block: a vector type passed as a template
// argument loses its attributes.)

template <typename T>
struct NativeCodec {
  using Storage = T;
  using Lane = T;
  using V = typename Arith<T>::V;
  static constexpr size_t kPerVec = 32 / sizeof(T);
  static constexpr size_t kWidth = 2 * kPerVec;
  struct Block {
    V lo, hi;
  };
  VIGIL_AVX2 static Block load(const T* p) {
    Block b;
    loadVec(b.lo, p);
    loadVec(b.hi, p + kPerVec);
    return b;
  }
  VIGIL_AVX2 static void store(T* p, Block b) {
    storeVec(p, b.lo);
    storeVec(p + kPerVec, b.hi);
  }
};

struct Float16Codec {
  using Storage = uint16_t;
  using Lane = float;
  using V = __m256;
  static constexpr size_t kWidth = 16;
  struct Block {
    V lo, hi;
  };
  VIGIL_AVX2 static Block load(const uint16_t* p) {
    return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))),
            _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 8)))};
  }
  VIGIL_AVX2 static void store(uint16_t* p, Block b) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph(b.lo, _MM_FROUND_TO_NEAREST_INT));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p + 8), _mm256_cvtps_ph(b.hi, _MM_FROUND_TO_NEAREST_INT));
  }
};

// bfloat16 is the top half of a float32. Interleaving with zeros widens 16
// elements into two float vectors in a lane order (0-3, 8-11 | 4-7, 12-15)
// that packus undoes exactly, so no cross-lane permute is needed.
struct Bfloat16Codec {
  using Storage = uint16_t;
  using Lane = float;
  using V = __m256;
  static constexpr size_t kWidth = 16;
  struct Block {
    V lo, hi;
  };
  VIGIL_AVX2 static Block load(const uint16_t* p) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const __m256i zero = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, raw)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, raw))};
  }
  // floatToBfloat16 on each lane; the result fits in 16 bits, so packus's
  // unsigned saturation never triggers.
  VIGIL_AVX2 static __m256i narrow(__m256 f) {
    const __m256i x = _mm256_castps_si256(f);
    const __m256i high = _mm256_srli_epi32(x, 16);
    const __m256i lsb = _mm256_and_si256(high, _mm256_set1_epi32(1));
    const __m256i rounded =
        _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7FFF)), lsb), 16);
    const __m256i nan = _mm256_or_si256(high, _mm256_set1_epi32(0x0040));
    // An unordered compare is the one-instruction NaN test; DAZ does not touch NaNs.
    const __m256i isNan = _mm256_castps_si256(_mm256_cmp_ps(f, f, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded, nan, isNan);
  }
  VIGIL_AVX2 static void store(uint16_t* p, Block b) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm256_packus_epi32(narrow(b.lo), narrow(b.hi)));
  }
};

// ---- Loops ---------------------------------------------------------------------

template <typename Codec, vigilRedOp_t kOp>
VIGIL_AVX2 inline void combineBlock(typename Codec::Storage* d, const typename Codec::Storage* a,
                                    const typename Codec::Storage* b) {
  using A = Arith<typename Codec::Lane>;
  auto x = Codec::load(a);
  const auto y = Codec::load(b);
  x.lo = A::template apply<kOp>(x.lo, y.lo);
  x.hi = A::template apply<kOp>(x.hi, y.hi);
  Codec::store(d, x);
}

// d may equal a: each block is loaded whole before it is stored.
template <typename Codec, vigilRedOp_t kOp>
VIGIL_AVX2 void reduceLoop(void* dst, const void* a, const void* b, size_t count) {
  using S = typename Codec::Storage;
  constexpr size_t kWidth = Codec::kWidth;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  size_t i = 0;
  for (; i + kWidth <= count; i += kWidth) combineBlock<Codec, kOp>(d + i, x + i, y + i);
  if (i == count) return;
  S tx[kWidth] = {}, ty[kWidth] = {};
  const size_t bytes = (count - i) * sizeof(S);
  std::memcpy(tx, x + i, bytes);
  std::memcpy(ty, y + i, bytes);
  combineBlock<Codec, kOp>(tx, tx, ty);
  std::memcpy(d + i, tx, bytes);
}

template <typename Codec>
VIGIL_AVX2 bool reduceTyped(void* dst, const void* a, const void* b, size_t count, vigilRedOp_t op) {
  switch (op) {
    case vigilSum:
    case vigilAvg: reduceLoop<Codec, vigilSum>(dst, a, b, count); return true;
    case vigilProd: reduceLoop<Codec, vigilProd>(dst, a, b, count); return true;
    case vigilMax: reduceLoop<Codec, vigilMax>(dst, a, b, count); return true;
    case vigilMin: reduceLoop<Codec, vigilMin>(dst, a, b, count); return true;
    default: return false;  // the bitwise and logical ones: the portable loops
  }
}

template <typename Codec>
VIGIL_AVX2 inline void divideBlock(typename Codec::Storage* p, int divisor) {
  using A = Arith<typename Codec::Lane>;
  auto x = Codec::load(p);
  x.lo = A::divide(x.lo, divisor);
  x.hi = A::divide(x.hi, divisor);
  Codec::store(p, x);
}

template <typename Codec>
VIGIL_AVX2 void divideLoop(void* buf, size_t count, int divisor) {
  using S = typename Codec::Storage;
  constexpr size_t kWidth = Codec::kWidth;
  auto* p = static_cast<S*>(buf);
  size_t i = 0;
  for (; i + kWidth <= count; i += kWidth) divideBlock<Codec>(p + i, divisor);
  if (i == count) return;
  S t[kWidth] = {};  // zero padding divides without raising any FP exception flag
  const size_t bytes = (count - i) * sizeof(S);
  std::memcpy(t, p + i, bytes);
  divideBlock<Codec>(t, divisor);
  std::memcpy(p + i, t, bytes);
}

// NaN and +-Inf are exactly the patterns with an all-ones exponent, so the
// test is an integer compare in every width (and indifferent to DAZ). Four
// vectors are OR-ed per test to keep the branch off the critical path; a
// block that hits is rescanned element by element for the exact index.
template <typename Bits>
VIGIL_AVX2 inline __m256i broadcast(Bits v) {
  if constexpr (sizeof(Bits) == 2) return _mm256_set1_epi16(static_cast<int16_t>(v));
  if constexpr (sizeof(Bits) == 4) return _mm256_set1_epi32(static_cast<int32_t>(v));
  return _mm256_set1_epi64x(static_cast<int64_t>(v));
}

template <typename Bits>
VIGIL_AVX2 inline __m256i exponentAllOnes(const void* p, __m256i expMask) {
  __m256i v;
  loadVec(v, p);
  v = _mm256_and_si256(v, expMask);
  if constexpr (sizeof(Bits) == 2) return _mm256_cmpeq_epi16(v, expMask);
  if constexpr (sizeof(Bits) == 4) return _mm256_cmpeq_epi32(v, expMask);
  return _mm256_cmpeq_epi64(v, expMask);
}

template <typename Bits, Bits kExpMask>
VIGIL_AVX2 size_t findExponentAllOnes(const void* buf, size_t count) {
  constexpr size_t kPerVec = 32 / sizeof(Bits);
  constexpr size_t kBlock = 4 * kPerVec;
  const auto* p = static_cast<const unsigned char*>(buf);
  const __m256i mask = broadcast<Bits>(kExpMask);
  size_t i = 0;
  for (; i + kBlock <= count; i += kBlock) {
    const unsigned char* at = p + i * sizeof(Bits);
    const __m256i hit =
        _mm256_or_si256(_mm256_or_si256(exponentAllOnes<Bits>(at, mask), exponentAllOnes<Bits>(at + 32, mask)),
                        _mm256_or_si256(exponentAllOnes<Bits>(at + 64, mask), exponentAllOnes<Bits>(at + 96, mask)));
    if (!_mm256_testz_si256(hit, hit)) break;  // the loop below finds it within this block
  }
  for (; i < count; ++i) {
    Bits v;
    std::memcpy(&v, p + i * sizeof(Bits), sizeof v);
    if ((v & kExpMask) == kExpMask) return i;
  }
  return SIZE_MAX;
}

}  // namespace

VIGIL_AVX2 bool reduceInto(void* dst, const void* a, const void* b, size_t count, vigilDataType_t dtype,
                           vigilRedOp_t op) {
  switch (dtype) {
    case vigilInt8: return reduceTyped<NativeCodec<int8_t>>(dst, a, b, count, op);
    case vigilUint8: return reduceTyped<NativeCodec<uint8_t>>(dst, a, b, count, op);
    case vigilInt32: return reduceTyped<NativeCodec<int32_t>>(dst, a, b, count, op);
    case vigilUint32: return reduceTyped<NativeCodec<uint32_t>>(dst, a, b, count, op);
    case vigilInt64: return reduceTyped<NativeCodec<int64_t>>(dst, a, b, count, op);
    case vigilUint64: return reduceTyped<NativeCodec<uint64_t>>(dst, a, b, count, op);
    case vigilFloat16: return reduceTyped<Float16Codec>(dst, a, b, count, op);
    case vigilFloat32: return reduceTyped<NativeCodec<float>>(dst, a, b, count, op);
    case vigilFloat64: return reduceTyped<NativeCodec<double>>(dst, a, b, count, op);
    case vigilBfloat16: return reduceTyped<Bfloat16Codec>(dst, a, b, count, op);
    default: return false;  // the pairs
  }
}

// Integer division has no AVX2 instruction and averaging integers is rare, so
// those stay with the portable loops.
VIGIL_AVX2 bool divideInPlace(void* buf, size_t count, vigilDataType_t dtype, int divisor) {
  switch (dtype) {
    case vigilFloat16: divideLoop<Float16Codec>(buf, count, divisor); return true;
    case vigilFloat32: divideLoop<NativeCodec<float>>(buf, count, divisor); return true;
    case vigilFloat64: divideLoop<NativeCodec<double>>(buf, count, divisor); return true;
    case vigilBfloat16: divideLoop<Bfloat16Codec>(buf, count, divisor); return true;
    default: return false;
  }
}

VIGIL_AVX2 bool findNonFinite(const void* buf, size_t count, vigilDataType_t dtype, size_t* index) {
  switch (dtype) {
    case vigilFloat16: *index = findExponentAllOnes<uint16_t, 0x7C00u>(buf, count); return true;
    case vigilBfloat16: *index = findExponentAllOnes<uint16_t, 0x7F80u>(buf, count); return true;
    case vigilFloat32: *index = findExponentAllOnes<uint32_t, 0x7F800000u>(buf, count); return true;
    case vigilFloat64: *index = findExponentAllOnes<uint64_t, 0x7FF0000000000000u>(buf, count); return true;
    default: return false;
  }
}

namespace {

// Eight elements of x widened to float32 lanes (exactly).
template <vigilDataType_t T>
VIGIL_AVX2 inline void widen(__m256& v, const uint8_t* at) {
  if constexpr (T == vigilFloat32) {
    v = _mm256_loadu_ps(reinterpret_cast<const float*>(at));
  } else {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(at));
    if constexpr (T == vigilFloat16) {
      v = _mm256_cvtph_ps(h);
    } else {
      v = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
  }
}

template <vigilDataType_t T>
VIGIL_AVX2 void accumulate(float* acc, float w, const uint8_t* x, size_t count) {
  constexpr size_t kElem = T == vigilFloat32 ? 4 : 2;
  const __m256 wv = _mm256_set1_ps(w);
  __m256 v;
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    widen<T>(v, x + i * kElem);
    _mm256_storeu_ps(acc + i, _mm256_add_ps(_mm256_loadu_ps(acc + i), _mm256_mul_ps(wv, v)));
  }
  if (i == count) return;
  // The tail through the same lanes, on zero-padded copies.
  alignas(32) uint8_t tail[32] = {};
  alignas(32) float sum[8] = {};
  std::memcpy(tail, x + i * kElem, (count - i) * kElem);
  std::memcpy(sum, acc + i, (count - i) * sizeof(float));
  widen<T>(v, tail);
  _mm256_store_ps(sum, _mm256_add_ps(_mm256_load_ps(sum), _mm256_mul_ps(wv, v)));
  std::memcpy(acc + i, sum, (count - i) * sizeof(float));
}

}  // namespace

VIGIL_AVX2 bool weightedAccumulate(float* acc, float w, const void* x, size_t count, vigilDataType_t xType) {
  const auto* p = static_cast<const uint8_t*>(x);
  switch (xType) {
    case vigilFloat32: accumulate<vigilFloat32>(acc, w, p, count); return true;
    case vigilFloat16: accumulate<vigilFloat16>(acc, w, p, count); return true;
    case vigilBfloat16: accumulate<vigilBfloat16>(acc, w, p, count); return true;
    default: return false;
  }
}

}  // namespace vigil::reduce::avx2

#endif  // VIGIL_REDUCE_HAVE_AVX2
