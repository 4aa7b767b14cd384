// Every collective against a reference, on thread-ranks over real sockets:
// rank counts 1, 2, 3, 4, 7, 8; sizes 0, 1, odd, several blocks, and one
// large; all data types and reductions; in-place and out-of-place. The same
// checks run over real processes in collective_suite.cpp.

#include <gtest/gtest.h>

#include "common/collective_checks.hpp"
#include "common/thread_ranks.hpp"

namespace vigil::test {
namespace {

class Collectives : public ::testing::TestWithParam<int> {};

void runCheck(int n, void (*check)(int, int, vigilComm_t, Report&)) {
  runRanks(n, [&](int rank, vigilComm_t comm) {
    Report report{[rank](const std::string& what) { ADD_FAILURE() << "rank " << rank << ": " << what; }};
    check(rank, n, comm, report);
    EXPECT_GT(report.checks, 0);
  });
}

TEST_P(Collectives, AllReduceEveryTypeOpAndSize) {
  runCheck(GetParam(), checkAllReduceEveryTypeOpAndSize);
}
TEST_P(Collectives, ReduceToEveryRoot) {
  runCheck(GetParam(), checkReduceToEveryRoot);
}
TEST_P(Collectives, ReduceScatterEveryTypeAndOp) {
  runCheck(GetParam(), checkReduceScatterEveryTypeAndOp);
}
TEST_P(Collectives, BroadcastFromEveryRoot) {
  runCheck(GetParam(), checkBroadcastFromEveryRoot);
}
TEST_P(Collectives, AllGatherInAndOutOfPlace) {
  runCheck(GetParam(), checkAllGatherInAndOutOfPlace);
}
TEST_P(Collectives, AllToAll) {
  runCheck(GetParam(), checkAllToAll);
}
TEST_P(Collectives, AllToAllVUnevenCounts) {
  runCheck(GetParam(), checkAllToAllVUnevenCounts);
}
TEST_P(Collectives, GatherAndScatterEveryRoot) {
  runCheck(GetParam(), checkGatherAndScatterEveryRoot);
}
TEST_P(Collectives, BarrierAndLargeAllReduce) {
  runCheck(GetParam(), checkBarrierAndLargeAllReduce);
}
TEST_P(Collectives, PointToPointRingAndGroupedBatch) {
  runCheck(GetParam(), checkPointToPointRingAndGroupedBatch);
}
TEST_P(Collectives, ChunkBoundaries) {
  runCheck(GetParam(), checkChunkBoundaries);
}

// Sanitized builds (10-20x slower) take 1, 2, 3 and 8 (more ranks than cores).
#ifdef VIGIL_SANITIZED_BUILD
INSTANTIATE_TEST_SUITE_P(RankCounts, Collectives, ::testing::Values(1, 2, 3, 8),
#else
INSTANTIATE_TEST_SUITE_P(RankCounts, Collectives, ::testing::Values(1, 2, 3, 4, 7, 8),
#endif
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace vigil::test
