#include "reduce/reduce.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "reduce/half.hpp"

// Shape of this file: the (dtype, op) switch runs once per call and selects a
// template instance whose inner loop is a plain indexed `for` over __restrict
// pointers with no calls or branches the compiler cannot inline or if-convert,
// so GCC/Clang vectorise it at -O2/-O3. (With baseline x86-64/SSE2, float16
// and 64-bit integer prod/max/min stay scalar for lack of variable shifts and
// 64-bit multiplies/compares; with -mavx2 every loop vectorises.) A "codec"
// describes how a dtype is stored and which type the arithmetic happens in; an
// op is a stateless functor.

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

struct SumOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    } else {
      return a * b;
    }
  }
};

// std::max/std::min would silently drop a NaN in one argument position and
// keep it in the other, so a NaN on one rank could vanish depending on the
// ring order. `a != a` is the NaN test that stays a plain vector compare.
struct MaxOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a > b || a != a) ? a : b;
    } else {
      return a > b ? a : b;
    }
  }
};

struct MinOp {
  template <typename T>
  static T apply(T a, T b) {
    if constexpr (std::is_floating_point_v<T>) {
      return (a < b || a != a) ? a : b;
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

template <typename Codec, typename Op>
void reduceLoop(typename Codec::Storage* __restrict d, const typename Codec::Storage* __restrict s, size_t count) {
  const auto step = [](auto a, auto b) { return Codec::store(Op::apply(Codec::load(a), Codec::load(b))); };
  size_t i = 0;
  for (; i + kChunk <= count; i += kChunk) {
    for (size_t j = 0; j < kChunk; ++j) d[i + j] = step(d[i + j], s[i + j]);
  }
  for (; i < count; ++i) d[i] = step(d[i], s[i]);
}

template <typename Codec>
void reduceTyped(void* dst, const void* src, size_t count, vigilRedOp_t op) {
  auto* d = static_cast<typename Codec::Storage*>(dst);
  const auto* s = static_cast<const typename Codec::Storage*>(src);
  switch (op) {
    case vigilSum:
    case vigilAvg: return reduceLoop<Codec, SumOp>(d, s, count);
    case vigilProd: return reduceLoop<Codec, ProdOp>(d, s, count);
    case vigilMax: return reduceLoop<Codec, MaxOp>(d, s, count);
    case vigilMin: return reduceLoop<Codec, MinOp>(d, s, count);
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

}  // namespace

void reduceInPlace(void* dst, const void* src, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  switch (dtype) {
    case vigilInt8: return reduceTyped<Native<int8_t>>(dst, src, count, op);
    case vigilUint8: return reduceTyped<Native<uint8_t>>(dst, src, count, op);
    case vigilInt32: return reduceTyped<Native<int32_t>>(dst, src, count, op);
    case vigilUint32: return reduceTyped<Native<uint32_t>>(dst, src, count, op);
    case vigilInt64: return reduceTyped<Native<int64_t>>(dst, src, count, op);
    case vigilUint64: return reduceTyped<Native<uint64_t>>(dst, src, count, op);
    case vigilFloat16: return reduceTyped<Float16>(dst, src, count, op);
    case vigilFloat32: return reduceTyped<Native<float>>(dst, src, count, op);
    case vigilFloat64: return reduceTyped<Native<double>>(dst, src, count, op);
    case vigilBfloat16: return reduceTyped<Bfloat16>(dst, src, count, op);
  }
}

void divideInPlace(void* buf, size_t count, vigilDataType_t dtype, int divisor) {
  if (divisor < 1) return;
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
  }
}

size_t findNonFinite(const void* buf, size_t count, vigilDataType_t dtype) {
  switch (dtype) {
    case vigilFloat16:  // all-ones exponent
      return findIf<uint16_t>(buf, count, [](uint16_t h) { return (h & 0x7C00u) == 0x7C00u; });
    case vigilBfloat16: return findIf<uint16_t>(buf, count, [](uint16_t h) { return (h & 0x7F80u) == 0x7F80u; });
    case vigilFloat32: return findIf<float>(buf, count, nonFiniteValue<float>);
    case vigilFloat64: return findIf<double>(buf, count, nonFiniteValue<double>);
    default:  // integer types
      return SIZE_MAX;
  }
}

}  // namespace vigil::reduce
