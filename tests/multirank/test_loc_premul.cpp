// vigilMinLoc / vigilMaxLoc on the four (value, index) pair types, and the
// pre-multiplied sum of vigilRedOpCreatePreMulSum: through allreduce, reduce,
// reduce-scatter and the prefix reductions on 1, 3 and 5 thread-ranks,
// against references folded here; their refusals, each naming what was
// wrong. Over shared memory and over sockets (tcp/).

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/thread_ranks.hpp"
#include "reduce/half.hpp"

namespace {

using vigil::test::runRanks;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// ---- MINLOC / MAXLOC --------------------------------------------------------

constexpr size_t kBlock = 301;  // elements per rank's block of reduce-scatter: odd

// Few distinct values, so that ties (decided by the index) are common; for
// the float pairs a NaN here and there, and +-0.
template <typename Pair>
Pair locInput(int rank, size_t i) {
  using V = decltype(Pair{}.value);
  Pair p{};
  p.value = static_cast<V>(static_cast<int>((i * 7 + static_cast<size_t>(rank) * 3) % 5) - 2);
  if constexpr (std::is_floating_point_v<V>) {
    if ((i + static_cast<size_t>(rank)) % 23 == 0) p.value = std::numeric_limits<V>::quiet_NaN();
    if (p.value == 0 && rank % 2 == 1) p.value = -V(0);
  }
  p.index = static_cast<int32_t>((static_cast<size_t>(rank) * 5 + i * 3) % 11);
  return p;
}

// MPI's MINLOC/MAXLOC with vigil's NaN rule, written out plainly: the pair
// whose value is beyond the other's wins (a NaN is beyond every number), and
// of equal values (two NaNs are equal) the lesser index.
template <typename Pair>
Pair locFold(vigilRedOp_t op, const Pair& a, const Pair& b) {
  using V = decltype(Pair{}.value);
  auto isNan = [](V v) {
    if constexpr (std::is_floating_point_v<V>) return std::isnan(v);
    return false;
  };
  const bool nanA = isNan(a.value), nanB = isNan(b.value);
  if (nanA != nanB) return nanA ? a : b;
  if (!nanA && a.value != b.value) {
    const bool aBeyond = op == vigilMaxLoc ? a.value > b.value : a.value < b.value;
    return aBeyond ? a : b;
  }
  return a.index <= b.index ? a : b;
}

template <typename Pair>
bool samePair(const Pair& a, const Pair& b) {
  return std::memcmp(&a, &b, sizeof(Pair)) == 0;
}

template <typename Pair>
std::string show(const Pair& p) {
  return "(" + std::to_string(static_cast<double>(p.value)) + ", " + std::to_string(p.index) + ")";
}

template <typename Pair>
void expectPairs(const std::vector<Pair>& got, const std::vector<Pair>& want, size_t offset, const std::string& what) {
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(samePair(got[i], want[offset + i]))
        << what << " element " << offset + i << ": got " << show(got[i]) << ", want " << show(want[offset + i]);
  }
}

template <typename Pair>
void checkLocType(vigilDataType_t type, int n) {
  const size_t count = kBlock * static_cast<size_t>(n);
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    std::vector<Pair> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = locInput<Pair>(rank, i);
    const std::vector<Pair> inBefore = in;
    for (vigilRedOp_t op : {vigilMinLoc, vigilMaxLoc}) {
      const std::string name = op == vigilMinLoc ? "minloc" : "maxloc";
      // The folds over all ranks, and over ranks 0..rank (the prefixes).
      std::vector<Pair> all(count), prefix(count), before(count);
      for (size_t i = 0; i < count; ++i) {
        Pair acc = locInput<Pair>(0, i);
        for (int r = 1; r <= rank; ++r) {
          if (r == rank) before[i] = acc;
          acc = locFold(op, acc, locInput<Pair>(r, i));
        }
        prefix[i] = acc;
        for (int r = rank + 1; r < n; ++r) acc = locFold(op, acc, locInput<Pair>(r, i));
        all[i] = acc;
      }
      std::vector<Pair> out(count, Pair{});
      ASSERT_EQ(vigilAllReduce(in.data(), out.data(), count, type, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      expectPairs(out, all, 0, "allreduce " + name);
      std::vector<Pair> root(count, Pair{});
      ASSERT_EQ(vigilReduce(in.data(), root.data(), count, type, op, n - 1, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      if (rank == n - 1) expectPairs(root, all, 0, "reduce " + name);
      std::vector<Pair> mine(kBlock, Pair{});
      ASSERT_EQ(vigilReduceScatter(in.data(), mine.data(), kBlock, type, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      expectPairs(mine, all, static_cast<size_t>(rank) * kBlock, "reduce_scatter " + name);
      std::vector<Pair> scanned(count, Pair{});
      ASSERT_EQ(vigilScan(in.data(), scanned.data(), count, type, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      expectPairs(scanned, prefix, 0, "scan " + name);
      std::vector<Pair> exscanned(count, Pair{});
      ASSERT_EQ(vigilExscan(in.data(), exscanned.data(), count, type, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      if (rank > 0) expectPairs(exscanned, before, 0, "exscan " + name);
      // In place: the pairs come back reduced.
      std::vector<Pair> inPlace = in;
      ASSERT_EQ(vigilAllReduce(inPlace.data(), inPlace.data(), count, type, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      expectPairs(inPlace, all, 0, "in-place allreduce " + name);
    }
    for (size_t i = 0; i < count; ++i) ASSERT_TRUE(samePair(in[i], inBefore[i])) << "input changed at " << i;
  });
}

class LocReductions : public ::testing::TestWithParam<int> {};

TEST_P(LocReductions, EveryPairTypeMatchesTheReference) {
  const int n = GetParam();
  checkLocType<vigilFloat32Int32_t>(vigilFloat32Int32, n);
  checkLocType<vigilFloat64Int32_t>(vigilFloat64Int32, n);
  checkLocType<vigilInt32Int32_t>(vigilInt32Int32, n);
  checkLocType<vigilInt64Int32_t>(vigilInt64Int32, n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, LocReductions, ::testing::Values(1, 3, 5));

// MPI's use: the rank that holds the global minimum, and which one wins a tie.
TEST(LocReductions, RankOfTheExtremeAndTheLesserIndexOnTies) {
  runRanks(3, [&](int rank, vigilComm_t& comm) {
    const double values[3] = {2.5, -1.0, -1.0};  // ranks 1 and 2 tie on the minimum
    vigilFloat64Int32_t mine{values[rank], rank, 0}, least{}, most{};
    ASSERT_EQ(vigilAllReduce(&mine, &least, 1, vigilFloat64Int32, vigilMinLoc, comm, nullptr), vigilSuccess);
    ASSERT_EQ(vigilAllReduce(&mine, &most, 1, vigilFloat64Int32, vigilMaxLoc, comm, nullptr), vigilSuccess);
    EXPECT_EQ(least.value, -1.0);
    EXPECT_EQ(least.index, 1);
    EXPECT_EQ(most.value, 2.5);
    EXPECT_EQ(most.index, 0);
  });
}

// The pairs move like any other type, padding and all.
TEST(LocReductions, PairsMoveThroughEveryCollective) {
  runRanks(3, [&](int rank, vigilComm_t& comm) {
    vigilInt64Int32_t mine[2] = {{100 + rank, rank, 7}, {-rank, 10 * rank, 9}};
    vigilInt64Int32_t all[6] = {};
    ASSERT_EQ(vigilAllGather(mine, all, 2, vigilInt64Int32, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
    for (int r = 0; r < 3; ++r) {
      EXPECT_EQ(all[2 * r].value, 100 + r);
      EXPECT_EQ(all[2 * r].index, r);
      EXPECT_EQ(all[2 * r].padding, 7);
      EXPECT_EQ(all[2 * r + 1].index, 10 * r);
    }
    vigilFloat32Int32_t b{rank == 1 ? 3.5f : 0.0f, rank == 1 ? 42 : 0};
    ASSERT_EQ(vigilBcast(&b, 1, vigilFloat32Int32, 1, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(b.value, 3.5f);
    EXPECT_EQ(b.index, 42);
  });
}

// Refused before anything moves, naming the operator and the type; the communicator stays usable.
TEST(LocReductions, RefusedOutsideThePairTypes) {
  runRanks(2, [&](int, vigilComm_t& comm) {
    float x[4] = {1, 2, 3, 4};
    EXPECT_EQ(vigilAllReduce(x, x, 2, vigilFloat32, vigilMinLoc, comm, nullptr), vigilInvalidArgument);
    std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-API-003")) << text;
    EXPECT_TRUE(contains(text, "reduction minloc is defined on the (value, index) pair types only")) << text;
    EXPECT_TRUE(contains(text, "not on float32")) << text;
    vigilFloat32Int32_t p[2] = {{1, 0}, {2, 1}};
    EXPECT_EQ(vigilAllReduce(p, p, 2, vigilFloat32Int32, vigilSum, comm, nullptr), vigilInvalidArgument);
    text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-API-003")) << text;
    EXPECT_TRUE(contains(text, "reduction sum is not defined on the (value, index) pair type float32_int32")) << text;
    EXPECT_EQ(vigilReduceScatter(p, p, 1, vigilFloat32Int32, vigilMax, comm, nullptr), vigilInvalidArgument);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "reduction max is not defined")) << vigilGetLastError(comm);
    EXPECT_EQ(p[0].value, 1.0f);  // nothing was written
    ASSERT_EQ(vigilAllReduce(x, x, 4, vigilFloat32, vigilSum, comm, nullptr), vigilSuccess);
    EXPECT_EQ(x[3], 8.0f);
  });
}

// ---- Pre-multiplied sum -----------------------------------------------------

double preInput(int rank, size_t i) {
  return static_cast<double>(static_cast<int>((i + static_cast<size_t>(rank)) % 5) - 1);
}

template <typename T>
T toStored(vigilDataType_t type, double v) {
  if (type == vigilFloat16) return static_cast<T>(vigil::floatToHalf(static_cast<float>(v)));
  if (type == vigilBfloat16) return static_cast<T>(vigil::floatToBfloat16(static_cast<float>(v)));
  return static_cast<T>(v);
}

// Every rank multiplies by its own scalar (rank + 2); small integers keep
// every partial sum exact in every type, so any order gives the reference.
template <typename T>
void checkPreMulType(vigilDataType_t type, int n) {
  const size_t count = kBlock * static_cast<size_t>(n);
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    const T scalar = toStored<T>(type, rank + 2);
    vigilRedOp_t op{};
    ASSERT_EQ(vigilRedOpCreatePreMulSum(&op, const_cast<T*>(&scalar), type, vigilScalarHostImmediate, comm),
              vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_GE(static_cast<int>(op), VIGIL_REDOP_CREATED_FIRST);
    std::vector<T> in(count);
    for (size_t i = 0; i < count; ++i) in[i] = toStored<T>(type, preInput(rank, i));
    const std::vector<T> inBefore = in;
    std::vector<T> all(count), prefix(count);
    for (size_t i = 0; i < count; ++i) {
      double acc = 0;
      for (int r = 0; r < n; ++r) {
        acc += (r + 2) * preInput(r, i);
        if (r == rank) prefix[i] = toStored<T>(type, acc);
      }
      all[i] = toStored<T>(type, acc);
    }
    std::vector<T> out(count);
    ASSERT_EQ(vigilAllReduce(in.data(), out.data(), count, type, op, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(out, all) << "allreduce";
    EXPECT_EQ(in, inBefore) << "the input is scaled into the library's buffer, never in place";
    std::vector<T> root(count);
    ASSERT_EQ(vigilReduce(in.data(), root.data(), count, type, op, 0, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    if (rank == 0) {
      EXPECT_EQ(root, all) << "reduce";
    }
    std::vector<T> mine(kBlock);
    ASSERT_EQ(vigilReduceScatter(in.data(), mine.data(), kBlock, type, op, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_TRUE(std::equal(mine.begin(), mine.end(), all.begin() + static_cast<ptrdiff_t>(rank * kBlock)))
        << "reduce_scatter";
    std::vector<size_t> counts(static_cast<size_t>(n));
    for (int r = 0; r < n; ++r) counts[static_cast<size_t>(r)] = kBlock - static_cast<size_t>(r);
    std::vector<T> vmine(counts[static_cast<size_t>(rank)]);
    size_t start = 0;
    for (int r = 0; r < rank; ++r) start += counts[static_cast<size_t>(r)];
    ASSERT_EQ(vigilReduceScatterV(in.data(), vmine.data(), counts.data(), type, op, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_TRUE(std::equal(vmine.begin(), vmine.end(), all.begin() + static_cast<ptrdiff_t>(start)))
        << "reduce_scatter_v";
    std::vector<T> scanned(count);
    ASSERT_EQ(vigilScan(in.data(), scanned.data(), count, type, op, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(scanned, prefix) << "scan";
    std::vector<T> inPlace = in;
    ASSERT_EQ(vigilAllReduce(inPlace.data(), inPlace.data(), count, type, op, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(inPlace, all) << "in-place allreduce";
    EXPECT_EQ(vigilRedOpDestroy(op, comm), vigilSuccess) << vigilGetLastError(comm);
  });
}

class PreMulSum : public ::testing::TestWithParam<int> {};

TEST_P(PreMulSum, EachRankScalesItsInputBeforeTheSum) {
  const int n = GetParam();
  checkPreMulType<float>(vigilFloat32, n);
  checkPreMulType<double>(vigilFloat64, n);
  checkPreMulType<uint16_t>(vigilFloat16, n);
  checkPreMulType<uint16_t>(vigilBfloat16, n);
  checkPreMulType<int32_t>(vigilInt32, n);
  checkPreMulType<int64_t>(vigilInt64, n);
  checkPreMulType<int8_t>(vigilInt8, n);
}

INSTANTIATE_TEST_SUITE_P(Ranks, PreMulSum, ::testing::Values(1, 3, 5));

// vigilScalarDevice reads the scalar when each op runs (on a stream, in
// stream order); vigilScalarHostImmediate took its value at the create call.
TEST(PreMulSum, DeviceResidenceReadsTheScalarWhenTheOpRuns) {
  runRanks(3, [&](int rank, vigilComm_t& comm) {
    double live = 2.0, fixed = 2.0;
    vigilRedOp_t device{}, immediate{};
    ASSERT_EQ(vigilRedOpCreatePreMulSum(&device, &live, vigilFloat64, vigilScalarDevice, comm), vigilSuccess);
    ASSERT_EQ(vigilRedOpCreatePreMulSum(&immediate, &fixed, vigilFloat64, vigilScalarHostImmediate, comm),
              vigilSuccess);
    live = 0.5 * (rank + 1);  // 0.5, 1, 1.5
    fixed = 100.0;
    const double x = 4.0;
    double a = 0, b = 0;
    ASSERT_EQ(vigilAllReduce(&x, &a, 1, vigilFloat64, device, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
    ASSERT_EQ(vigilAllReduce(&x, &b, 1, vigilFloat64, immediate, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(a, 4.0 * (0.5 + 1.0 + 1.5));
    EXPECT_EQ(b, 4.0 * 2.0 * 3);
    // Queued on a stream: each op reads the scalar as it runs, after the copy before it.
    vigilStream_t stream = nullptr;
    ASSERT_EQ(vigilStreamCreate(&stream), vigilSuccess);
    double scalars[2] = {1.0, 3.0}, first = 0, second = 0;
    live = 0;
    ASSERT_EQ(vigilMemcpyAsync(&live, &scalars[0], sizeof live, stream), vigilSuccess);
    ASSERT_EQ(vigilAllReduce(&x, &first, 1, vigilFloat64, device, comm, stream), vigilSuccess);
    ASSERT_EQ(vigilMemcpyAsync(&live, &scalars[1], sizeof live, stream), vigilSuccess);
    ASSERT_EQ(vigilAllReduce(&x, &second, 1, vigilFloat64, device, comm, stream), vigilSuccess);
    // Destroyed while queued: the queued ops keep what they need.
    ASSERT_EQ(vigilRedOpDestroy(device, comm), vigilSuccess);
    ASSERT_EQ(vigilStreamSynchronize(stream), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(first, 4.0 * 3);
    EXPECT_EQ(second, 4.0 * 9);
    EXPECT_EQ(vigilStreamDestroy(stream), vigilSuccess);
    EXPECT_EQ(vigilRedOpDestroy(immediate, comm), vigilSuccess);
  });
}

// Each misuse is VG-API-003 (or VG-API-001 for a NULL), names what is wrong,
// moves nothing, and leaves the communicator usable.
TEST(PreMulSum, MisuseIsRefusedAndNamed) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    float s = 2.0f, x[2] = {1.0f, 1.0f};
    double d[2] = {1.0, 1.0};
    vigilRedOp_t op{};
    auto expectRefusal = [&](vigilResult_t rc, const char* id, const std::string& part) {
      EXPECT_EQ(rc, vigilInvalidArgument);
      const std::string text = vigilGetLastError(comm);
      EXPECT_TRUE(contains(text, id)) << text;
      EXPECT_TRUE(contains(text, part)) << text;
    };
    ASSERT_EQ(vigilRedOpCreatePreMulSum(&op, &s, vigilFloat32, vigilScalarHostImmediate, comm), vigilSuccess);
    expectRefusal(vigilAllReduce(d, d, 2, vigilFloat64, op, comm, nullptr), "VG-API-003",
                  "is a pre-multiplied sum of float32, not of float64");
    EXPECT_EQ(d[0], 1.0);
    ASSERT_EQ(vigilRedOpDestroy(op, comm), vigilSuccess);
    expectRefusal(vigilAllReduce(x, x, 2, vigilFloat32, op, comm, nullptr), "VG-API-003",
                  "is not an operator of this communicator: made by another communicator, or destroyed");
    expectRefusal(vigilRedOpDestroy(op, comm), "VG-API-003", "destroyed already");
    expectRefusal(vigilRedOpDestroy(vigilSum, comm), "VG-API-003", "is built in");
    vigilInt32Int32_t pair{};
    expectRefusal(vigilRedOpCreatePreMulSum(&op, &pair, vigilInt32Int32, vigilScalarHostImmediate, comm), "VG-API-003",
                  "reduce with vigilMinLoc and vigilMaxLoc only");
    expectRefusal(vigilRedOpCreatePreMulSum(&op, &s, vigilFloat32, static_cast<vigilScalarResidence_t>(7), comm),
                  "VG-API-003", "residence 7 is not a vigilScalarResidence_t");
    expectRefusal(vigilRedOpCreatePreMulSum(&op, nullptr, vigilFloat32, vigilScalarHostImmediate, comm), "VG-API-001",
                  "scalar is NULL");
    expectRefusal(vigilRedOpCreatePreMulSum(nullptr, &s, vigilFloat32, vigilScalarHostImmediate, comm), "VG-API-001",
                  "op is NULL");
    // Another communicator's operator (a split of this one) is not this one's.
    vigilComm_t child = nullptr;
    ASSERT_EQ(vigilCommSplit(comm, 0, rank, &child), vigilSuccess) << vigilGetLastError(comm);
    vigilRedOp_t childOp{};
    ASSERT_EQ(vigilRedOpCreatePreMulSum(&childOp, &s, vigilFloat32, vigilScalarHostImmediate, child), vigilSuccess);
    expectRefusal(vigilAllReduce(x, x, 2, vigilFloat32, childOp, comm, nullptr), "VG-API-003",
                  "is not an operator of this communicator");
    ASSERT_EQ(vigilAllReduce(x, x, 2, vigilFloat32, childOp, child, nullptr), vigilSuccess) << vigilGetLastError(child);
    EXPECT_EQ(x[0], 4.0f);
    EXPECT_EQ(vigilRedOpDestroy(childOp, child), vigilSuccess);
    EXPECT_EQ(vigilCommDestroy(child), vigilSuccess);
    // The reduction value the library uses inside is not one a caller may pass.
    expectRefusal(vigilAllReduce(x, x, 2, vigilFloat32, static_cast<vigilRedOp_t>(64), comm, nullptr), "VG-API-003",
                  "reduction 64 is not a vigilRedOp_t");
    ASSERT_EQ(vigilAllReduce(x, x, 2, vigilFloat32, vigilSum, comm, nullptr), vigilSuccess);
    EXPECT_EQ(x[1], 8.0f);
  });
}

// A rank that pre-multiplies while another sums is a mismatch that both
// report (the fingerprint carries the pre-multiplied sum, not the handle).
TEST(PreMulSum, AgainstAPlainSumIsAMismatchNamedOnBothRanks) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    float s = 2.0f, x[4] = {1, 1, 1, 1};
    vigilRedOp_t op = vigilSum;
    if (rank == 0) {
      ASSERT_EQ(vigilRedOpCreatePreMulSum(&op, &s, vigilFloat32, vigilScalarHostImmediate, comm), vigilSuccess);
    }
    EXPECT_EQ(vigilAllReduce(x, x, 4, vigilFloat32, op, comm, nullptr), vigilMismatch);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-OP-002")) << text;
    EXPECT_TRUE(contains(text, "premulsum")) << text;
    EXPECT_TRUE(contains(text, "redop ")) << text;
  });
}

}  // namespace
