// reduce::weightedAccumulate (MoE combine's acc += w * row): the value of
// every element against a reference that widens with its own decoder and
// rounds the multiply and the add separately, and the vector kernel against
// the portable loop bit for bit (every tail length, unaligned rows, NaN, Inf,
// subnormals).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "reduce/kernels.hpp"
#include "reduce/reduce.hpp"

namespace {

using vigil::reduce::KernelIsa;
using vigil::reduce::weightedAccumulate;

struct IsaScope {
  const KernelIsa previous;
  explicit IsaScope(KernelIsa isa) : previous(vigil::reduce::setKernelIsaForTesting(isa)) {}
  ~IsaScope() { vigil::reduce::setKernelIsaForTesting(previous); }
};

size_t sizeOf(vigilDataType_t t) {
  return t == vigilFloat32 ? 4 : 2;
}

// Widening by the formats' definitions (not the library's converters).
float widened(const uint8_t* p, vigilDataType_t t) {
  if (t == vigilFloat32)
    return std::bit_cast<float>(uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24);
  const uint16_t h = static_cast<uint16_t>(p[0] | p[1] << 8);
  if (t == vigilBfloat16) return std::bit_cast<float>(uint32_t{h} << 16);
  const int e = (h >> 10) & 0x1F, m = h & 0x3FF;
  const double mag = e == 0x1F ? (m ? NAN : INFINITY) : e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return static_cast<float>((h & 0x8000) ? -mag : mag);
}

// Random elements: mostly ordinary values, some zeros, subnormals, Inf and NaN.
std::vector<uint8_t> elements(size_t n, vigilDataType_t t, std::mt19937_64& rng) {
  std::vector<uint8_t> out(n * sizeOf(t));
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    uint32_t bits = static_cast<uint32_t>(r);
    switch (r >> 60) {
      case 0: bits = 0; break;
      case 1: bits = t == vigilFloat16 ? 0x0001 + (bits & 0x3FF) : (bits & 0x807FFFFF); break;  // subnormal
      case 2: bits = t == vigilFloat16 ? 0x7C00 : 0x7F800000; break;                            // Inf
      case 3: bits |= t == vigilFloat16 ? 0x7C01 : 0x7F800001; break;                           // NaN
      default:
        if (t == vigilFloat32) bits = std::bit_cast<uint32_t>(std::ldexp(static_cast<float>(r % 2000) - 1000.0f, -7));
    }
    if (t == vigilBfloat16) bits >>= 16;
    std::memcpy(&out[i * sizeOf(t)], &bits, sizeOf(t));
  }
  return out;
}

TEST(WeightedAccumulate, EveryElementIsOneRoundedMultiplyAndOneRoundedAdd) {
  std::mt19937_64 rng(7);
  for (vigilDataType_t t : {vigilFloat32, vigilFloat16, vigilBfloat16}) {
    const size_t n = 1000;
    const std::vector<uint8_t> x = elements(n + 1, t, rng);
    std::vector<float> acc(n), want(n);
    for (size_t i = 0; i < n; ++i) acc[i] = want[i] = std::ldexp(static_cast<float>(rng() % 4001) - 2000.0f, -9);
    const float w = 0.3f;
    for (size_t i = 0; i < n; ++i) {
      const volatile float product = w * widened(&x[sizeOf(t) * (i + 1)], t);  // rounded on its own
      want[i] = want[i] + product;
    }
    weightedAccumulate(acc.data(), w, &x[sizeOf(t)], n, t);  // rows need not be aligned
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(acc[i])) << "type " << t << " element " << i;
      } else {
        EXPECT_EQ(std::bit_cast<uint32_t>(acc[i]), std::bit_cast<uint32_t>(want[i]))
            << "type " << t << " element " << i;
      }
    }
  }
}

TEST(WeightedAccumulate, OtherTypesDoNothing) {
  std::vector<float> acc{1.0f, 2.0f};
  const int32_t x[2] = {5, 6};
  weightedAccumulate(acc.data(), 2.0f, x, 2, vigilInt32);
  EXPECT_EQ(acc, (std::vector<float>{1.0f, 2.0f}));
}

TEST(WeightedAccumulate, VectorKernelMatchesPortableLoopBitForBit) {
  if (vigil::reduce::supportedKernelIsa() == KernelIsa::kScalar) GTEST_SKIP() << "no vector kernels on this CPU";
  std::mt19937_64 rng(11);
  for (vigilDataType_t t : {vigilFloat32, vigilFloat16, vigilBfloat16}) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{15}, size_t{16}, size_t{17},
                         size_t{31}, size_t{1025}, size_t{4096}, size_t{4103}}) {
      for (size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {
        SCOPED_TRACE("type " + std::to_string(t) + " count " + std::to_string(count) + " offset " +
                     std::to_string(offset));
        const std::vector<uint8_t> x = elements(count + offset, t, rng);
        const std::vector<uint8_t> start = elements(count + 2, vigilFloat32, rng);  // NaN and Inf sums too
        const float w = std::bit_cast<float>(static_cast<uint32_t>(rng() % 0x7F000000));
        std::vector<float> got[2];
        for (int k = 0; k < 2; ++k) {
          const IsaScope scope(k == 0 ? KernelIsa::kScalar : KernelIsa::kAvx2);
          got[k].resize(count + 2);
          std::memcpy(got[k].data(), start.data(), start.size());
          weightedAccumulate(got[k].data(), w, x.data() + offset * sizeOf(t), count, t);
        }
        // Bits equal, except that which NaN's payload survives NaN + NaN is
        // the compiler's operand order in the portable loop (it differs at -O0).
        for (size_t i = 0; i < got[0].size(); ++i) {
          if (std::isnan(got[0][i]) && std::isnan(got[1][i])) continue;
          ASSERT_EQ(std::bit_cast<uint32_t>(got[0][i]), std::bit_cast<uint32_t>(got[1][i])) << "element " << i;
        }
      }
    }
  }
}

}  // namespace
