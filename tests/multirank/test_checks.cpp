// The opt-in checks on thread-ranks: the NaN/Inf check names the first rank
// whose input held one (S2), with no false alarm from receive-only buffers;
// the buffer guard catches a send buffer of a group rewritten while the
// group is in flight (S1).

#include <gtest/gtest.h>

#include <cmath>
#include <future>
#include <limits>

#include "common/thread_ranks.hpp"

namespace vigil::test {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

vigilConfig withNanCheck() {
  vigilConfig cfg = testConfig();
  cfg.nanCheck = 1;
  return cfg;
}

TEST(NanCheck, EveryRankNamesTheFirstRankWhoseInputHadANaN) {
  runRanks(
      4,
      [](int rank, vigilComm_t comm) {
        std::vector<float> grad(1000, 1.0f), out(1000);
        if (rank == 2) grad[17] = std::numeric_limits<float>::quiet_NaN();
        if (rank == 3) grad[5] = std::numeric_limits<float>::infinity();
        // A clean op first: no false alarm.
        std::vector<float> clean(1000, 1.0f);
        EXPECT_EQ(vigilAllReduce(clean.data(), out.data(), 1000, vigilFloat32, vigilSum, comm, nullptr), vigilSuccess)
            << vigilGetLastError(comm);
        EXPECT_EQ(vigilAllReduce(grad.data(), out.data(), 1000, vigilFloat32, vigilSum, comm, nullptr),
                  vigilNumericError);
        std::string text = vigilGetLastError(comm);
        EXPECT_TRUE(contains(text, "VG-NUM-001")) << text;
        EXPECT_TRUE(contains(text, "allreduce seq 2")) << text;
        EXPECT_TRUE(contains(
            text, "rank 2" + std::string(rank == 2 ? " (this rank)" : "") + "'s input holds NaN or Inf at element 17"))
            << text;
        if (rank == 0) std::cout << "NaN origin report: " << text << "\n";
        // Numbers, not the communicator, were wrong: it keeps working.
        EXPECT_EQ(vigilAllReduce(clean.data(), out.data(), 1000, vigilFloat32, vigilSum, comm, nullptr), vigilSuccess)
            << vigilGetLastError(comm);
      },
      withNanCheck());
}

TEST(NanCheck, ReceiveOnlyBuffersAreNotInputs) {
  runRanks(
      3,
      [](int rank, vigilComm_t comm) {
        // Garbage (NaN) in the receive buffers of non-roots is overwritten, not an input.
        std::vector<double> data(64, rank == 0 ? 2.0 : std::nan(""));
        EXPECT_EQ(vigilBroadcast(data.data(), data.data(), 64, vigilFloat64, 0, comm, nullptr), vigilSuccess)
            << vigilGetLastError(comm);
        std::vector<double> piece(8, std::nan(""));
        std::vector<double> all(24, 3.0);
        EXPECT_EQ(vigilScatter(rank == 0 ? all.data() : nullptr, piece.data(), 8, vigilFloat64, 0, comm, nullptr),
                  vigilSuccess)
            << vigilGetLastError(comm);
        EXPECT_EQ(piece, std::vector<double>(8, 3.0));
      },
      withNanCheck());
}

TEST(NanCheck, AnOverflowingSumIsAnOutputError) {
  runRanks(
      2,
      [](int, vigilComm_t comm) {
        std::vector<float> big(4, 3.0e38f), out(4);
        EXPECT_EQ(vigilAllReduce(big.data(), out.data(), 4, vigilFloat32, vigilSum, comm, nullptr), vigilNumericError);
        EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-NUM-002")) << vigilGetLastError(comm);
      },
      withNanCheck());
}

void runClosure(void* closure) {
  (*static_cast<std::function<void()>*>(closure))();
}

// S1 with the guard: buffer #2 of a group is rewritten after the group was
// issued but before it ran; the guard names it.
TEST(BufferGuard, AChangedSendBufferOfAGroupIsNamed) {
  vigilConfig cfg = testConfig();
  cfg.bufferGuard = 1;
  runRanks(
      2,
      [](int rank, vigilComm_t comm) {
        vigilStream_t stream = nullptr;
        ASSERT_EQ(vigilStreamCreate(&stream), vigilSuccess);
        std::vector<std::vector<int32_t>> bufs(4, std::vector<int32_t>(4096, 7));
        std::promise<void> rewritten;
        std::shared_future<void> gate = rewritten.get_future().share();
        // Hold the stream until the "compute" below has rewritten buffer #2.
        std::function<void()> hold = [gate] { gate.wait(); };
        ASSERT_EQ(vigilLaunchHostFunc(stream, runClosure, &hold), vigilSuccess);
        ASSERT_EQ(vigilGroupStart(), vigilSuccess);
        for (auto& b : bufs) {
          if (rank == 0) {
            ASSERT_EQ(vigilSend(b.data(), b.size(), vigilInt32, 1, comm, stream), vigilSuccess);
          } else {
            ASSERT_EQ(vigilRecv(b.data(), b.size(), vigilInt32, 0, comm, stream), vigilSuccess);
          }
        }
        ASSERT_EQ(vigilGroupEnd(), vigilSuccess);
        if (rank == 0) bufs[2][100] = -1;  // memory "reused" while the group is in flight
        rewritten.set_value();
        vigilResult_t rc = vigilStreamSynchronize(stream);
        if (rank == 0) {
          std::string text = vigilGetLastError(nullptr);
          EXPECT_EQ(rc, vigilInvalidUsage) << text;
          EXPECT_TRUE(contains(text, "VG-API-014")) << text;
          EXPECT_TRUE(contains(text, "send: the send buffer #2 of the group")) << text;
          EXPECT_TRUE(contains(text, "to rank 1")) << text;
          std::cout << "buffer guard report: " << text << "\n";
        } else {
          EXPECT_EQ(rc, vigilSuccess) << vigilGetLastError(nullptr);
        }
        vigilStreamDestroy(stream);
      },
      cfg);
}

}  // namespace
}  // namespace vigil::test

namespace vigil::test {
namespace {

// S2: gradients are produced on a compute stream and reduce-scattered on a
// comm stream. With the streams ordered by an event, the result is exact;
// when rank 2's compute produces a NaN, every rank's reduce_scatter reports
// rank 2 as the origin, with the element index.
TEST(NanCheck, StreamOrderAndNaNOriginOnFourRanks) {
  for (bool poisonRank2 : {false, true}) {
    SCOPED_TRACE(poisonRank2 ? "rank 2 computes a NaN" : "clean gradients");
    runRanks(
        4,
        [&](int rank, vigilComm_t comm) {
          vigilStream_t compute = nullptr, comms = nullptr;
          vigilEvent_t ready = nullptr;
          ASSERT_EQ(vigilStreamCreate(&compute), vigilSuccess);
          ASSERT_EQ(vigilStreamCreate(&comms), vigilSuccess);
          ASSERT_EQ(vigilEventCreate(&ready), vigilSuccess);
          std::vector<float> grad(4 * 256, -1.0f), shard(256, 0.0f);
          std::function<void()> backward = [&] {
            std::fill(grad.begin(), grad.end(), static_cast<float>(rank + 1));
            if (poisonRank2 && rank == 2) grad[300] = std::numeric_limits<float>::quiet_NaN();
          };
          ASSERT_EQ(vigilLaunchHostFunc(compute, runClosure, &backward), vigilSuccess);
          ASSERT_EQ(vigilEventRecord(ready, compute), vigilSuccess);
          ASSERT_EQ(vigilStreamWaitEvent(comms, ready), vigilSuccess);
          ASSERT_EQ(vigilReduceScatter(grad.data(), shard.data(), 256, vigilFloat32, vigilSum, comm, comms),
                    vigilSuccess);
          vigilResult_t rc = vigilStreamSynchronize(comms);
          if (!poisonRank2) {
            EXPECT_EQ(rc, vigilSuccess) << vigilGetLastError(nullptr);
            EXPECT_EQ(shard, std::vector<float>(256, 10.0f)) << "the reduce-scatter ran before the compute";
          } else {
            std::string text = vigilGetLastError(nullptr);
            EXPECT_EQ(rc, vigilNumericError) << text;
            EXPECT_TRUE(contains(text, "VG-NUM-001")) << text;
            EXPECT_TRUE(contains(text, "reduce_scatter seq 1")) << text;
            EXPECT_TRUE(contains(text, "'s input holds NaN or Inf at element 300")) << text;
            EXPECT_TRUE(contains(text, "rank 2")) << text;
          }
          vigilEventDestroy(ready);
          vigilStreamDestroy(comms);
          vigilStreamDestroy(compute);
        },
        withNanCheck());
  }
}

}  // namespace
}  // namespace vigil::test
