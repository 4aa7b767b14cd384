// Reduction kernels and half-precision conversions against scalar references
// that share no code with the implementation (rounding is redone with
// frexp/nearbyint in double), and the vector kernels against the portable
// loops, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "reduce/half.hpp"
#include "reduce/kernels.hpp"
#include "reduce/reduce.hpp"

namespace {

using vigil::bfloat16ToFloat;
using vigil::floatToBfloat16;
using vigil::floatToHalf;
using vigil::halfToFloat;
using vigil::reduce::divideInPlace;
using vigil::reduce::findNonFinite;
using vigil::reduce::KernelIsa;
using vigil::reduce::reduceInPlace;
using vigil::reduce::reduceInto;

constexpr vigilDataType_t kTypes[] = {vigilInt8,   vigilUint8,   vigilInt32,   vigilUint32,  vigilInt64,
                                      vigilUint64, vigilFloat16, vigilFloat32, vigilFloat64, vigilBfloat16};
constexpr vigilRedOp_t kOps[] = {vigilSum, vigilProd, vigilMax, vigilMin, vigilAvg};
constexpr size_t kCounts[] = {0, 1, 7, 1000, 4099};
const char* const kTypeNames[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                  "uint64", "float16", "float32", "float64", "bfloat16"};
const char* const kOpNames[] = {"sum", "prod", "max", "min", "avg"};

struct IsaScope {  // runs the entry points on one kernel set for a scope
  const KernelIsa previous;
  explicit IsaScope(KernelIsa isa) : previous(vigil::reduce::setKernelIsaForTesting(isa)) {}
  ~IsaScope() { vigil::reduce::setKernelIsaForTesting(previous); }
};
const KernelIsa kIsas[] = {KernelIsa::kScalar, vigil::reduce::supportedKernelIsa()};
using Bytes = std::vector<uint8_t>;

// ---- Independent references -------------------------------------------------

// Rounds v to a binary format with `digits` significand bits, smallest normal
// exponent minExp and largest finite value maxFinite; ties to even; +-Inf past
// the top. v / quantum is exact, so nearbyint does the only rounding.
double roundToFormat(double v, int digits, int minExp, double maxFinite) {
  if (std::isnan(v) || std::isinf(v) || v == 0) return v;
  int e = 0;
  std::frexp(v, &e);
  const double quantum = std::ldexp(1.0, std::max(e - 1, minExp) - (digits - 1));
  const double r = std::nearbyint(v / quantum) * quantum;
  return std::fabs(r) > maxFinite ? std::copysign(INFINITY, v) : r;
}
double roundHalf(double v) {
  return roundToFormat(v, 11, -14, 65504.0);
}
double roundBf16(double v) {
  return roundToFormat(v, 8, -126, 0x1.FEp127);
}

double decodeHalf(uint16_t h) {
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double mag = e == 0x1F ? (m ? NAN : INFINITY) : e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) ? -mag : mag;
}

uint32_t bitsOf(float f) {
  return std::bit_cast<uint32_t>(f);
}

template <typename T>
bool sameValue(T a, T b) {  // bitwise, except that any NaN equals any NaN
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  }
  return std::memcmp(&a, &b, sizeof a) == 0;
}

double refOp(double a, double b, vigilRedOp_t op) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  switch (op) {
    case vigilProd: return a * b;
    case vigilMax: return a > b ? a : b;
    case vigilMin: return a < b ? a : b;
    default: return a + b;  // sum, avg
  }
}

// One struct per storage kind: how to make test values, and the reference.
template <typename T>
struct IntKind {
  using S = T;
  static S gen(std::mt19937_64& rng, bool) { return static_cast<S>(rng()); }  // full range
  static S ref(S a, S b, vigilRedOp_t op) {
    const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    switch (op) {  // two's complement wrap: mod 2^64, then truncated (modular in C++20)
      case vigilProd: return static_cast<S>(ua * ub);
      case vigilMax: return a > b ? a : b;
      case vigilMin: return a < b ? a : b;
      default: return static_cast<S>(ua + ub);
    }
  }
  static bool same(S a, S b) { return a == b; }
};

// Exact mode: multiples of 1/4 in [-10, 10], exact in every float type, so
// sums are exact. Random mode: any finite bit pattern, which exercises
// rounding, subnormals and overflow; a float32 intermediate rounded once to
// half/bfloat16 equals direct rounding of the exact result (24 >= 2p + 2).
template <typename T>
struct FloatKind {
  using S = T;
  static S gen(std::mt19937_64& rng, bool random) {
    if (!random) return static_cast<S>(static_cast<int>(rng() % 81) - 40) / 4;
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    for (;;) {
      const S v = std::bit_cast<S>(static_cast<Bits>(rng()));
      if (std::isfinite(v)) return v;
    }
  }
  static S ref(S a, S b, vigilRedOp_t op) { return static_cast<S>(refOp(a, b, op)); }
  static bool same(S a, S b) { return sameValue(a, b); }
};

template <bool kBf16>
struct Half16Kind {
  using S = uint16_t;
  static double decode(S v) { return kBf16 ? bfloat16ToFloat(v) : decodeHalf(v); }
  static S encodeExact(double v) {  // v is representable, so no rounding happens
    return kBf16 ? floatToBfloat16(static_cast<float>(v)) : floatToHalf(static_cast<float>(v));
  }
  static S gen(std::mt19937_64& rng, bool random) {
    if (!random) return encodeExact((static_cast<int>(rng() % 81) - 40) / 4.0);
    for (;;) {
      const auto v = static_cast<S>(rng());
      if (std::isfinite(decode(v))) return v;
    }
  }
  static S ref(S a, S b, vigilRedOp_t op) {
    const double r = refOp(decode(a), decode(b), op);
    return encodeExact(kBf16 ? roundBf16(r) : roundHalf(r));
  }
  static bool same(S a, S b) { return sameValue(decode(a), decode(b)); }
};

template <typename Kind>
void checkReduce(vigilDataType_t dtype, vigilRedOp_t op, size_t count, bool random) {
  using S = typename Kind::S;
  constexpr size_t kGuard = 8;  // elements past count that must stay untouched
  std::mt19937_64 rng(count * 131 + dtype * 7 + op);
  std::vector<S> dst(count + kGuard), src(count + kGuard);
  for (auto& v : dst) v = Kind::gen(rng, random);
  for (auto& v : src) v = Kind::gen(rng, random);
  const std::vector<S> dst0 = dst, src0 = src;
  reduceInPlace(dst.data(), src.data(), count, dtype, op);
  for (size_t i = 0; i < count + kGuard; ++i) {
    const S want = i < count ? Kind::ref(dst0[i], src0[i], op) : dst0[i];
    ASSERT_TRUE(Kind::same(dst[i], want))
        << "index " << i << " got " << +dst[i] << " want " << +want << " from " << +dst0[i] << ", " << +src0[i];
  }
  ASSERT_EQ(std::memcmp(src.data(), src0.data(), src.size() * sizeof(S)), 0) << "src modified";
}

void checkReduceAny(vigilDataType_t dtype, vigilRedOp_t op, size_t count, bool random) {
  switch (dtype) {
    case vigilInt8: return checkReduce<IntKind<int8_t>>(dtype, op, count, random);
    case vigilUint8: return checkReduce<IntKind<uint8_t>>(dtype, op, count, random);
    case vigilInt32: return checkReduce<IntKind<int32_t>>(dtype, op, count, random);
    case vigilUint32: return checkReduce<IntKind<uint32_t>>(dtype, op, count, random);
    case vigilInt64: return checkReduce<IntKind<int64_t>>(dtype, op, count, random);
    case vigilUint64: return checkReduce<IntKind<uint64_t>>(dtype, op, count, random);
    case vigilFloat16: return checkReduce<Half16Kind<false>>(dtype, op, count, random);
    case vigilFloat32: return checkReduce<FloatKind<float>>(dtype, op, count, random);
    case vigilFloat64: return checkReduce<FloatKind<double>>(dtype, op, count, random);
    case vigilBfloat16: return checkReduce<Half16Kind<true>>(dtype, op, count, random);
    default: FAIL() << "the (value, index) pairs have tests of their own (LocPairs)";
  }
}

// ---- reduceInPlace ------------------------------------------------------------

class ReduceAll : public ::testing::TestWithParam<std::tuple<vigilDataType_t, vigilRedOp_t>> {};

TEST_P(ReduceAll, MatchesScalarReference) {
  const auto [dtype, op] = GetParam();
  for (KernelIsa isa : kIsas) {
    const IsaScope scope(isa);
    for (size_t count : kCounts) {
      SCOPED_TRACE("isa " + std::to_string(static_cast<int>(isa)) + " count " + std::to_string(count));
      checkReduceAny(dtype, op, count, /*random=*/false);
      // Float64 has no wider type to check random values against exactly.
      if (dtype == vigilFloat16 || dtype == vigilFloat32 || dtype == vigilBfloat16) {
        SCOPED_TRACE("random bit patterns");
        checkReduceAny(dtype, op, count, /*random=*/true);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Reduce, ReduceAll, ::testing::Combine(::testing::ValuesIn(kTypes), ::testing::ValuesIn(kOps)),
                         [](const auto& info) {
                           return std::string(kTypeNames[std::get<0>(info.param)]) + "_" +
                                  kOpNames[std::get<1>(info.param)];
                         });

TEST(Reduce, IntegerWrapExamples) {
  int8_t a8[] = {127, -128, 100};
  const int8_t b8[] = {1, -1, 3};
  reduceInPlace(a8, b8, 2, vigilInt8, vigilSum);
  EXPECT_EQ(a8[0], -128);
  EXPECT_EQ(a8[1], 127);
  reduceInPlace(a8 + 2, b8 + 2, 1, vigilInt8, vigilProd);
  EXPECT_EQ(a8[2], 44);  // 300 mod 256
  int64_t a64[] = {INT64_MAX, INT64_MIN};
  const int64_t b64[] = {1, -1};
  reduceInPlace(a64, b64, 2, vigilInt64, vigilSum);
  EXPECT_EQ(a64[0], INT64_MIN);
  EXPECT_EQ(a64[1], INT64_MAX);
  uint32_t a32[] = {0x80000000u};
  const uint32_t b32[] = {2};
  reduceInPlace(a32, b32, 1, vigilUint32, vigilProd);
  EXPECT_EQ(a32[0], 0u);
}

TEST(Reduce, FloatMaxMinPropagateNan) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (vigilRedOp_t op : kOps) {
    float f[] = {nan, 1.0f, nan};
    const float g[] = {1.0f, nan, nan};
    reduceInPlace(f, g, 3, vigilFloat32, op);
    for (float v : f) EXPECT_TRUE(std::isnan(v)) << kOpNames[op];
    double d[] = {NAN, -5.0};
    const double e[] = {-7.0, NAN};
    reduceInPlace(d, e, 2, vigilFloat64, op);
    for (double v : d) EXPECT_TRUE(std::isnan(v)) << kOpNames[op];
    uint16_t h[] = {0x7E00, 0x3C00}, b[] = {0x7FC0, 0x3F80};
    const uint16_t hs[] = {0x3C00, 0xFE00}, bs[] = {0x3F80, 0xFFC0};
    reduceInPlace(h, hs, 2, vigilFloat16, op);
    reduceInPlace(b, bs, 2, vigilBfloat16, op);
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(std::isnan(halfToFloat(h[i])));
    for (int i = 0; i < 2; ++i) EXPECT_TRUE(std::isnan(bfloat16ToFloat(b[i])));
  }
}

TEST(Reduce, UnknownEnumsAndEmptyBuffersDoNothing) {
  int32_t a[] = {1, 2}, b[] = {5, 6};
  reduceInPlace(a, b, 2, static_cast<vigilDataType_t>(42), vigilSum);
  reduceInPlace(a, b, 2, vigilInt32, static_cast<vigilRedOp_t>(42));
  divideInPlace(a, 2, static_cast<vigilDataType_t>(42), 2);
  EXPECT_EQ(a[0], 1);
  EXPECT_EQ(a[1], 2);
  EXPECT_EQ(findNonFinite(a, 2, static_cast<vigilDataType_t>(42)), SIZE_MAX);
  for (vigilDataType_t t : kTypes) {
    reduceInPlace(nullptr, nullptr, 0, t, vigilSum);
    divideInPlace(nullptr, 0, t, 3);
    EXPECT_EQ(findNonFinite(nullptr, 0, t), SIZE_MAX);
  }
}

// ---- divideInPlace ------------------------------------------------------------

TEST(Divide, IntegersTruncateTowardZero) {
  int8_t i8[] = {-128, -7, 7, 127, -1, 0};
  divideInPlace(i8, 6, vigilInt8, 2);
  EXPECT_EQ(std::vector<int8_t>(i8, i8 + 6), (std::vector<int8_t>{-64, -3, 3, 63, 0, 0}));
  int8_t big[] = {-128, 127};
  divideInPlace(big, 2, vigilInt8, 300);  // divisor wider than the type
  EXPECT_EQ(big[0], 0);
  EXPECT_EQ(big[1], 0);
  uint8_t u8[] = {255, 1};
  divideInPlace(u8, 2, vigilUint8, 2);
  EXPECT_EQ(u8[0], 127);
  EXPECT_EQ(u8[1], 0);
  int32_t i32[] = {-7, INT32_MIN, INT32_MAX};
  divideInPlace(i32, 3, vigilInt32, 4);
  EXPECT_EQ(std::vector<int32_t>(i32, i32 + 3), (std::vector<int32_t>{-1, INT32_MIN / 4, INT32_MAX / 4}));
  uint32_t u32[] = {0xFFFFFFFFu};
  divideInPlace(u32, 1, vigilUint32, 16);
  EXPECT_EQ(u32[0], 0x0FFFFFFFu);
  int64_t i64[] = {INT64_MIN, -10};
  divideInPlace(i64, 2, vigilInt64, 3);
  EXPECT_EQ(i64[0], INT64_MIN / 3);
  EXPECT_EQ(i64[1], -3);
  uint64_t u64[] = {UINT64_MAX};
  divideInPlace(u64, 1, vigilUint64, 3);
  EXPECT_EQ(u64[0], UINT64_MAX / 3);
  int32_t keep[] = {9};
  divideInPlace(keep, 1, vigilInt32, 0);  // invalid divisor: documented no-op
  divideInPlace(keep, 1, vigilInt32, -1);
  EXPECT_EQ(keep[0], 9);
}

TEST(Divide, FloatsAreCorrectlyRounded) {
  for (int d : {1, 3, 7, 1000}) {
    SCOPED_TRACE("divisor " + std::to_string(d));
    std::vector<float> f(1000);
    std::vector<double> g(1000);
    std::mt19937_64 rng(d);
    for (size_t i = 0; i < f.size(); ++i) {
      f[i] = std::bit_cast<float>(static_cast<uint32_t>(rng()) & 0xBFFFFFFFu);  // finite
      g[i] = std::ldexp(static_cast<double>(static_cast<int64_t>(rng() >> 11)), -20);
    }
    const auto f0 = f;
    const auto g0 = g;
    divideInPlace(f.data(), f.size(), vigilFloat32, d);
    divideInPlace(g.data(), g.size(), vigilFloat64, d);
    for (size_t i = 0; i < f.size(); ++i) {
      ASSERT_EQ(bitsOf(f[i]), bitsOf(static_cast<float>(static_cast<double>(f0[i]) / d))) << i;
      ASSERT_EQ(g[i], g0[i] / d) << i;
    }
    // Every half and bfloat16 pattern, against rounding of the exact quotient.
    std::vector<uint16_t> h(65536), b(65536);
    for (size_t i = 0; i < h.size(); ++i) h[i] = b[i] = static_cast<uint16_t>(i);
    divideInPlace(h.data(), h.size(), vigilFloat16, d);
    divideInPlace(b.data(), b.size(), vigilBfloat16, d);
    for (size_t i = 0; i < h.size(); ++i) {
      const auto x = static_cast<uint16_t>(i);
      ASSERT_TRUE(sameValue(decodeHalf(h[i]), roundHalf(decodeHalf(x) / d))) << std::hex << i;
      ASSERT_TRUE(
          sameValue(static_cast<double>(bfloat16ToFloat(b[i])), roundBf16(bfloat16ToFloat(x) / static_cast<double>(d))))
          << std::hex << i;
    }
  }
}

// ---- findNonFinite ------------------------------------------------------------

template <typename S>
void checkFind(vigilDataType_t dtype, S finiteBig, S nan, S posInf, S negInf) {
  for (size_t count : {1, 7, 64, 1000, 4099}) {
    std::vector<S> buf(count, finiteBig);
    EXPECT_EQ(findNonFinite(buf.data(), count, dtype), SIZE_MAX);
    for (size_t at : {size_t{0}, count / 2, count - 1}) {
      for (S bad : {nan, posInf, negInf}) {
        std::vector<S> b = buf;
        b[at] = bad;
        if (at + 1 < count) b[count - 1] = bad;  // a later hit must not win
        EXPECT_EQ(findNonFinite(b.data(), count, dtype), at) << count << " " << +bad;
        EXPECT_EQ(findNonFinite(b.data(), at, dtype), SIZE_MAX) << "looked past count";
      }
    }
  }
}

TEST(FindNonFinite, EachFloatType) {
  checkFind<uint16_t>(vigilFloat16, 0xFBFF, 0x7E00, 0x7C00, 0xFC00);
  checkFind<uint16_t>(vigilBfloat16, 0xFF7F, 0x7FC1, 0x7F80, 0xFF80);
  checkFind<float>(vigilFloat32, -std::numeric_limits<float>::max(), NAN, INFINITY, -INFINITY);
  checkFind<double>(vigilFloat64, std::numeric_limits<double>::max(), NAN, INFINITY, -INFINITY);
  checkFind<float>(vigilFloat32, std::numeric_limits<float>::denorm_min(), std::bit_cast<float>(0xFF800001u), INFINITY,
                   -INFINITY);
}

TEST(FindNonFinite, IntegersNeverHaveOne) {
  std::vector<uint8_t> ones(8 * 100, 0xFF);  // would be NaN in any float type
  for (vigilDataType_t t : {vigilInt8, vigilUint8, vigilInt32, vigilUint32, vigilInt64, vigilUint64}) {
    EXPECT_EQ(findNonFinite(ones.data(), 100, t), SIZE_MAX);
  }
}

// ---- Half conversions ---------------------------------------------------------

TEST(Half, DecodeAndRoundTripAllPatterns) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = halfToFloat(h);
    ASSERT_TRUE(sameValue(static_cast<double>(f), decodeHalf(h))) << std::hex << i;
    const uint16_t back = floatToHalf(f);
    if (std::isnan(f)) {
      ASSERT_GT(back & 0x7FFF, 0x7C00) << std::hex << i;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << std::hex << i;
    } else {
      ASSERT_EQ(back, h) << std::hex << i;
    }
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00);  // tie with 65536 goes to even: Inf
  EXPECT_EQ(floatToHalf(1e30f), 0x7C00);
  EXPECT_EQ(floatToHalf(-INFINITY), 0xFC00);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);  // tie with 0
  EXPECT_EQ(floatToHalf(0x1.000002p-25f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1.8p-24f), 0x0002);    // 1.5 quanta: tie to even
  EXPECT_EQ(floatToHalf(0x3FF.8p-24f), 0x0400);  // subnormal rounds up into the normals
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(floatToHalf(2049.0f), 0x6800);  // 2048: ties to even
  EXPECT_EQ(floatToHalf(2051.0f), 0x6802);  // 2052
  EXPECT_EQ(bitsOf(halfToFloat(0x3C00)), bitsOf(1.0f));
  EXPECT_EQ(bitsOf(halfToFloat(0x0001)), bitsOf(0x1p-24f));
  EXPECT_EQ(bitsOf(halfToFloat(0x7BFF)), bitsOf(65504.0f));
  EXPECT_EQ(bitsOf(halfToFloat(0x8000)), bitsOf(-0.0f));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7C01)));
  EXPECT_EQ(floatToHalf(std::bit_cast<float>(0x7F800001u)) & 0x7FFF, 0x7E00);  // low payload
  EXPECT_EQ(floatToHalf(std::bit_cast<float>(0xFFC00000u)), 0xFE00);
}

// Midpoints between neighbouring halves (exact in float) and their float
// neighbours, for every finite half of both signs; 0x7BFF's upper neighbour is 65536.
TEST(Half, RoundsEveryMidpointToNearestEven) {
  for (uint32_t i = 0; i < 0x7C00; ++i) {
    for (uint16_t sign : {0x0000, 0x8000}) {
      const auto lo = static_cast<uint16_t>(i | sign), hi = static_cast<uint16_t>(lo + 1);
      const double hiVal = i == 0x7BFF ? std::copysign(65536.0, decodeHalf(lo)) : decodeHalf(hi);
      const auto mid = static_cast<float>((decodeHalf(lo) + hiVal) / 2);
      ASSERT_EQ(floatToHalf(mid), (lo & 1) ? hi : lo) << std::hex << lo;
      ASSERT_EQ(floatToHalf(std::nextafter(mid, 0.0f)), lo) << std::hex << lo;
      ASSERT_EQ(floatToHalf(std::nextafter(mid, 2 * mid)), hi) << std::hex << lo;
    }
  }
}

TEST(Half, MatchesReferenceOnSampledFloats) {
  for (uint64_t bits = 0; bits < (uint64_t{1} << 32); bits += 2053) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isnan(f)) continue;
    ASSERT_TRUE(sameValue(decodeHalf(floatToHalf(f)), roundHalf(f))) << std::hex << bits;
  }
}

// ---- bfloat16 conversions -----------------------------------------------------

TEST(Bfloat16, RoundTripAndMidpoints) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<uint16_t>(i);
    const float f = bfloat16ToFloat(b);
    ASSERT_EQ(bitsOf(f), i << 16);
    if (std::isnan(f)) {
      ASSERT_TRUE(std::isnan(bfloat16ToFloat(floatToBfloat16(f)))) << std::hex << i;
      continue;
    }
    ASSERT_EQ(floatToBfloat16(f), b) << std::hex << i;
    if ((i & 0x7FFF) >= 0x7F80) continue;      // Inf: no upper neighbour
    const uint32_t mid = (i << 16) | 0x8000u;  // exactly between b and b + 1
    ASSERT_EQ(floatToBfloat16(std::bit_cast<float>(mid)), (i & 1) ? b + 1 : b) << std::hex << i;
    ASSERT_EQ(floatToBfloat16(std::bit_cast<float>(mid - 1)), b) << std::hex << i;
    ASSERT_EQ(floatToBfloat16(std::bit_cast<float>(mid + 1)), b + 1) << std::hex << i;
  }
}

TEST(Bfloat16, KnownValues) {
  EXPECT_EQ(floatToBfloat16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x3F808000u)), 0x3F80);  // tie, even below
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x3F818000u)), 0x3F82);  // tie, even above
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x7F7F8000u)), 0x7F80);  // overflows to Inf
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(floatToBfloat16(-INFINITY), 0xFF80);
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x7F800001u)), 0x7FC0);  // NaN stays NaN
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0xFFFFFFFFu)), 0xFFFF);
  EXPECT_EQ(floatToBfloat16(std::numeric_limits<float>::denorm_min()), 0x0000);
  EXPECT_EQ(floatToBfloat16(std::bit_cast<float>(0x00008001u)), 0x0001);
}

// Two NaN operands: the result is the first one's (quieted by arithmetic) with
// every kernel set, whichever operand order the compiler picks for the add.
TEST(Reduce, NanPayloadComesFromFirstOperand) {
  for (KernelIsa isa : kIsas) {
    const IsaScope scope(isa);
    for (vigilRedOp_t op : kOps) {
      std::vector<uint32_t> f(37, 0x7FA00001u), fs(37, 0xFFC00002u);  // signalling, quiet
      std::vector<uint16_t> h(37, 0x7D01), hs(37, 0xFE02), b(37, 0x7FA1), bs(37, 0xFFC2);
      reduceInPlace(f.data(), fs.data(), f.size(), vigilFloat32, op);
      reduceInPlace(h.data(), hs.data(), h.size(), vigilFloat16, op);
      reduceInPlace(b.data(), bs.data(), b.size(), vigilBfloat16, op);
      const bool selects = op == vigilMax || op == vigilMin;  // max/min return the operand as is
      EXPECT_EQ(f, std::vector<uint32_t>(37, selects ? 0x7FA00001u : 0x7FE00001u)) << kOpNames[op];
      EXPECT_EQ(h, std::vector<uint16_t>(37, 0x7F01)) << kOpNames[op];  // narrowing quiets
      EXPECT_EQ(b, std::vector<uint16_t>(37, 0x7FE1)) << kOpNames[op];
    }
  }
}

#if VIGIL_REDUCE_HAVE_AVX2
// ---- Vector kernels against the portable loops --------------------------------

// Per dtype: element size, exponent and mantissa bits (0 for integers).
constexpr size_t kSize[] = {1, 1, 4, 4, 8, 8, 2, 4, 8, 2};
constexpr int kExpBits[] = {0, 0, 0, 0, 0, 0, 5, 8, 11, 8}, kMantBits[] = {0, 0, 0, 0, 0, 0, 10, 23, 52, 7};

uint64_t elemBits(const Bytes& b, size_t i, vigilDataType_t t) {
  uint64_t v = 0;
  std::memcpy(&v, b.data() + i * kSize[t], kSize[t]);  // little-endian
  return v;
}

// Random elements: integers of any bits; for floats a mix of any pattern,
// values near 1 (their sums round, some tie) and the edges: +-0, +-Inf, quiet
// and signalling NaNs with payloads, subnormals, the extremes. With `finite`,
// NaN/Inf become finite by clearing their exponent.
Bytes mixedElements(size_t count, vigilDataType_t t, std::mt19937_64& rng, bool finite = false) {
  const int e = kExpBits[t], m = kMantBits[t];
  const uint64_t mantMask = (uint64_t{1} << m) - 1, bias = e ? (1u << (e - 1)) - 1 : 0, inf = ((1u << e) - 1ull) << m;
  Bytes out(count * kSize[t]);
  for (size_t i = 0; i < count; ++i) {
    uint64_t v = rng();
    const uint64_t sign = (rng() >> 63) << (e + m), mant = v & mantMask;
    const uint64_t edges[] = {
        0, inf, inf | (mantMask + 1) / 2, inf | 1, inf | mant | 1, 1, mantMask, mantMask + 1, inf - 1, mant};
    const uint64_t kind = e == 0 ? 0 : rng() % 4;
    if (kind == 1 || kind == 2) v = sign | ((bias + rng() % 8 - 4) << m) | mant;
    if (kind == 3) v = sign | edges[rng() % std::size(edges)];
    if (finite && e != 0 && (v & inf) == inf) v &= ~inf;
    std::memcpy(out.data() + i * kSize[t], &v, kSize[t]);
  }
  return out;
}

// Sets MXCSR bits for a scope: flush-to-zero and denormals-are-zero, as some
// frameworks set them, or a rounding mode the half conversions must ignore.
struct MxcsrScope {
  const unsigned saved = __builtin_ia32_stmxcsr();
  explicit MxcsrScope(unsigned bits) { __builtin_ia32_ldmxcsr(saved | bits); }
  ~MxcsrScope() { __builtin_ia32_ldmxcsr(saved); }
};

// Runs `fn` on fresh copies of `in` with each kernel set; the copies must end
// up with the same bytes, guards and inputs included.
template <typename Fn>
void expectSameBits(const std::vector<Bytes>& in, vigilDataType_t t, Fn fn) {
  std::vector<Bytes> got[2] = {in, in};
  for (int k = 0; k < 2; ++k) {
    const IsaScope scope(kIsas[k]);
    fn(got[k]);
  }
  for (size_t j = 0; j < in.size(); ++j) {
    const size_t at = std::mismatch(got[0][j].begin(), got[0][j].end(), got[1][j].begin()).first - got[0][j].begin();
    const size_t i = at / kSize[t];  // the message is built only on failure, when i is in range
    ASSERT_EQ(at, got[0][j].size()) << "buffer " << j << " element " << i << std::hex << ": portable 0x"
                                    << elemBits(got[0][j], i, t) << ", vector 0x" << elemBits(got[1][j], i, t);
  }
}

// Every entry point, every dtype, every length up to a few blocks (all tail
// shapes) and some long odd ones, with element offsets that move each pointer
// off vector alignment differently, with FTZ/DAZ or rounding toward zero too.
TEST(VectorKernels, EveryEntryPointMatchesPortableLoops) {
  if (vigil::reduce::supportedKernelIsa() == KernelIsa::kScalar) GTEST_SKIP() << "no vector kernels on this CPU";
  std::mt19937_64 rng(20240611);
  for (unsigned bits : {0u, 0x8040u, 0x6000u}) {  // default, FTZ + DAZ, round toward zero
    const MxcsrScope mxcsr(bits);
    for (vigilDataType_t t : kTypes) {
      for (size_t c = 0; c <= 73; ++c) {
        const size_t count = c <= 70 ? c : (size_t{1} << (2 * c - 132)) + 1;  // then 1025, 4097, 16385
        SCOPED_TRACE(std::string(kTypeNames[t]) + " count " + std::to_string(count) + " mxcsr " + std::to_string(bits));
        const size_t z = kSize[t], n = count + 24;  // offsets plus guards
        const size_t d = count % 3 * z, a = (count + 1) % 4 * z, b = (count + 2) % 5 * z;
        const std::vector<Bytes> in = {mixedElements(n, t, rng), mixedElements(n, t, rng), mixedElements(n, t, rng)};
        for (vigilRedOp_t op : kOps) {
          SCOPED_TRACE(kOpNames[op]);
          expectSameBits(in, t, [&](std::vector<Bytes>& v) { reduceInPlace(&v[0][d], &v[1][b], count, t, op); });
          expectSameBits(in, t, [&](std::vector<Bytes>& v) { reduceInto(&v[0][d], &v[1][a], &v[2][b], count, t, op); });
        }
        for (int divisor : {1, 3, 7, 1000}) {
          expectSameBits(in, t, [&](std::vector<Bytes>& v) { divideInPlace(&v[0][a], count, t, divisor); });
        }
        // Finite data with up to two NaNs anywhere in the buffer, inside the range or not.
        Bytes finite = mixedElements(n, t, rng, /*finite=*/true);
        for (uint64_t k = rng() % 3; k > 0; --k) std::memset(&finite[rng() % n * z], 0xFF, z);
        const auto find = [&](KernelIsa isa) {
          const IsaScope scope(isa);
          return findNonFinite(&finite[a], count, t);
        };
        ASSERT_EQ(find(kIsas[0]), find(kIsas[1]));
      }
    }
  }
  // Every float16/bfloat16 pattern against every other, both ways round
  // (division is checked on every pattern against a reference above).
  std::vector<uint16_t> all(2 * 65536);
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<uint16_t>(i);
  std::shuffle(all.begin() + 65536, all.end(), rng);
  const auto* raw = reinterpret_cast<const uint8_t*>(all.data());
  const Bytes every(raw, raw + 2 * 65536), shuffled(raw + 2 * 65536, raw + 4 * 65536);
  for (vigilDataType_t t : {vigilFloat16, vigilBfloat16}) {
    for (vigilRedOp_t op : kOps) {
      SCOPED_TRACE(std::string(kTypeNames[t]) + " " + kOpNames[op]);
      const auto reduce = [&](std::vector<Bytes>& v) { reduceInPlace(v[0].data(), v[1].data(), 65536, t, op); };
      expectSameBits({every, shuffled}, t, reduce);
      expectSameBits({shuffled, every}, t, reduce);
    }
  }
}
#endif  // VIGIL_REDUCE_HAVE_AVX2

}  // namespace
