#pragma once
// Data for vigil-perf's result check: how each dtype is stored, which values every rank puts in
// its input, and what the output must then hold.
//
// Every value is a small non-negative integer (or a power of two for prod) chosen so that each
// partial result of every reduction order is exactly representable in the dtype, float16 and
// bfloat16 included. The expected output can then be computed in double and compared exactly;
// only avg on floating types gets a tolerance, in case an implementation multiplies by 1/n.

#include <vigil/vigil.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace vigil::perf {

struct DtypeInfo {
  vigilDataType_t type;
  const char* name;
  size_t size;
  // Every integer in [0, exactLimit] is stored exactly and stays clear of the poison value.
  double exactLimit;
  // 2^maxPow2 is stored exactly.
  int maxPow2;
};

const DtypeInfo& dtypeInfo(vigilDataType_t type);
const char* opName(vigilRedOp_t op);

// ---- Storage codecs: a dtype's bits <-> double ------------------------------------------------

template <typename T>
struct NativeCodec {
  using Storage = T;
  static Storage encode(double v) { return static_cast<Storage>(v); }
  static double decode(Storage s) { return static_cast<double>(s); }
};

// IEEE binary16. encode() only needs the exact small integers and powers of two used here, so
// it truncates the mantissa; decode() handles every bit pattern, so garbage is seen as garbage.
struct HalfCodec {
  using Storage = uint16_t;
  static Storage encode(double v) {
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    const auto sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
    if ((bits & 0x7fffffffu) == 0) return sign;
    const int exponent = static_cast<int>((bits >> 23) & 0xffu) - 127 + 15;
    return static_cast<Storage>(sign | (exponent << 10) | ((bits >> 13) & 0x3ffu));
  }
  static double decode(Storage s) {
    const int exponent = (s >> 10) & 0x1f;
    const int mantissa = s & 0x3ff;
    double magnitude;
    if (exponent == 0) {
      magnitude = std::ldexp(mantissa, -24);
    } else if (exponent == 31) {
      magnitude = mantissa ? NAN : INFINITY;
    } else {
      magnitude = std::ldexp(mantissa | 0x400, exponent - 25);
    }
    return (s & 0x8000) ? -magnitude : magnitude;
  }
};

// bfloat16 is the upper half of a float32; the values used here fit in it exactly.
struct Bfloat16Codec {
  using Storage = uint16_t;
  static Storage encode(double v) {
    const float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return static_cast<Storage>(bits >> 16);
  }
  static double decode(Storage s) {
    const uint32_t bits = static_cast<uint32_t>(s) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
};

// Calls fn(codec) with the codec of `type`, so loops over a buffer are compiled per dtype.
template <typename Fn>
void withCodec(vigilDataType_t type, Fn&& fn) {
  switch (type) {
    case vigilInt8: return fn(NativeCodec<int8_t>{});
    case vigilUint8: return fn(NativeCodec<uint8_t>{});
    case vigilInt32: return fn(NativeCodec<int32_t>{});
    case vigilUint32: return fn(NativeCodec<uint32_t>{});
    case vigilInt64: return fn(NativeCodec<int64_t>{});
    case vigilUint64: return fn(NativeCodec<uint64_t>{});
    case vigilFloat16: return fn(HalfCodec{});
    case vigilFloat32: return fn(NativeCodec<float>{});
    case vigilFloat64: return fn(NativeCodec<double>{});
    case vigilBfloat16: return fn(Bfloat16Codec{});
    default: return;  // the (value, index) pairs: vigil-perf does not offer them
  }
}

// ---- Buffers -----------------------------------------------------------------------------------

// buf[i] = valueAt(i) for i < count.
template <typename ValueAt>
void fillBuffer(void* buf, size_t count, vigilDataType_t type, ValueAt valueAt) {
  withCodec(type, [&](auto codec) {
    using Codec = decltype(codec);
    auto* p = static_cast<typename Codec::Storage*>(buf);
    for (size_t i = 0; i < count; ++i) p[i] = Codec::encode(valueAt(i));
  });
}

// Fills an output with a value no input pattern produces (-1, or all ones for unsigned types),
// so an element the operation never wrote is counted wrong. It is finite, so that a run with
// VIGIL_NAN_CHECK=1 does not trip over outputs that are not written on this rank.
void poisonBuffer(void* buf, size_t count, vigilDataType_t type);

// The number of i < count whose buf[i] differs from expectedAt(i) by more than
// tolerance * max(1, |expected|) (tolerance 0: exact; NaN is always wrong).
template <typename ExpectedAt>
size_t countWrong(const void* buf, size_t count, vigilDataType_t type, double tolerance, ExpectedAt expectedAt) {
  size_t wrong = 0;
  withCodec(type, [&](auto codec) {
    using Codec = decltype(codec);
    const auto* p = static_cast<const typename Codec::Storage*>(buf);
    for (size_t i = 0; i < count; ++i) {
      const double got = Codec::decode(p[i]);
      const double want = expectedAt(i);
      const bool ok =
          tolerance == 0 ? got == want : std::fabs(got - want) <= tolerance * std::fmax(1.0, std::fabs(want));
      wrong += ok ? 0 : 1;
    }
  });
  return wrong;
}

// ---- Input patterns ------------------------------------------------------------------------------

// What rank r holds at element i of its input, and what reducing element i over all ranks gives.
class Pattern {
 public:
  // `op` is ignored when !reduction: data-moving collectives get values that identify
  // (rank, index), so a block delivered to the wrong place is seen.
  Pattern(vigilDataType_t type, bool reduction, vigilRedOp_t op, int nranks);

  double input(int rank, size_t index) const;
  double reduced(size_t index) const;
  // Accepted relative difference when comparing outputs (see countWrong).
  double tolerance() const { return tolerance_; }

 private:
  enum class Kind { Move, Sum, OneHot, Prod, MaxMin, Avg };
  double avgShared(size_t index) const;  // avg: the part every rank holds
  double avgOwned(size_t index) const;   // avg: the part one rank holds n times

  Kind kind_ = Kind::Move;
  vigilRedOp_t op_;
  int nranks_;
  uint64_t range_ = 1;       // values are hash % range_
  uint64_t maxDoubles_ = 0;  // prod: at most this many ranks hold a 2 at one index
  bool avgFits_ = true;      // avg fallback: n itself is exact in the dtype
  double tolerance_ = 0;
};

}  // namespace vigil::perf
