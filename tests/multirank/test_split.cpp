// vigilCommSplit on thread-ranks: colors and keys (negative color, equal
// keys), results of collectives on the children, children used at the same
// time as their parent and siblings from other threads, destroy orders,
// nested splits, and the refusals (inside a group, ranks that disagree on
// calling split).

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_ranks.hpp"
#include "core/config.hpp"
#include "core/log.hpp"

namespace vigil::test {
namespace {

#define EXPECT_OK(call, comm) EXPECT_EQ((call), vigilSuccess) << vigilGetLastError(comm)
#define ASSERT_OK(call, comm) ASSERT_EQ((call), vigilSuccess) << vigilGetLastError(comm)

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The parent ranks of `color`'s child, in child-rank order: sorted by
// (key, parent rank), as vigilCommSplit promises.
std::vector<int> expectedMembers(int n, int color, const std::function<int(int)>& colorOf,
                                 const std::function<int(int)>& keyOf) {
  std::vector<int> members;
  for (int r = 0; r < n; ++r) {
    if (colorOf(r) == color) members.push_back(r);
  }
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) { return keyOf(a) < keyOf(b); });
  return members;
}

// Splits n ranks by colorOf/keyOf and checks each child: size, rank order,
// an allreduce and an allgather of the parent ranks.
void checkSplit(int n, const std::function<int(int)>& colorOf, const std::function<int(int)>& keyOf) {
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    vigilComm_t child = reinterpret_cast<vigilComm_t>(0x1);
    ASSERT_OK(vigilCommSplit(comm, colorOf(rank), keyOf(rank), &child), comm);
    // The parent still works after the split, on every rank.
    int32_t sum = 0, mine = rank;
    EXPECT_OK(vigilAllReduce(&mine, &sum, 1, vigilInt32, vigilSum, comm, nullptr), comm);
    EXPECT_EQ(sum, n * (n - 1) / 2);
    if (colorOf(rank) < 0) {
      EXPECT_EQ(child, nullptr);
      return;
    }
    ASSERT_NE(child, nullptr);
    const std::vector<int> members = expectedMembers(n, colorOf(rank), colorOf, keyOf);
    int size = 0, childRank = -1;
    EXPECT_OK(vigilCommCount(child, &size), child);
    EXPECT_OK(vigilCommUserRank(child, &childRank), child);
    EXPECT_EQ(size, static_cast<int>(members.size()));
    ASSERT_GE(childRank, 0);
    EXPECT_EQ(members[static_cast<size_t>(childRank)], rank) << "rank " << rank;

    EXPECT_OK(vigilAllReduce(&mine, &sum, 1, vigilInt32, vigilSum, child, nullptr), child);
    EXPECT_EQ(sum, std::accumulate(members.begin(), members.end(), 0));
    std::vector<int32_t> all(members.size(), -1);
    EXPECT_OK(vigilAllGather(&mine, all.data(), 1, vigilInt32, child, nullptr), child);
    EXPECT_EQ(std::vector<int>(all.begin(), all.end()), members);
    EXPECT_OK(vigilCommDestroy(child), child);
  });
}

TEST(Split, ColorsAndKeysOnOneToEightRanks) {
  for (int n = 1; n <= 8; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    // Three colors, the last rank out (color -1) when n > 2; keys reverse
    // the order in color 0 and tie in color 1 (then the parent rank decides).
    auto colorOf = [n](int r) { return n > 2 && r == n - 1 ? -1 : r % 3; };
    auto keyOf = [n](int r) { return r % 3 == 0 ? n - r : (r % 3 == 1 ? 7 : r); };
    checkSplit(n, colorOf, keyOf);
  }
}

// Connecting a child opens no connection it then drops: the members' logs
// stay free of VG-NET-004 ("closed a connection ... before sending a
// complete preamble"), which every split used to print once per member.
TEST(Split, MembersConnectWithoutDroppedConnections) {
  const std::string path = cat(::testing::TempDir(), "vigil-split-log-", getpid(), ".txt");
  std::remove(path.c_str());
  processConfig();  // configures the logger once; the capture must come after
  Logger::instance().configure(LogLevel::Warn, path);
  for (int n : {2, 5, 8}) {
    SCOPED_TRACE("n=" + std::to_string(n));
    checkSplit(
        n, [](int r) { return r % 2; }, [](int r) { return -r; });
  }
  Logger::instance().configure(LogLevel::Warn, "");
  std::ifstream in(path);
  std::vector<std::string> rejected;
  for (std::string line; std::getline(in, line);) {
    if (line.find("VG-NET-004") != std::string::npos) rejected.push_back(line);
  }
  std::remove(path.c_str());
  EXPECT_TRUE(rejected.empty()) << rejected.size() << " rejected connection(s), the first: " << rejected.front();
}

TEST(Split, OneColorWithNegativeKeysReordersTheWholeGroup) {
  checkSplit(
      6, [](int) { return 5; }, [](int r) { return -10 * r; });
}

TEST(Split, EveryRankAloneAndEveryRankOut) {
  checkSplit(
      4, [](int r) { return 100 + r; }, [](int) { return 0; });
  checkSplit(
      4, [](int) { return -1; }, [](int) { return 0; });
}

TEST(Split, ChildrenRunConcurrentlyWithTheirParentAndSiblings) {
  constexpr int kIters = 40;
  runRanks(4, [&](int rank, vigilComm_t& comm) {
    // Rows and columns of a 2x2 grid: two children per rank.
    vigilComm_t row = nullptr, col = nullptr;
    ASSERT_OK(vigilCommSplit(comm, rank / 2, rank, &row), comm);
    ASSERT_OK(vigilCommSplit(comm, rank % 2, rank, &col), comm);
    auto loop = [&](vigilComm_t c, int64_t expectedSum, int64_t members) {
      for (int i = 0; i < kIters; ++i) {
        std::vector<int64_t> v(1000 + static_cast<size_t>(i), rank + i);
        ASSERT_OK(vigilAllReduce(v.data(), v.data(), v.size(), vigilInt64, vigilSum, c, nullptr), c);
        for (int64_t x : v) ASSERT_EQ(x, expectedSum + i * members);
      }
    };
    const int rowSum = rank / 2 == 0 ? 0 + 1 : 2 + 3;
    const int colSum = rank % 2 == 0 ? 0 + 2 : 1 + 3;
    std::thread t1([&] { loop(row, rowSum, 2); });
    std::thread t2([&] { loop(col, colSum, 2); });
    loop(comm, 6, 4);
    t1.join();
    t2.join();
    EXPECT_OK(vigilCommDestroy(row), row);
    EXPECT_OK(vigilCommDestroy(col), col);
  });
}

TEST(Split, ParentDestroyedBeforeChildAndChildBeforeParent) {
  for (bool parentFirst : {true, false}) {
    SCOPED_TRACE(parentFirst ? "parent first" : "child first");
    runRanks(4, [&](int rank, vigilComm_t& comm) {
      vigilComm_t child = nullptr;
      ASSERT_OK(vigilCommSplit(comm, rank % 2, 0, &child), comm);
      if (parentFirst) {
        EXPECT_OK(vigilCommDestroy(comm), comm);
        comm = nullptr;
        int32_t v = rank;
        EXPECT_OK(vigilAllReduce(&v, &v, 1, vigilInt32, vigilSum, child, nullptr), child);
        EXPECT_EQ(v, rank % 2 == 0 ? 2 : 4);
        EXPECT_OK(vigilCommDestroy(child), child);
      } else {
        EXPECT_OK(vigilCommDestroy(child), child);
        int32_t v = rank;
        EXPECT_OK(vigilAllReduce(&v, &v, 1, vigilInt32, vigilSum, comm, nullptr), comm);
        EXPECT_EQ(v, 6);
      }
    });
  }
}

TEST(Split, SplitOfASplit) {
  runRanks(8, [&](int rank, vigilComm_t& comm) {
    vigilComm_t half = nullptr, quarter = nullptr;
    ASSERT_OK(vigilCommSplit(comm, rank / 4, rank, &half), comm);
    int halfRank = -1;
    EXPECT_OK(vigilCommUserRank(half, &halfRank), half);
    ASSERT_OK(vigilCommSplit(half, halfRank / 2, -halfRank, &quarter), half);
    int quarterRank = -1;
    EXPECT_OK(vigilCommUserRank(quarter, &quarterRank), quarter);
    EXPECT_EQ(quarterRank, 1 - halfRank % 2);  // keys reversed the pair
    int32_t v = rank;
    EXPECT_OK(vigilAllReduce(&v, &v, 1, vigilInt32, vigilMax, quarter, nullptr), quarter);
    EXPECT_EQ(v, rank | 1);
    EXPECT_OK(vigilCommDestroy(quarter), quarter);
    EXPECT_OK(vigilCommDestroy(half), half);
  });
}

TEST(Split, InsideAGroupIsRefusedAndTheGroupStillWorks) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    ASSERT_OK(vigilGroupStart(), comm);
    int32_t out = rank, in = -1;
    EXPECT_OK(vigilSend(&out, 1, vigilInt32, 1 - rank, comm, nullptr), comm);
    vigilComm_t child = reinterpret_cast<vigilComm_t>(0x1);
    EXPECT_EQ(vigilCommSplit(comm, 0, rank, &child), vigilInvalidUsage);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-API-015")) << text;
    EXPECT_TRUE(contains(text, "color 0, key " + std::to_string(rank))) << text;
    EXPECT_EQ(child, nullptr);
    EXPECT_OK(vigilRecv(&in, 1, vigilInt32, 1 - rank, comm, nullptr), comm);
    EXPECT_OK(vigilGroupEnd(), comm);
    EXPECT_EQ(in, 1 - rank);
    EXPECT_EQ(vigilCommSplit(comm, 0, 0, nullptr), vigilInvalidArgument);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-API-001")) << vigilGetLastError(comm);
  });
}

TEST(Split, RanksThatDisagreeOnCallingSplitGetAMismatch) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    vigilResult_t rc;
    if (rank == 0) {
      vigilComm_t child = nullptr;
      rc = vigilCommSplit(comm, 0, 0, &child);
      EXPECT_EQ(child, nullptr);
    } else {
      std::vector<uint8_t> v(64);
      rc = vigilAllReduce(v.data(), v.data(), v.size(), vigilUint8, vigilSum, comm, nullptr);
    }
    EXPECT_EQ(rc, vigilMismatch) << vigilGetLastError(comm);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-OP-002")) << text;
    EXPECT_TRUE(contains(text, "split")) << text;
    EXPECT_TRUE(contains(text, "allreduce")) << text;
  });
}

TEST(Split, SixteenRanksIntoFourGroupsOfFour) {
  checkSplit(
      16, [](int r) { return r % 4; }, [](int r) { return r; });
}

}  // namespace
}  // namespace vigil::test
