// The (value, index) pairs of vigilMinLoc/vigilMaxLoc and the input scaling
// of pre-multiplied sums, against hand-worked cases and their contracts
// (every order of reduction gives the same bytes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "reduce/half.hpp"
#include "reduce/reduce.hpp"

namespace {

using vigil::bfloat16ToFloat;
using vigil::floatToBfloat16;
using vigil::floatToHalf;
using vigil::halfToFloat;
using vigil::reduce::findNonFinite;
using vigil::reduce::reduceInPlace;
using vigil::reduce::reduceInto;
using vigil::reduce::scaleInto;

// ---- (value, index) pairs -----------------------------------------------------

TEST(LocPairs, ExtremeValueThenLesserIndex) {
  vigilFloat32Int32_t a[] = {{1, 5}, {2, 5}, {3, 9}, {-0.0f, 4}, {NAN, 8}, {NAN, 8}, {1, 1}};
  const vigilFloat32Int32_t b[] = {{2, 0}, {2, 3}, {3, 2}, {0.0f, 6}, {1, 0}, {NAN, 2}, {INFINITY, 7}};
  vigilFloat32Int32_t lo[7], hi[7];
  reduceInto(lo, a, b, 7, vigilFloat32Int32, vigilMinLoc);
  reduceInto(hi, a, b, 7, vigilFloat32Int32, vigilMaxLoc);
  const int loIndex[] = {5, 3, 2, 4, 8, 2, 1}, hiIndex[] = {0, 3, 2, 4, 8, 2, 7};
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(lo[i].index, loIndex[i]) << "minloc element " << i;
    EXPECT_EQ(hi[i].index, hiIndex[i]) << "maxloc element " << i;
  }
  EXPECT_TRUE(std::signbit(lo[3].value));  // the winner's value as stored: -0 with index 4
  EXPECT_TRUE(std::isnan(lo[4].value) && std::isnan(hi[4].value));
  reduceInPlace(a, b, 7, vigilFloat32Int32, vigilMaxLoc);  // in place: the same as out of place
  EXPECT_EQ(std::memcmp(a, hi, sizeof hi), 0);
}

// A total order: any grouping and order of the inputs gives the same bytes,
// which is what lets every algorithm and every rank agree.
template <typename Pair>
void checkOrderFree(vigilDataType_t type, vigilRedOp_t op) {
  std::mt19937 rng(7);
  constexpr size_t kCount = 257;
  constexpr int kInputs = 5;
  std::vector<std::vector<Pair>> in(kInputs, std::vector<Pair>(kCount));
  for (auto& v : in) {
    for (Pair& p : v) {
      p = Pair{};
      p.value = static_cast<decltype(p.value)>(static_cast<int>(rng() % 4) - 1);
      if constexpr (std::is_floating_point_v<decltype(p.value)>) {
        if (rng() % 9 == 0) p.value = NAN;
      }
      p.index = static_cast<int32_t>(rng() % 6);
    }
  }
  auto fold = [&](std::vector<int> order) {
    std::vector<Pair> acc = in[static_cast<size_t>(order[0])];
    for (size_t k = 1; k < order.size(); ++k) {
      reduceInPlace(acc.data(), in[static_cast<size_t>(order[k])].data(), kCount, type, op);
    }
    return acc;
  };
  std::vector<int> order = {0, 1, 2, 3, 4};
  const std::vector<Pair> first = fold(order);
  while (std::next_permutation(order.begin(), order.end())) {
    const std::vector<Pair> other = fold(order);
    ASSERT_EQ(std::memcmp(first.data(), other.data(), kCount * sizeof(Pair)), 0);
  }
  // A tree, (0 op 1) op (2 op (3 op 4)), as recursive doubling groups them.
  std::vector<Pair> left(kCount), right(kCount);
  reduceInto(left.data(), in[0].data(), in[1].data(), kCount, type, op);
  reduceInto(right.data(), in[3].data(), in[4].data(), kCount, type, op);
  reduceInto(right.data(), in[2].data(), right.data(), kCount, type, op);
  reduceInPlace(left.data(), right.data(), kCount, type, op);
  EXPECT_EQ(std::memcmp(first.data(), left.data(), kCount * sizeof(Pair)), 0);
}

TEST(LocPairs, AnyOrderGivesTheSameBytes) {
  for (vigilRedOp_t op : {vigilMinLoc, vigilMaxLoc}) {
    checkOrderFree<vigilFloat32Int32_t>(vigilFloat32Int32, op);
    checkOrderFree<vigilFloat64Int32_t>(vigilFloat64Int32, op);
    checkOrderFree<vigilInt32Int32_t>(vigilInt32Int32, op);
    checkOrderFree<vigilInt64Int32_t>(vigilInt64Int32, op);
  }
}

TEST(LocPairs, IdentityAndNonFiniteValues) {
  vigilFloat64Int32_t id[3];
  vigil::reduce::fillIdentity(id, 3, vigilFloat64Int32, vigilMinLoc);
  const vigilFloat64Int32_t x[3] = {{INFINITY, 9, 0}, {-5, 2, 0}, {NAN, 1, 0}};
  reduceInPlace(id, x, 3, vigilFloat64Int32, vigilMinLoc);
  EXPECT_EQ(std::memcmp(id, x, sizeof x), 0);  // the identity never wins
  EXPECT_EQ(findNonFinite(x, 3, vigilFloat64Int32), 0u);
  EXPECT_EQ(findNonFinite(x + 1, 2, vigilFloat64Int32), 1u);
  const vigilInt32Int32_t ints[2] = {{-1, -1}, {0x7F800000, 0}};
  EXPECT_EQ(findNonFinite(ints, 2, vigilInt32Int32), SIZE_MAX);
}

// ---- scaleInto (the pre-multiplied sum's input) -------------------------------

TEST(ScaleInto, EveryTypeInItsOwnArithmetic) {
  const int8_t i8[] = {3, -7, 100};
  int8_t i8out[3];
  const int8_t i8scalar = 3;
  scaleInto(i8out, i8, 3, vigilInt8, &i8scalar);
  EXPECT_EQ(i8out[0], 9);
  EXPECT_EQ(i8out[1], -21);
  EXPECT_EQ(i8out[2], static_cast<int8_t>(300 - 256));  // wraps, as prod does
  const uint64_t u64[] = {1ULL << 63, 5};
  uint64_t u64out[2];
  const uint64_t two = 2;
  scaleInto(u64out, u64, 2, vigilUint64, &two);
  EXPECT_EQ(u64out[0], 0u);
  EXPECT_EQ(u64out[1], 10u);
  float f32[] = {1.5f, -2.0f, NAN};
  const float half = 0.5f;
  scaleInto(f32, f32, 3, vigilFloat32, &half);  // in place
  EXPECT_EQ(f32[0], 0.75f);
  EXPECT_EQ(f32[1], -1.0f);
  EXPECT_TRUE(std::isnan(f32[2]));
  const uint16_t h[] = {floatToHalf(3.0f), floatToHalf(65504.0f)};
  uint16_t hout[2];
  const uint16_t hscalar = floatToHalf(0.25f);
  scaleInto(hout, h, 2, vigilFloat16, &hscalar);
  EXPECT_EQ(halfToFloat(hout[0]), 0.75f);
  EXPECT_EQ(halfToFloat(hout[1]), 16376.0f);
  const uint16_t b[] = {floatToBfloat16(3.0f)};
  uint16_t bout[1];
  const uint16_t bscalar = floatToBfloat16(-2.0f);
  scaleInto(bout, b, 1, vigilBfloat16, &bscalar);
  EXPECT_EQ(bfloat16ToFloat(bout[0]), -6.0f);
  const double d[] = {1e308};
  double dout[1];
  const double ten = 10;
  scaleInto(dout, d, 1, vigilFloat64, &ten);
  EXPECT_TRUE(std::isinf(dout[0]));
}

}  // namespace
