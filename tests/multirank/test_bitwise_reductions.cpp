// The bitwise and logical reductions (vigilBand, vigilBor, vigilBxor, vigilLand,
// vigilLor, vigilLxor) on every integer type, through allreduce, reduce and
// reduce-scatter, on 1, 3 and 5 thread-ranks, against a reference folded here;
// and their refusal on floating types. Over shared memory and over sockets (tcp/).

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/thread_ranks.hpp"

namespace {

using vigil::test::runRanks;

constexpr vigilRedOp_t kOps[] = {vigilBand, vigilBor, vigilBxor, vigilLand, vigilLor, vigilLxor};

// Varied bits, and zeros here and there so that the logical ops see both truth values.
uint64_t input(int rank, size_t i) {
  if ((i * 37 + static_cast<size_t>(rank) * 11) % 5 == 0) return 0;
  return ((i + 1) * 0x9E3779B97F4A7C15ULL) ^ (static_cast<uint64_t>(rank) * 0x5BD1E995ULL + i);
}

template <typename T>
T fold(vigilRedOp_t op, T a, T b) {
  switch (op) {
    case vigilBand: return static_cast<T>(a & b);
    case vigilBor: return static_cast<T>(a | b);
    case vigilBxor: return static_cast<T>(a ^ b);
    case vigilLand: return static_cast<T>(a != 0 && b != 0);
    case vigilLor: return static_cast<T>(a != 0 || b != 0);
    default: return static_cast<T>((a != 0) != (b != 0));
  }
}

template <typename T>
std::vector<T> reference(vigilRedOp_t op, int n, size_t count) {
  std::vector<T> out(count);
  for (size_t i = 0; i < count; ++i) {
    T acc = static_cast<T>(input(0, i));
    for (int r = 1; r < n; ++r) acc = fold(op, acc, static_cast<T>(input(r, i)));
    out[i] = acc;
  }
  return out;
}

template <typename T>
void checkType(vigilDataType_t type, int n) {
  constexpr size_t kBlock = 1001;  // odd: no vector width divides it
  const size_t count = kBlock * static_cast<size_t>(n);
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    std::vector<T> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<T>(input(rank, i));
    for (vigilRedOp_t op : kOps) {
      const std::vector<T> want = reference<T>(op, n, count);
      std::vector<T> out(count, T{0x5A});
      ASSERT_EQ(vigilAllReduce(in.data(), out.data(), count, type, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      EXPECT_EQ(out, want) << "allreduce op " << op;
      std::vector<T> root(count, T{0x5A});
      ASSERT_EQ(vigilReduce(in.data(), root.data(), count, type, op, n - 1, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      if (rank == n - 1) {
        EXPECT_EQ(root, want) << "reduce op " << op;
      }
      std::vector<T> mine(kBlock, T{0x5A});
      ASSERT_EQ(vigilReduceScatter(in.data(), mine.data(), kBlock, type, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      EXPECT_TRUE(std::equal(mine.begin(), mine.end(), want.begin() + static_cast<ptrdiff_t>(rank * kBlock)))
          << "reduce_scatter op " << op;
    }
  });
}

class BitwiseReductions : public ::testing::TestWithParam<int> {};

TEST_P(BitwiseReductions, EveryIntegerType) {
  const int n = GetParam();
  checkType<int8_t>(vigilInt8, n);
  checkType<uint8_t>(vigilUint8, n);
  checkType<int32_t>(vigilInt32, n);
  checkType<uint32_t>(vigilUint32, n);
  checkType<int64_t>(vigilInt64, n);
  checkType<uint64_t>(vigilUint64, n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, BitwiseReductions, ::testing::Values(1, 3, 5));

// On floating types they are refused before anything moves; the communicator stays usable.
TEST(BitwiseReductions, RefusedOnFloatingTypes) {
  runRanks(2, [&](int, vigilComm_t& comm) {
    std::vector<float> x(4, 1.0f);
    for (vigilDataType_t type : {vigilFloat16, vigilBfloat16, vigilFloat32, vigilFloat64}) {
      EXPECT_EQ(vigilAllReduce(x.data(), x.data(), 1, type, vigilBxor, comm, nullptr), vigilInvalidArgument);
      const std::string text = vigilGetLastError(comm);
      EXPECT_NE(text.find("VG-API-003"), std::string::npos) << text;
      EXPECT_NE(text.find("reduction bxor is defined on integer data types only"), std::string::npos) << text;
    }
    ASSERT_EQ(vigilAllReduce(x.data(), x.data(), 4, vigilFloat32, vigilSum, comm, nullptr), vigilSuccess);
    EXPECT_EQ(x[3], 2.0f);
  });
}

}  // namespace
