// The v-variants (vigilAllGatherV, vigilGatherV, vigilScatterV,
// vigilReduceScatterV) and the prefix reductions (vigilScan, vigilExscan) on
// thread-ranks, against references computed here: odd rank counts, empty
// blocks, displacements with gaps and out of rank order, in-place forms,
// streams that outlive the caller's arrays; and the errors: a count array
// that contradicts the call's count, missing arrays, ranks that disagree on
// the counts. Over shared memory (default) and sockets (tcp/).

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "common/thread_ranks.hpp"

namespace {

using vigil::test::runRanks;

constexpr int32_t kUnwritten = -7;

// Rank p's block: some empty, sizes that no vector width divides.
size_t blockCount(int p) {
  static constexpr size_t kCounts[] = {5, 0, 9, 1, 12, 3, 0, 7};
  return kCounts[p % 8];
}

int32_t value(int rank, size_t i) {
  return static_cast<int32_t>(rank * 100003 + static_cast<int>(i) * 7 + 1);
}

// Blocks in reverse rank order with a gap of 2 before each: where rank p's
// block starts, and the buffer's whole size.
struct Layout {
  std::vector<size_t> counts, displs;
  size_t total = 0;
};

Layout reversedWithGaps(int n) {
  Layout l;
  l.counts.resize(static_cast<size_t>(n));
  l.displs.resize(static_cast<size_t>(n));
  for (int p = n - 1; p >= 0; --p) {
    l.total += 2;
    l.counts[static_cast<size_t>(p)] = blockCount(p);
    l.displs[static_cast<size_t>(p)] = l.total;
    l.total += blockCount(p);
  }
  return l;
}

// What a buffer laid out by `l` holds once every block arrived: the gaps unwritten.
std::vector<int32_t> gathered(const Layout& l, int n) {
  std::vector<int32_t> want(l.total, kUnwritten);
  for (int p = 0; p < n; ++p) {
    for (size_t i = 0; i < l.counts[static_cast<size_t>(p)]; ++i)
      want[l.displs[static_cast<size_t>(p)] + i] = value(p, i);
  }
  return want;
}

std::vector<int32_t> ownBlock(int rank) {
  std::vector<int32_t> mine(blockCount(rank));
  for (size_t i = 0; i < mine.size(); ++i) mine[i] = value(rank, i);
  return mine;
}

class VCollectives : public ::testing::TestWithParam<int> {};

TEST_P(VCollectives, AllGatherV) {
  const int n = GetParam();
  const Layout l = reversedWithGaps(n);
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    const std::vector<int32_t> mine = ownBlock(rank);
    std::vector<int32_t> out(l.total, kUnwritten);
    ASSERT_EQ(vigilAllGatherV(mine.data(), mine.size(), out.data(), l.counts.data(), l.displs.data(), vigilInt32, comm,
                              nullptr),
              vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(out, gathered(l, n));
    // In place: this rank's block already sits at rdispls[rank].
    std::vector<int32_t> inPlace(l.total, kUnwritten);
    std::copy(mine.begin(), mine.end(), inPlace.begin() + static_cast<ptrdiff_t>(l.displs[static_cast<size_t>(rank)]));
    ASSERT_EQ(vigilAllGatherV(inPlace.data() + l.displs[static_cast<size_t>(rank)], mine.size(), inPlace.data(),
                              l.counts.data(), l.displs.data(), vigilInt32, comm, nullptr),
              vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(inPlace, gathered(l, n));
  });
}

TEST_P(VCollectives, GatherVAndScatterV) {
  const int n = GetParam();
  const Layout l = reversedWithGaps(n);
  const int root = n - 1;
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    const bool isRoot = rank == root;
    const std::vector<int32_t> mine = ownBlock(rank);
    std::vector<int32_t> out(isRoot ? l.total : 0, kUnwritten);
    // Only the root's arrays and many-block buffer are read: the others pass NULL.
    ASSERT_EQ(vigilGatherV(mine.data(), mine.size(), isRoot ? out.data() : nullptr, isRoot ? l.counts.data() : nullptr,
                           isRoot ? l.displs.data() : nullptr, vigilInt32, root, comm, nullptr),
              vigilSuccess)
        << vigilGetLastError(comm);
    if (isRoot) {
      EXPECT_EQ(out, gathered(l, n));
    }
    // Back out again: every rank gets its own block.
    const std::vector<int32_t> all = gathered(l, n);
    std::vector<int32_t> got(mine.size() + 1, kUnwritten);
    ASSERT_EQ(
        vigilScatterV(isRoot ? all.data() : nullptr, isRoot ? l.counts.data() : nullptr,
                      isRoot ? l.displs.data() : nullptr, got.data(), mine.size(), vigilInt32, root, comm, nullptr),
        vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_TRUE(std::equal(mine.begin(), mine.end(), got.begin()));
    EXPECT_EQ(got.back(), kUnwritten) << "written past the block";
  });
}

// rank r's input for reduce_scatterv: every rank's block, one after another.
std::vector<int64_t> rsInput(int rank, size_t total) {
  std::vector<int64_t> in(total);
  for (size_t i = 0; i < total; ++i) in[i] = static_cast<int64_t>((i * 31 + 7) % 97) * (rank + 1) - 40 * rank;
  return in;
}

TEST_P(VCollectives, ReduceScatterV) {
  const int n = GetParam();
  std::vector<size_t> counts(static_cast<size_t>(n));
  size_t total = 0;
  for (int p = 0; p < n; ++p) total += counts[static_cast<size_t>(p)] = blockCount(p + 2);
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    size_t offset = 0;
    for (int p = 0; p < rank; ++p) offset += counts[static_cast<size_t>(p)];
    const size_t mineCount = counts[static_cast<size_t>(rank)];
    for (vigilRedOp_t op : {vigilSum, vigilMax, vigilBxor}) {
      std::vector<int64_t> want(mineCount);
      for (size_t i = 0; i < mineCount; ++i) {
        int64_t acc = rsInput(0, total)[offset + i];
        for (int r = 1; r < n; ++r) {
          const int64_t x = rsInput(r, total)[offset + i];
          acc = op == vigilSum ? acc + x : op == vigilMax ? std::max(acc, x) : acc ^ x;
        }
        want[i] = acc;
      }
      const std::vector<int64_t> in = rsInput(rank, total);
      std::vector<int64_t> out(mineCount + 1, kUnwritten);
      ASSERT_EQ(vigilReduceScatterV(in.data(), out.data(), counts.data(), vigilInt64, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), out.begin())) << "op " << op;
      EXPECT_EQ(out.back(), kUnwritten) << "written past the block, op " << op;
      // In place: the result lands on this rank's block of the input.
      std::vector<int64_t> inPlace = rsInput(rank, total);
      ASSERT_EQ(
          vigilReduceScatterV(inPlace.data(), inPlace.data() + offset, counts.data(), vigilInt64, op, comm, nullptr),
          vigilSuccess)
          << vigilGetLastError(comm);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), inPlace.begin() + static_cast<ptrdiff_t>(offset)))
          << "in place, op " << op;
    }
  });
}

int64_t scanInput(int rank, size_t i) {
  return static_cast<int64_t>((rank * 13 + static_cast<int>(i) * 5) % 11) - 3 + (i % 4 == 0 ? 0 : 1);
}

int64_t fold(vigilRedOp_t op, int64_t a, int64_t b) {
  switch (op) {
    case vigilSum: return a + b;
    case vigilProd: return a * b;
    case vigilMax: return std::max(a, b);
    case vigilMin: return std::min(a, b);
    case vigilBand: return a & b;
    case vigilBor: return a | b;
    default: return (a != 0) != (b != 0);  // lxor
  }
}

int64_t identity(vigilRedOp_t op) {
  switch (op) {
    case vigilProd: return 1;
    case vigilMax: return std::numeric_limits<int64_t>::lowest();
    case vigilMin: return std::numeric_limits<int64_t>::max();
    case vigilBand: return -1;
    default: return 0;
  }
}

TEST_P(VCollectives, ScanAndExscan) {
  const int n = GetParam();
  constexpr size_t kCount = 37;
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    std::vector<int64_t> in(kCount);
    for (size_t i = 0; i < kCount; ++i) in[i] = scanInput(rank, i);
    for (vigilRedOp_t op : {vigilSum, vigilProd, vigilMax, vigilMin, vigilBand, vigilBor, vigilLxor}) {
      std::vector<int64_t> inclusive(kCount), exclusive(kCount);
      for (size_t i = 0; i < kCount; ++i) {
        int64_t acc = identity(op);
        for (int r = 0; r < rank; ++r) acc = r == 0 ? scanInput(0, i) : fold(op, acc, scanInput(r, i));
        exclusive[i] = acc;
        inclusive[i] = rank == 0 ? scanInput(0, i) : fold(op, acc, scanInput(rank, i));
      }
      std::vector<int64_t> out(kCount, kUnwritten);
      ASSERT_EQ(vigilScan(in.data(), out.data(), kCount, vigilInt64, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      EXPECT_EQ(out, inclusive) << "scan op " << op;
      std::vector<int64_t> ex(kCount, kUnwritten);
      ASSERT_EQ(vigilExscan(in.data(), ex.data(), kCount, vigilInt64, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      EXPECT_EQ(ex, exclusive) << "exscan op " << op;
      // In place.
      std::vector<int64_t> inPlace = in;
      ASSERT_EQ(vigilExscan(inPlace.data(), inPlace.data(), kCount, vigilInt64, op, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      EXPECT_EQ(inPlace, exclusive) << "exscan in place, op " << op;
    }
  });
}

// Floating types: a running average, and rank 0's exclusive max is -inf.
TEST_P(VCollectives, ScanOnFloats) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    const double mine[2] = {static_cast<double>(rank + 1), -2.0 * rank};
    double avg[2] = {0, 0}, exMax[2] = {0, 0};
    ASSERT_EQ(vigilScan(mine, avg, 2, vigilFloat64, vigilAvg, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(avg[0], (rank + 2) / 2.0);  // (1 + ... + (rank+1)) / (rank+1)
    EXPECT_EQ(avg[1], -static_cast<double>(rank));
    ASSERT_EQ(vigilExscan(mine, exMax, 2, vigilFloat64, vigilMax, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    if (rank == 0) {
      EXPECT_TRUE(std::isinf(exMax[0]) && exMax[0] < 0);
      EXPECT_TRUE(std::isinf(exMax[1]) && exMax[1] < 0);
    } else {
      EXPECT_EQ(exMax[0], static_cast<double>(rank));
      EXPECT_EQ(exMax[1], 0.0);
    }
    uint16_t half[1] = {0x3C00};  // 1.0 in float16
    uint16_t halfOut[1] = {0};
    ASSERT_EQ(vigilExscan(half, halfOut, 1, vigilFloat16, vigilProd, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(halfOut[0], 0x3C00) << "1.0 at every rank, the identity at rank 0";
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, VCollectives, ::testing::Values(1, 3, 5, 6));

// On a stream the call returns before the op runs: the arrays may be gone by then.
TEST(VCollectives, StreamKeepsItsOwnCopyOfTheArrays) {
  constexpr int n = 3;
  const Layout l = reversedWithGaps(n);
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    vigilStream_t stream = nullptr;
    ASSERT_EQ(vigilStreamCreate(&stream), vigilSuccess);
    const std::vector<int32_t> mine = ownBlock(rank);
    std::vector<int32_t> out(l.total, kUnwritten);
    // Hold the stream until the arrays are overwritten.
    std::atomic<bool> release{false};
    ASSERT_EQ(vigilLaunchHostFunc(
                  stream, [](void* flag) { static_cast<std::atomic<bool>*>(flag)->wait(false); }, &release),
              vigilSuccess);
    {
      std::vector<size_t> counts = l.counts, displs = l.displs;
      ASSERT_EQ(
          vigilAllGatherV(mine.data(), mine.size(), out.data(), counts.data(), displs.data(), vigilInt32, comm, stream),
          vigilSuccess)
          << vigilGetLastError(comm);
      std::fill(counts.begin(), counts.end(), 999999);
      std::fill(displs.begin(), displs.end(), 1u << 30);
    }
    release.store(true);
    release.notify_one();
    ASSERT_EQ(vigilStreamSynchronize(stream), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(out, gathered(l, n));
    vigilStreamDestroy(stream);
  });
}

std::string lastError(vigilComm_t comm) {
  return vigilGetLastError(comm);
}

// counts[rank] against the call's own count: refused on the calling rank, nothing moves, the communicator stays usable.
TEST(VCollectives, OwnCountContradictingTheArrayIsRefused) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    const size_t counts[2] = {3, 4}, displs[2] = {0, 3};
    int32_t send[4] = {1, 2, 3, 4}, out[7] = {};
    const size_t wrong = rank == 0 ? 4 : 3;
    EXPECT_EQ(vigilAllGatherV(send, wrong, out, counts, displs, vigilInt32, comm, nullptr), vigilInvalidArgument);
    std::string text = lastError(comm);
    EXPECT_NE(text.find("VG-API-023"), std::string::npos) << text;
    EXPECT_NE(text.find("recvcounts[" + std::to_string(rank) + "] = " + std::to_string(counts[rank]) +
                        " but sendcount = " + std::to_string(wrong)),
              std::string::npos)
        << text;
    EXPECT_EQ(vigilAllGatherV(send, counts[rank], out, nullptr, displs, vigilInt32, comm, nullptr),
              vigilInvalidArgument);
    text = lastError(comm);
    EXPECT_NE(text.find("VG-API-001"), std::string::npos) << text;
    EXPECT_NE(text.find("recvcounts and rdispls must both be given"), std::string::npos) << text;
    ASSERT_EQ(vigilAllGatherV(send, counts[rank], out, counts, displs, vigilInt32, comm, nullptr), vigilSuccess)
        << lastError(comm);
    EXPECT_EQ(out[3], 1);
  });
  // The root's own block in gatherv and scatterv.
  runRanks(1, [&](int, vigilComm_t& comm) {
    const size_t counts[1] = {4}, displs[1] = {0};
    int32_t a[4] = {}, b[4] = {};
    EXPECT_EQ(vigilGatherV(a, 3, b, counts, displs, vigilInt32, 0, comm, nullptr), vigilInvalidArgument);
    std::string text = lastError(comm);
    EXPECT_NE(text.find("VG-API-023"), std::string::npos) << text;
    EXPECT_NE(text.find("recvcounts[0] = 4 but sendcount = 3"), std::string::npos) << text;
    EXPECT_EQ(vigilScatterV(a, counts, displs, b, 3, vigilInt32, 0, comm, nullptr), vigilInvalidArgument);
    text = lastError(comm);
    EXPECT_NE(text.find("sendcounts[0] = 4 but recvcount = 3"), std::string::npos) << text;
  });
}

TEST(VCollectives, MissingArraysAndBuffersAreRefused) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    const size_t counts[2] = {3, 4};
    int64_t buf[7] = {};
    EXPECT_EQ(vigilReduceScatterV(buf, buf + 3 * rank, nullptr, vigilInt64, vigilSum, comm, nullptr),
              vigilInvalidArgument);
    std::string text = lastError(comm);
    EXPECT_NE(text.find("VG-API-001"), std::string::npos) << text;
    EXPECT_NE(text.find("recvcounts is NULL"), std::string::npos) << text;
    EXPECT_EQ(vigilReduceScatterV(buf, nullptr, counts, vigilInt64, vigilSum, comm, nullptr), vigilInvalidArgument);
    text = lastError(comm);
    EXPECT_NE(text.find("recvbuff is NULL but holds " + std::to_string(counts[rank]) + " elements of int64"),
              std::string::npos)
        << text;
    // Partly overlapping, not the in-place form.
    EXPECT_EQ(vigilReduceScatterV(buf, buf + 1, counts, vigilInt64, vigilSum, comm, nullptr), vigilInvalidArgument);
    text = lastError(comm);
    EXPECT_NE(text.find("VG-API-006"), std::string::npos) << text;
    EXPECT_EQ(vigilScan(buf, buf + 1, 3, vigilFloat32, vigilBand, comm, nullptr), vigilInvalidArgument);
    text = lastError(comm);
    EXPECT_NE(text.find("VG-API-003"), std::string::npos) << text;
    // Still usable, and both ranks agree.
    int64_t out[4] = {};
    ASSERT_EQ(vigilReduceScatterV(buf, out, counts, vigilInt64, vigilSum, comm, nullptr), vigilSuccess)
        << lastError(comm);
  });
}

// Every rank passes its own recvcounts, with the same total: the digest in the fingerprint tells them apart.
TEST(VCollectives, RanksDisagreeingOnTheCountsAreNamed) {
  runRanks(3, [&](int rank, vigilComm_t& comm) {
    std::vector<size_t> counts = {2, 2, 2};
    if (rank == 2) counts = {2, 2, 2};
    if (rank == 0) counts = {2, 3, 1};  // rank 0's idea of rank 1's and rank 2's blocks
    const std::vector<size_t> displs = {0, 2, 5};
    std::vector<int32_t> mine(counts[static_cast<size_t>(rank)], rank), out(8, kUnwritten);
    EXPECT_EQ(
        vigilAllGatherV(mine.data(), mine.size(), out.data(), counts.data(), displs.data(), vigilInt32, comm, nullptr),
        vigilMismatch);
    const std::string text = lastError(comm);
    EXPECT_NE(text.find("VG-OP-002"), std::string::npos) << text;
    EXPECT_NE(text.find("allgatherv"), std::string::npos) << text;
  });
}

// The root expects another size from a rank than that rank sends: both are told.
TEST(VCollectives, GatherVBlockOfAnotherSizeIsNamedOnBothRanks) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    const size_t counts[2] = {2, 5}, displs[2] = {0, 2};
    int32_t mine[3] = {1, 2, 3}, out[7] = {};
    const size_t sendcount = rank == 0 ? 2 : 3;  // rank 1 sends 3, the root expects 5
    vigilResult_t result = vigilGatherV(mine, sendcount, out, counts, displs, vigilInt32, 0, comm, nullptr);
    // The sender's message may have left before the root judged it: its next call reports it.
    if (rank == 1 && result == vigilSuccess) result = vigilBarrier(comm, nullptr);
    EXPECT_EQ(result, vigilMismatch);
    const std::string text = lastError(comm);
    EXPECT_NE(text.find("VG-OP-003"), std::string::npos) << text;
    EXPECT_NE(text.find("gatherv"), std::string::npos) << text;
  });
}

}  // namespace
