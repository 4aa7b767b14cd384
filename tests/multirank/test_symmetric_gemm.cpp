// The GEMM kernels on symmetric buffers (vigilAllGatherGemm,
// vigilGemmReduceScatter) against their sequential versions, two ways:
//  - bit for bit against the same OpenBLAS GEMM of each rank's block of rows
//    (after vigilAllGather), summed in rank order: the same arithmetic;
//  - within the rounding bound of a dot product of length k (docs/symmetric.md)
//    against the exact product: one GEMM over all rows is not the same
//    arithmetic (OpenBLAS picks its kernels, and so its order of summation,
//    by shape), so its bits may differ in the last places.
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/thread_ranks.hpp"
#include "vigil/vigil.h"

namespace {

using vigil::test::runRanks;

const bool kSmallHeap = ::setenv("VIGIL_SYMMETRIC_HEAP", "64M", /*overwrite=*/0) == 0;
// One OpenBLAS thread: threads-as-ranks already fill the cores, and the
// sanitizers see no threads of an uninstrumented library. vigil leaves the
// count alone when OPENBLAS_NUM_THREADS is set.
const bool kOneBlasThread = [] {
  ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
  openblas_set_num_threads(1);
  return true;
}();

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

#define OK(call, comm) ASSERT_EQ((call), vigilSuccess) << vigilGetLastError(comm)

// Deterministic values that any rank can recompute for any other: real
// fractions, so that a sum in another order would round differently.
template <class T>
std::vector<T> values(size_t count, int rank, int salt) {
  std::vector<T> v(count);
  uint64_t s = 0x9e3779b97f4a7c15ULL * static_cast<uint64_t>(rank * 131 + salt + 1);
  for (T& x : v) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    x = static_cast<T>(static_cast<double>(s >> 11) / static_cast<double>(1ULL << 53) * 2.0 - 1.0);
  }
  return v;
}

void gemm(const float* a, const float* b, float* c, size_t m, size_t n, size_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(k), b, static_cast<int>(n), 0.0f, c, static_cast<int>(n));
}
void gemm(const double* a, const double* b, double* c, size_t m, size_t n, size_t k) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0, a, static_cast<int>(k), b, static_cast<int>(n), 0.0, c, static_cast<int>(n));
}

// |got - exact| <= 2 (terms + 2) u sum|a_i b_i| for a sum of `terms` products
// (the classic bound gamma_n with room for FMA and blocking), u the unit
// roundoff of T; `exact` and `magnitude` in double from the same terms.
template <class T>
bool withinRounding(T got, double exact, double magnitude, size_t terms) {
  const double u = std::numeric_limits<T>::epsilon() / 2;
  return std::fabs(static_cast<double>(got) - exact) <= 2.0 * static_cast<double>(terms + 2) * u * magnitude;
}

template <class T>
constexpr vigilDataType_t typeOf() {
  return sizeof(T) == 4 ? vigilFloat32 : vigilFloat64;
}

struct Shape {
  size_t rows, k, n;
};
const Shape kShapes[] = {{1, 1, 1}, {7, 13, 5}, {64, 96, 33}, {130, 257, 64}, {5, 0, 3}};

template <class T>
void allGatherGemmAgrees(int rank, int nranks, vigilComm_t comm) {
  for (const Shape& s : kShapes) {
    const size_t m = s.rows * static_cast<size_t>(nranks);
    void* x = nullptr;
    OK(vigilMemAlloc(comm, std::max<size_t>(1, s.rows * s.k) * sizeof(T), &x), comm);
    const std::vector<T> mine = values<T>(s.rows * s.k, rank, 1);
    if (!mine.empty()) std::memcpy(x, mine.data(), mine.size() * sizeof(T));
    const std::vector<T> w = values<T>(s.k * s.n, rank, 2);  // each rank's own columns
    std::vector<T> out(m * s.n, T(-7)), expected(m * s.n), gathered(m * s.k);
    OK(vigilAllGatherGemm(x, w.data(), out.data(), s.rows, s.k, s.n, typeOf<T>(), comm, nullptr), comm);
    // Sequential: vigil's allgather, then the GEMM of each rank's block.
    OK(vigilAllGather(mine.data(), gathered.data(), mine.size(), typeOf<T>(), comm, nullptr), comm);
    for (int r = 0; r < nranks && s.k > 0; ++r) {
      const size_t at = static_cast<size_t>(r) * s.rows;
      gemm(gathered.data() + at * s.k, w.data(), expected.data() + at * s.n, s.rows, s.n, s.k);
    }
    if (s.k == 0) std::fill(expected.begin(), expected.end(), T(0));
    ASSERT_EQ(std::memcmp(out.data(), expected.data(), out.size() * sizeof(T)), 0)
        << "rows " << s.rows << " k " << s.k << " n " << s.n << " on " << nranks << " ranks";
    // And the exact product of all rows, within rounding.
    for (size_t i = 0; i < m; ++i) {
      for (size_t j = 0; j < s.n; ++j) {
        double exact = 0, magnitude = 0;
        for (size_t l = 0; l < s.k; ++l) {
          const double p = static_cast<double>(gathered[i * s.k + l]) * static_cast<double>(w[l * s.n + j]);
          exact += p;
          magnitude += std::fabs(p);
        }
        ASSERT_TRUE(withinRounding(out[i * s.n + j], exact, magnitude, s.k))
            << "row " << i << " col " << j << ": " << out[i * s.n + j] << " vs " << exact;
      }
    }
    if (!mine.empty()) {
      ASSERT_EQ(std::memcmp(x, mine.data(), mine.size() * sizeof(T)), 0) << "x changed";
    }
    OK(vigilMemFree(comm, x), comm);
  }
}

template <class T>
void gemmReduceScatterAgrees(int rank, int nranks, vigilComm_t comm) {
  for (const Shape& s : kShapes) {
    const size_t m = s.rows * static_cast<size_t>(nranks);
    void* work = nullptr;
    OK(vigilMemAlloc(comm, std::max<size_t>(1, m * s.n) * sizeof(T), &work), comm);
    const std::vector<T> a = values<T>(m * s.k, rank, 3);
    const std::vector<T> w = values<T>(s.k * s.n, rank, 4);
    std::vector<T> out(s.rows * s.n, T(-7));
    OK(vigilGemmReduceScatter(a.data(), w.data(), out.data(), work, s.rows, s.k, s.n, typeOf<T>(), comm, nullptr),
       comm);
    // Sequential: every rank's GEMM of this rank's block of rows, summed in
    // rank order; and the exact sum of all products, within rounding.
    const size_t first = static_cast<size_t>(rank) * s.rows;
    std::vector<T> expected(s.rows * s.n, T(0)), partial(s.rows * s.n, T(0));
    std::vector<double> exact(s.rows * s.n, 0.0), magnitude(s.rows * s.n, 0.0);
    for (int r = 0; r < nranks; ++r) {
      const std::vector<T> ar = values<T>(m * s.k, r, 3), wr = values<T>(s.k * s.n, r, 4);
      if (s.k > 0) gemm(ar.data() + first * s.k, wr.data(), partial.data(), s.rows, s.n, s.k);
      for (size_t i = 0; i < expected.size(); ++i) expected[i] = r == 0 ? partial[i] : expected[i] + partial[i];
      for (size_t i = 0; i < s.rows; ++i) {
        for (size_t j = 0; j < s.n; ++j) {
          for (size_t l = 0; l < s.k; ++l) {
            const double p = static_cast<double>(ar[(first + i) * s.k + l]) * static_cast<double>(wr[l * s.n + j]);
            exact[i * s.n + j] += p;
            magnitude[i * s.n + j] += std::fabs(p);
          }
        }
      }
    }
    ASSERT_EQ(std::memcmp(out.data(), expected.data(), out.size() * sizeof(T)), 0)
        << "rows " << s.rows << " k " << s.k << " n " << s.n << " on " << nranks << " ranks";
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_TRUE(withinRounding(out[i], exact[i], magnitude[i], s.k + static_cast<size_t>(nranks)))
          << "element " << i << ": " << out[i] << " vs " << exact[i];
    }
    OK(vigilMemFree(comm, work), comm);
  }
}

class SymmetricGemm : public ::testing::TestWithParam<int> {};

TEST_P(SymmetricGemm, AllGatherGemmEqualsAllGatherThenGemm) {
  runRanks(GetParam(), [](int rank, vigilComm_t& comm) {
    int n = 0;
    vigilCommCount(comm, &n);
    allGatherGemmAgrees<float>(rank, n, comm);
    allGatherGemmAgrees<double>(rank, n, comm);
  });
}

TEST_P(SymmetricGemm, GemmReduceScatterEqualsGemmThenSumInRankOrder) {
  runRanks(GetParam(), [](int rank, vigilComm_t& comm) {
    int n = 0;
    vigilCommCount(comm, &n);
    gemmReduceScatterAgrees<float>(rank, n, comm);
    gemmReduceScatterAgrees<double>(rank, n, comm);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, SymmetricGemm, ::testing::Values(1, 2, 3, 5));

TEST(SymmetricGemmErrors, DifferentShapesFailEveryRank) {
  runRanks(3, [](int rank, vigilComm_t& comm) {
    void* x = nullptr;
    OK(vigilMemAlloc(comm, 4096, &x), comm);
    std::vector<float> w(64 * 64), out(3 * 8 * 64);
    const size_t n = rank == 1 ? 16 : 8;
    EXPECT_EQ(vigilAllGatherGemm(x, w.data(), out.data(), 8, 8, n, vigilFloat32, comm, nullptr), vigilMismatch);
    std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-SYM-001")) << text;
    EXPECT_TRUE(contains(text, "vigilAllGatherGemm of 8 rows per rank and rank")) << text;
    EXPECT_TRUE(contains(text, "out holds no result")) << text;
    // The next call works: nothing was left behind.
    OK(vigilAllGatherGemm(x, w.data(), out.data(), 8, 8, 8, vigilFloat32, comm, nullptr), comm);
    OK(vigilMemFree(comm, x), comm);
  });
}

TEST(SymmetricGemmErrors, BadArgumentsAreErrorsBeforeAnyWork) {
  runRanks(2, [](int, vigilComm_t& comm) {
    void* work = nullptr;
    OK(vigilMemAlloc(comm, 2 * 4 * 4 * sizeof(float), &work), comm);
    std::vector<float> a(2 * 4 * 4), w(4 * 4), out(4 * 4), notSymmetric(64);
    // Another data type.
    EXPECT_EQ(vigilGemmReduceScatter(a.data(), w.data(), out.data(), work, 4, 4, 4, vigilInt32, comm, nullptr),
              vigilInvalidArgument);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-API-002")) << vigilGetLastError(comm);
    // A workspace too small for nranks * rows * n elements: the overrun is named.
    EXPECT_EQ(vigilGemmReduceScatter(a.data(), w.data(), out.data(), work, 4, 4, 5, vigilFloat32, comm, nullptr),
              vigilInvalidArgument);
    std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-SYM-003")) << text;
    EXPECT_TRUE(contains(text, "workspace covers bytes [0, 160)")) << text;
    EXPECT_TRUE(contains(text, "32 bytes past its end")) << text;
    // x outside the heap.
    EXPECT_EQ(vigilAllGatherGemm(notSymmetric.data(), w.data(), out.data(), 1, 4, 4, vigilFloat32, comm, nullptr),
              vigilInvalidArgument);
    text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-SYM-003")) << text;
    EXPECT_TRUE(contains(text, "x ")) << text;
    // out on top of the workspace.
    EXPECT_EQ(vigilGemmReduceScatter(a.data(), w.data(), work, work, 4, 4, 4, vigilFloat32, comm, nullptr),
              vigilInvalidArgument);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-API-006")) << vigilGetLastError(comm);
    // None of these left a rank inside a call: a good one runs.
    OK(vigilGemmReduceScatter(a.data(), w.data(), out.data(), work, 4, 4, 4, vigilFloat32, comm, nullptr), comm);
    OK(vigilMemFree(comm, work), comm);
  });
}

TEST(SymmetricGemmErrors, OnAStreamInOrder) {
  runRanks(2, [](int rank, vigilComm_t& comm) {
    void* x = nullptr;
    OK(vigilMemAlloc(comm, 16 * 8 * sizeof(float), &x), comm);
    const std::vector<float> mine = values<float>(16 * 8, rank, 5);
    std::memcpy(x, mine.data(), mine.size() * sizeof(float));
    const std::vector<float> w = values<float>(8 * 4, rank, 6);
    std::vector<float> onStream(2 * 16 * 4), blocking(2 * 16 * 4);
    vigilStream_t s = nullptr;
    OK(vigilStreamCreate(&s), comm);
    OK(vigilAllGatherGemm(x, w.data(), onStream.data(), 16, 8, 4, vigilFloat32, comm, s), comm);
    OK(vigilStreamSynchronize(s), comm);
    OK(vigilStreamDestroy(s), comm);
    OK(vigilAllGatherGemm(x, w.data(), blocking.data(), 16, 8, 4, vigilFloat32, comm, nullptr), comm);
    EXPECT_EQ(std::memcmp(onStream.data(), blocking.data(), blocking.size() * sizeof(float)), 0);
    OK(vigilMemFree(comm, x), comm);
  });
}

}  // namespace
