#include "reduce/reduce.hpp"

#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "reduce/float_order.hpp"
#include "reduce/half.hpp"
#include "reduce/kernels.hpp"

#if VIGIL_REDUCE_HAVE_AVX2
#include <cpuid.h>
#endif

// Shape of this file: the (dtype, op) switch runs once per call and selects a
// template instance whose inner loop is a plain indexed `for` over __restrict
// pointers with no calls or branches the compiler cannot inline or if-convert,
// so GCC/Clang vectorise it at -O2/-O3. (With baseline x86-64/SSE2, float16
// and 64-bit integer prod/max/min stay scalar for lack of variable shifts and
// 64-bit multiplies/compares; with -mavx2 every loop vectorises.) A "codec"
// describes how a dtype is stored and which type the arithmetic happens in; an
// op is a stateless functor.
//
// These loops are the reference for the AVX2 kernels in reduce_avx2.cpp, which
// must return the same bits for every input; a change to a formula here needs
// the same change there (test_reduce compares the two on any CPU with AVX2).

namespace vigil::reduce {
namespace {

// ---- Codecs ---------------------------------------------------------------

template <typename T>
struct Native {
  using Storage = T;
  using Value = T;
  static Value load(Storage s) { return s; }
  static Storage store(Value v) { return v; }
};

struct Float16 {
  using Storage = uint16_t;
  using Value = float;
  static Value load(Storage s) { return halfToFloat(s); }
  static Storage store(Value v) { return floatToHalf(v); }
};

struct Bfloat16 {
  using Storage = uint16_t;
  using Value = float;
  static Value load(Storage s) { return bfloat16ToFloat(s); }
  static Storage store(Value v) { return floatToBfloat16(v); }
};

// ---- Ops ------------------------------------------------------------------

// Unsigned arithmetic wraps by definition, signed overflow is UB. Types
// narrower than unsigned int are widened to it first, because integer
// promotion would otherwise turn e.g. uint16 * uint16 into a signed int
// multiply that can overflow. Converting the result back to a signed type is
// modular since C++20.
template <typename T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

// With two NaN operands x86 returns the first source's payload, and the
// compiler may swap the operands of a commutative op (and does, to fold a
// load), so `a + b` alone leaves the payload to code generation. Using `a` for
// both operands when it is NaN pins the result to `a` quieted; a single NaN
// operand is propagated quieted by the hardware anyway.
template <typename T>
T nanFirst(T a, T b) {
  return a != a ? a : b;
}

struct SumOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return a + nanFirst(a, b);
    }
  }
};

struct ProdOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    } else {
      return a * nanFirst(a, b);
    }
  }
};

// Bitwise and logical reductions: integer types only (validation refuses
// them on floating types before any reduction runs).
template <typename Bitwise>
struct IntegerOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return Bitwise::apply(a, b);
    } else {
      return a;  // never instantiated by a validated call
    }
  }
};
struct BandBits {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(a & b);
  }
};
struct BorBits {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(a | b);
  }
};
struct BxorBits {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(a ^ b);
  }
};
struct LandBits {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(a != 0 && b != 0);
  }
};
struct LorBits {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>(a != 0 || b != 0);
  }
};
struct LxorBits {
  template <typename T>
  static T apply(T a, T b) {
    return static_cast<T>((a != 0) != (b != 0));
  }
};
using BandOp = IntegerOp<BandBits>;
using BorOp = IntegerOp<BorBits>;
using BxorOp = IntegerOp<BxorBits>;
using LandOp = IntegerOp<LandBits>;
using LorOp = IntegerOp<LorBits>;
using LxorOp = IntegerOp<LxorBits>;

// std::max/std::min would silently drop a NaN in one argument position and
// keep it in the other, so a NaN on one rank could vanish depending on the
// ring order; here a NaN `a` wins, then a NaN `b`, then the greater (lesser)
// value, and `b` on ties (+0 and -0 included).
//
// The values are compared as integers (orderKey) and the result is picked on
// the bit patterns, because a float compare and `?:` depend on the compiler
// and the FP environment: under DAZ a float compare sees denormals as zero,
// and Clang lowers the `?:` to maxps/minps, which then return such an
// operand flushed to zero. The AVX2 kernel does the same integer compare, so
// both return the same bits with any compiler and any MXCSR (orderKey: float_order.hpp).

template <typename T>
T selectBits(bool cond, T a, T b) {
  const Bits<T> mask = Bits<T>{0} - static_cast<Bits<T>>(cond);
  return std::bit_cast<T>((std::bit_cast<Bits<T>>(a) & mask) | (std::bit_cast<Bits<T>>(b) & ~mask));
}

struct MaxOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return selectBits(a != a || (b == b && orderKey(a) > orderKey(b)), a, b);
    } else {
      return a > b ? a : b;
    }
  }
};

struct MinOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return selectBits(a != a || (b == b && orderKey(a) < orderKey(b)), a, b);
    } else {
      return a < b ? a : b;
    }
  }
};

// ---- Loops ----------------------------------------------------------------

// GCC's -O2 cost model ("very cheap") only vectorises loops that need no
// scalar epilogue, so the bulk runs in fixed-size chunks and the remainder in
// a scalar tail; at -O3 the chunk loop vectorises all the same.
constexpr size_t kChunk = 64;

// In place (kInPlace), the first operand is read through `d` and `a` is never
// dereferenced: __restrict only forbids aliasing between pointers that are
// used, and without it the out-of-place loop would need a runtime overlap
// check that d == a fails, sending it to the scalar version.
template <typename Codec, typename Op, bool kInPlace>
void reduceLoop(typename Codec::Storage* __restrict d, const typename Codec::Storage* __restrict a,
                const typename Codec::Storage* __restrict b, size_t count) {
  const auto step = [](auto x, auto y) { return Codec::store(Op::apply(Codec::load(x), Codec::load(y))); };
  const auto* first = kInPlace ? d : a;
  size_t i = 0;
  for (; i + kChunk <= count; i += kChunk) {
    for (size_t j = 0; j < kChunk; ++j) d[i + j] = step(first[i + j], b[i + j]);
  }
  for (; i < count; ++i) d[i] = step(first[i], b[i]);
}

template <typename Codec, bool kInPlace>
void reduceTyped(void* dst, const void* a, const void* b, size_t count, vigilRedOp_t op) {
  using S = typename Codec::Storage;
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(a);
  const auto* y = static_cast<const S*>(b);
  switch (op) {
    case vigilSum:
    case vigilAvg: return reduceLoop<Codec, SumOp, kInPlace>(d, x, y, count);
    case vigilProd: return reduceLoop<Codec, ProdOp, kInPlace>(d, x, y, count);
    case vigilMax: return reduceLoop<Codec, MaxOp, kInPlace>(d, x, y, count);
    case vigilMin: return reduceLoop<Codec, MinOp, kInPlace>(d, x, y, count);
    case vigilBand:
    case vigilBor:
    case vigilBxor:
    case vigilLand:
    case vigilLor:
    case vigilLxor:
      if constexpr (std::is_integral_v<typename Codec::Value>) {
        switch (op) {
          case vigilBand: return reduceLoop<Codec, BandOp, kInPlace>(d, x, y, count);
          case vigilBor: return reduceLoop<Codec, BorOp, kInPlace>(d, x, y, count);
          case vigilBxor: return reduceLoop<Codec, BxorOp, kInPlace>(d, x, y, count);
          case vigilLand: return reduceLoop<Codec, LandOp, kInPlace>(d, x, y, count);
          case vigilLor: return reduceLoop<Codec, LorOp, kInPlace>(d, x, y, count);
          default: return reduceLoop<Codec, LxorOp, kInPlace>(d, x, y, count);
        }
      }
      return;
    default: return;  // minloc/maxloc: pairs only
  }
}

template <bool kInPlace>
void reduceScalar(void* dst, const void* a, const void* b, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  switch (dtype) {
    case vigilInt8: return reduceTyped<Native<int8_t>, kInPlace>(dst, a, b, count, op);
    case vigilUint8: return reduceTyped<Native<uint8_t>, kInPlace>(dst, a, b, count, op);
    case vigilInt32: return reduceTyped<Native<int32_t>, kInPlace>(dst, a, b, count, op);
    case vigilUint32: return reduceTyped<Native<uint32_t>, kInPlace>(dst, a, b, count, op);
    case vigilInt64: return reduceTyped<Native<int64_t>, kInPlace>(dst, a, b, count, op);
    case vigilUint64: return reduceTyped<Native<uint64_t>, kInPlace>(dst, a, b, count, op);
    case vigilFloat16: return reduceTyped<Float16, kInPlace>(dst, a, b, count, op);
    case vigilFloat32: return reduceTyped<Native<float>, kInPlace>(dst, a, b, count, op);
    case vigilFloat64: return reduceTyped<Native<double>, kInPlace>(dst, a, b, count, op);
    case vigilBfloat16: return reduceTyped<Bfloat16, kInPlace>(dst, a, b, count, op);
    default: return;  // the pairs: locReduceInto
  }
}

template <typename Codec>
void divideTyped(void* buf, size_t count, int divisor) {
  using S = typename Codec::Storage;
  using V = typename Codec::Value;
  // Integers divide in 64 bits: the divisor (a rank count) may not fit in T,
  // e.g. 300 ranks averaging int8.
  using W =
      std::conditional_t<std::is_floating_point_v<V>, V, std::conditional_t<std::is_signed_v<V>, int64_t, uint64_t>>;
  const W d = static_cast<W>(divisor);
  const auto step = [d](S v) { return Codec::store(static_cast<V>(static_cast<W>(Codec::load(v)) / d)); };
  S* p = static_cast<S*>(buf);
  size_t i = 0;
  for (; i + kChunk <= count; i += kChunk) {
    for (size_t j = 0; j < kChunk; ++j) p[i + j] = step(p[i + j]);
  }
  for (; i < count; ++i) p[i] = step(p[i]);
}

// The NaN check scans whole buffers on every collective when enabled, so the
// common all-finite case must vectorise: each chunk is OR-reduced without an
// early exit, and only a chunk that hit is rescanned for the exact index.
template <typename Storage, typename IsBad>
size_t findIf(const void* buf, size_t count, IsBad isBad) {
  const Storage* p = static_cast<const Storage*>(buf);
  for (size_t base = 0; base < count; base += kChunk) {
    unsigned any = 1;  // a short tail goes straight to the exact scan
    if (base + kChunk <= count) {
      any = 0;  // an unsigned, not a bool: GCC does not vectorise bool OR-reductions
      for (size_t j = 0; j < kChunk; ++j) any |= isBad(p[base + j]) ? 1u : 0u;
    }
    if (!any) continue;
    const size_t end = base + kChunk <= count ? base + kChunk : count;
    for (size_t i = base; i < end; ++i) {
      if (isBad(p[i])) return i;
    }
  }
  return SIZE_MAX;
}

template <typename T>
bool nonFiniteValue(T v) {
  // False only for finite values; NaN fails every comparison.
  return !(std::fabs(v) <= std::numeric_limits<T>::max());
}

// ---- Kernel choice ----------------------------------------------------------

KernelIsa detectKernelIsa() {
#if VIGIL_REDUCE_HAVE_AVX2
  // __builtin_cpu_supports("avx2") also checks that the OS saves ymm state
  // (XGETBV). F16C is read from CPUID directly because not every compiler
  // accepts "f16c" there; it is present on every AVX2 CPU shipped so far.
  __builtin_cpu_init();
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  if (__builtin_cpu_supports("avx2") && f16c) return KernelIsa::kAvx2;
#endif
  return KernelIsa::kScalar;
}

std::atomic<KernelIsa>& activeSlot() {
  static std::atomic<KernelIsa> slot{supportedKernelIsa()};
  return slot;
}

#if VIGIL_REDUCE_HAVE_AVX2
bool useAvx2() {
  return activeSlot().load(std::memory_order_relaxed) == KernelIsa::kAvx2;
}
#endif

}  // namespace

KernelIsa supportedKernelIsa() {
  static const KernelIsa isa = detectKernelIsa();
  return isa;
}

KernelIsa activeKernelIsa() {
  return activeSlot().load(std::memory_order_relaxed);
}

KernelIsa setKernelIsaForTesting(KernelIsa isa) {
  if (supportedKernelIsa() == KernelIsa::kScalar) isa = KernelIsa::kScalar;
  return activeSlot().exchange(isa, std::memory_order_relaxed);
}

// ---- Entry points ---------------------------------------------------------

void reduceInPlace(void* dst, const void* src, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  reduceInto(dst, dst, src, count, dtype, op);
}

void reduceInto(void* dst, const void* a, const void* b, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  if (locReduceInto(dst, a, b, count, dtype, op)) return;
#if VIGIL_REDUCE_HAVE_AVX2
  if (useAvx2() && avx2::reduceInto(dst, a, b, count, dtype, op)) return;
#endif
  if (dst == a) {
    reduceScalar<true>(dst, a, b, count, dtype, op);
  } else {
    reduceScalar<false>(dst, a, b, count, dtype, op);
  }
}

namespace {

template <typename Codec>
void fillIdentityTyped(void* buf, size_t count, vigilRedOp_t op) {
  using S = typename Codec::Storage;
  using V = typename Codec::Value;
  V v{};
  switch (op) {
    case vigilProd:
    case vigilLand: v = V(1); break;
    case vigilMax:
      v = std::numeric_limits<V>::has_infinity ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::lowest();
      break;
    case vigilMin:
      v = std::numeric_limits<V>::has_infinity ? std::numeric_limits<V>::infinity() : std::numeric_limits<V>::max();
      break;
    case vigilBand:
      if constexpr (std::is_integral_v<V>) v = static_cast<V>(~std::make_unsigned_t<V>{0});
      break;
    default: break;  // sum, avg, bor, bxor, lor, lxor: 0
  }
  const S stored = Codec::store(v);
  S* p = static_cast<S*>(buf);
  for (size_t i = 0; i < count; ++i) p[i] = stored;
}

}  // namespace

void fillIdentity(void* buf, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  if (locFillIdentity(buf, count, dtype, op)) return;
  switch (dtype) {
    case vigilInt8: return fillIdentityTyped<Native<int8_t>>(buf, count, op);
    case vigilUint8: return fillIdentityTyped<Native<uint8_t>>(buf, count, op);
    case vigilInt32: return fillIdentityTyped<Native<int32_t>>(buf, count, op);
    case vigilUint32: return fillIdentityTyped<Native<uint32_t>>(buf, count, op);
    case vigilInt64: return fillIdentityTyped<Native<int64_t>>(buf, count, op);
    case vigilUint64: return fillIdentityTyped<Native<uint64_t>>(buf, count, op);
    case vigilFloat16: return fillIdentityTyped<Float16>(buf, count, op);
    case vigilFloat32: return fillIdentityTyped<Native<float>>(buf, count, op);
    case vigilFloat64: return fillIdentityTyped<Native<double>>(buf, count, op);
    case vigilBfloat16: return fillIdentityTyped<Bfloat16>(buf, count, op);
    default: return;
  }
}

namespace {

template <typename Codec>
void scaleTyped(void* dst, const void* src, size_t count, const void* scalar) {
  using S = typename Codec::Storage;
  S stored;
  std::memcpy(&stored, scalar, sizeof stored);
  const typename Codec::Value w = Codec::load(stored);
  auto* d = static_cast<S*>(dst);
  const auto* x = static_cast<const S*>(src);
  for (size_t i = 0; i < count; ++i) d[i] = Codec::store(ProdOp::apply(w, Codec::load(x[i])));
}

}  // namespace

void scaleInto(void* dst, const void* src, size_t count, vigilDataType_t dtype, const void* scalar) {
  switch (dtype) {
    case vigilInt8: return scaleTyped<Native<int8_t>>(dst, src, count, scalar);
    case vigilUint8: return scaleTyped<Native<uint8_t>>(dst, src, count, scalar);
    case vigilInt32: return scaleTyped<Native<int32_t>>(dst, src, count, scalar);
    case vigilUint32: return scaleTyped<Native<uint32_t>>(dst, src, count, scalar);
    case vigilInt64: return scaleTyped<Native<int64_t>>(dst, src, count, scalar);
    case vigilUint64: return scaleTyped<Native<uint64_t>>(dst, src, count, scalar);
    case vigilFloat16: return scaleTyped<Float16>(dst, src, count, scalar);
    case vigilFloat32: return scaleTyped<Native<float>>(dst, src, count, scalar);
    case vigilFloat64: return scaleTyped<Native<double>>(dst, src, count, scalar);
    case vigilBfloat16: return scaleTyped<Bfloat16>(dst, src, count, scalar);
    default: return;  // the pairs have no pre-multiplied sum
  }
}

void divideInPlace(void* buf, size_t count, vigilDataType_t dtype, int divisor) {
  if (divisor < 1) return;
#if VIGIL_REDUCE_HAVE_AVX2
  if (useAvx2() && avx2::divideInPlace(buf, count, dtype, divisor)) return;
#endif
  switch (dtype) {
    case vigilInt8: return divideTyped<Native<int8_t>>(buf, count, divisor);
    case vigilUint8: return divideTyped<Native<uint8_t>>(buf, count, divisor);
    case vigilInt32: return divideTyped<Native<int32_t>>(buf, count, divisor);
    case vigilUint32: return divideTyped<Native<uint32_t>>(buf, count, divisor);
    case vigilInt64: return divideTyped<Native<int64_t>>(buf, count, divisor);
    case vigilUint64: return divideTyped<Native<uint64_t>>(buf, count, divisor);
    case vigilFloat16: return divideTyped<Float16>(buf, count, divisor);
    case vigilFloat32: return divideTyped<Native<float>>(buf, count, divisor);
    case vigilFloat64: return divideTyped<Native<double>>(buf, count, divisor);
    case vigilBfloat16: return divideTyped<Bfloat16>(buf, count, divisor);
    default: return;
  }
}

void weightedAccumulate(float* acc, float w, const void* x, size_t count, vigilDataType_t xType) {
#if VIGIL_REDUCE_HAVE_AVX2
  if (useAvx2() && avx2::weightedAccumulate(acc, w, x, count, xType)) return;
#endif
  auto run = [&](auto load) {
    for (size_t i = 0; i < count; ++i) acc[i] += w * load(i);
  };
  const auto* p = static_cast<const uint8_t*>(x);
  auto u16 = [p](size_t i) {
    uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    return v;
  };
  switch (xType) {
    case vigilFloat32:
      return run([p](size_t i) {
        float v;
        std::memcpy(&v, p + 4 * i, 4);
        return v;
      });
    case vigilFloat16: return run([&](size_t i) { return halfToFloat(u16(i)); });
    case vigilBfloat16: return run([&](size_t i) { return bfloat16ToFloat(u16(i)); });
    default: return;
  }
}

size_t findNonFinite(const void* buf, size_t count, vigilDataType_t dtype) {
#if VIGIL_REDUCE_HAVE_AVX2
  size_t index = SIZE_MAX;
  if (useAvx2() && avx2::findNonFinite(buf, count, dtype, &index)) return index;
#endif
  switch (dtype) {
    case vigilFloat16:  // all-ones exponent
      return findIf<uint16_t>(buf, count, [](uint16_t h) { return (h & 0x7C00u) == 0x7C00u; });
    case vigilBfloat16: return findIf<uint16_t>(buf, count, [](uint16_t h) { return (h & 0x7F80u) == 0x7F80u; });
    case vigilFloat32: return findIf<float>(buf, count, nonFiniteValue<float>);
    case vigilFloat64: return findIf<double>(buf, count, nonFiniteValue<double>);
    default:  // integer types and the pairs
      return locFindNonFinite(buf, count, dtype);
  }
}

}  // namespace vigil::reduce
