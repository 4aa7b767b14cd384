// Streams, events and groups on thread-ranks: stream order (S2), events
// across streams, buffers of a grouped batch held until the batch completes
// (S1), and asynchronous errors that are sticky (S13).

#include <gtest/gtest.h>

#include <atomic>
#include <future>

#include "common/thread_ranks.hpp"

namespace vigil::test {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

#define EXPECT_OK(call, comm) EXPECT_EQ((call), vigilSuccess) << vigilGetLastError(comm)

struct StreamGuard {
  vigilStream_t stream = nullptr;
  StreamGuard() { EXPECT_EQ(vigilStreamCreate(&stream), vigilSuccess); }
  ~StreamGuard() { vigilStreamDestroy(stream); }
};
struct EventGuard {
  vigilEvent_t event = nullptr;
  EventGuard() { EXPECT_EQ(vigilEventCreate(&event), vigilSuccess); }
  ~EventGuard() { vigilEventDestroy(event); }
};

// Host work, as a C callback: runs fn() on the stream's worker.
void runClosure(void* closure) {
  (*static_cast<std::function<void()>*>(closure))();
}

TEST(Streams, WorkOnAStreamRunsInOrder) {
  runRanks(3, [](int rank, vigilComm_t comm) {
    StreamGuard s;
    std::vector<float> grad(100000, -1.0f), sum(100000, 0.0f);
    // "Compute" writes the gradient on the stream; the allreduce must see it (S2).
    std::function<void()> compute = [&] { std::fill(grad.begin(), grad.end(), static_cast<float>(rank + 1)); };
    EXPECT_OK(vigilLaunchHostFunc(s.stream, runClosure, &compute), comm);
    EXPECT_OK(vigilAllReduce(grad.data(), sum.data(), grad.size(), vigilFloat32, vigilSum, comm, s.stream), comm);
    std::vector<float> seen;
    std::function<void()> consume = [&] { seen = sum; };
    EXPECT_OK(vigilLaunchHostFunc(s.stream, runClosure, &consume), comm);
    EXPECT_OK(vigilStreamSynchronize(s.stream), comm);
    EXPECT_EQ(seen, std::vector<float>(100000, 6.0f));
  });
}

// vigilMemcpyAsync runs in stream order: a copy of a buffer that a queued
// receive fills sees the received data (the NCCL port that raced here).
TEST(Streams, MemcpyAsyncRunsInStreamOrder) {
  runRanks(2, [](int rank, vigilComm_t comm) {
    StreamGuard s;
    constexpr size_t kCount = 1 << 20;
    std::vector<int32_t> buf(kCount, rank == 0 ? 7 : -1), copy(kCount, 0);
    if (rank == 0) {
      EXPECT_OK(vigilSend(buf.data(), kCount, vigilInt32, 1, comm, s.stream), comm);
    } else {
      EXPECT_OK(vigilRecv(buf.data(), kCount, vigilInt32, 0, comm, s.stream), comm);
      EXPECT_OK(vigilMemcpyAsync(copy.data(), buf.data(), kCount * sizeof(int32_t), s.stream), comm);
    }
    EXPECT_OK(vigilStreamSynchronize(s.stream), comm);
    if (rank == 1) {
      EXPECT_EQ(copy, std::vector<int32_t>(kCount, 7));
    }
    // The NULL stream copies now; a NULL pointer with bytes is refused.
    int32_t a = 5, b = 0;
    EXPECT_OK(vigilMemcpyAsync(&b, &a, sizeof a, nullptr), comm);
    EXPECT_EQ(b, 5);
    EXPECT_EQ(vigilMemcpyAsync(nullptr, &a, sizeof a, s.stream), vigilInvalidArgument);
    EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-API-001")) << vigilGetLastError(nullptr);
  });
}

TEST(Streams, EventsOrderWorkAcrossStreams) {
  runRanks(2, [](int rank, vigilComm_t comm) {
    StreamGuard commStream, computeStream;
    EventGuard done;
    std::vector<int64_t> data(50000, rank + 1), out(50000, 0);
    EXPECT_OK(vigilAllReduce(data.data(), out.data(), data.size(), vigilInt64, vigilSum, comm, commStream.stream),
              comm);
    EXPECT_OK(vigilEventRecord(done.event, commStream.stream), comm);
    EXPECT_OK(vigilStreamWaitEvent(computeStream.stream, done.event), comm);
    int64_t firstSeen = -1, lastSeen = -1;
    std::function<void()> read = [&] {
      firstSeen = out.front();
      lastSeen = out.back();
    };
    EXPECT_OK(vigilLaunchHostFunc(computeStream.stream, runClosure, &read), comm);
    EXPECT_OK(vigilStreamSynchronize(computeStream.stream), comm);
    EXPECT_EQ(firstSeen, 3);
    EXPECT_EQ(lastSeen, 3);
    EXPECT_OK(vigilEventSynchronize(done.event), comm);
    EXPECT_EQ(vigilEventQuery(done.event), vigilSuccess);
  });
}

TEST(Streams, QueryReportsWorkInProgress) {
  std::promise<void> checked;
  std::shared_future<void> release = checked.get_future().share();
  runRanks(2, [&](int rank, vigilComm_t comm) {
    int x = rank;
    if (rank == 1) {
      release.wait();  // rank 0's allreduce cannot finish before this
      EXPECT_OK(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr), comm);
      return;
    }
    StreamGuard s;
    EventGuard e;
    EXPECT_OK(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, s.stream), comm);
    EXPECT_OK(vigilEventRecord(e.event, s.stream), comm);
    EXPECT_EQ(vigilStreamQuery(s.stream), vigilInProgress);
    EXPECT_EQ(vigilEventQuery(e.event), vigilInProgress);
    checked.set_value();
    EXPECT_OK(vigilStreamSynchronize(s.stream), comm);
    EXPECT_EQ(vigilStreamQuery(s.stream), vigilSuccess);
    EXPECT_EQ(vigilEventQuery(e.event), vigilSuccess);
    EXPECT_EQ(x, 1);
  });
}

// S1: a batch of sends whose buffers are "freed and reused" by compute on
// another stream as soon as an event after the batch fires. Every buffer,
// not only the first, must be in use until then: the receiver gets exact data.
TEST(Streams, GroupedBuffersStayInUseUntilTheBatchCompletes) {
  constexpr size_t kBuffers = 5;
  constexpr size_t kCount = 1 << 21;  // 8 MiB of int32 each: more than a socket buffer holds
  runRanks(2, [&](int rank, vigilComm_t comm) {
    StreamGuard commStream, computeStream;
    EventGuard batchDone;
    std::vector<std::vector<int32_t>> bufs(kBuffers);
    for (size_t b = 0; b < kBuffers; ++b) {
      bufs[b].assign(kCount, rank == 0 ? static_cast<int32_t>(1000 + b) : -1);
    }
    EXPECT_OK(vigilGroupStart(), comm);
    for (size_t b = 0; b < kBuffers; ++b) {
      if (rank == 0) {
        EXPECT_OK(vigilSend(bufs[b].data(), kCount, vigilInt32, 1, comm, commStream.stream), comm);
      } else {
        EXPECT_OK(vigilRecv(bufs[b].data(), kCount, vigilInt32, 0, comm, commStream.stream), comm);
      }
    }
    EXPECT_OK(vigilGroupEnd(), comm);
    EXPECT_OK(vigilEventRecord(batchDone.event, commStream.stream), comm);
    // The caching allocator's view: after the event, the memory is free for reuse.
    EXPECT_OK(vigilStreamWaitEvent(computeStream.stream, batchDone.event), comm);
    std::function<void()> reuse = [&] {
      if (rank == 0) {
        for (auto& b : bufs) std::fill(b.begin(), b.end(), 0x7fc00000);  // NaN bits, as in the field
      }
    };
    EXPECT_OK(vigilLaunchHostFunc(computeStream.stream, runClosure, &reuse), comm);
    EXPECT_OK(vigilStreamSynchronize(computeStream.stream), comm);
    EXPECT_OK(vigilStreamSynchronize(commStream.stream), comm);
    if (rank == 1) {
      for (size_t b = 0; b < kBuffers; ++b) {
        size_t wrong = static_cast<size_t>(std::count_if(
            bufs[b].begin(), bufs[b].end(), [&](int32_t v) { return v != static_cast<int32_t>(1000 + b); }));
        EXPECT_EQ(wrong, 0u) << "buffer #" << b;
      }
    }
  });
}

// S13: an asynchronous failure is visible at synchronize, at
// vigilCommGetAsyncError, and on every later call on the communicator.
TEST(Streams, AsyncErrorsAreSticky) {
  runRanks(2, [](int rank, vigilComm_t comm) {
    StreamGuard s;
    float x[4] = {};
    if (rank == 1) {
      EXPECT_EQ(vigilBroadcast(x, x, 4, vigilFloat32, 0, comm, nullptr), vigilMismatch);
      return;
    }
    // Returns at once: the failure happens later, on the stream.
    EXPECT_OK(vigilAllReduce(x, x, 4, vigilFloat32, vigilSum, comm, s.stream), comm);
    EXPECT_EQ(vigilStreamSynchronize(s.stream), vigilMismatch);
    EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-OP-002")) << vigilGetLastError(nullptr);
    vigilResult_t async = vigilSuccess;
    EXPECT_OK(vigilCommGetAsyncError(comm, &async), comm);
    EXPECT_EQ(async, vigilMismatch);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-OP-002")) << vigilGetLastError(comm);
    // Sticky: on the stream, and on the communicator from any stream.
    EXPECT_EQ(vigilAllReduce(x, x, 4, vigilFloat32, vigilSum, comm, s.stream), vigilMismatch);
    EXPECT_EQ(vigilAllReduce(x, x, 4, vigilFloat32, vigilSum, comm, nullptr), vigilMismatch);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-COMM-002")) << vigilGetLastError(comm);
    EXPECT_EQ(vigilStreamSynchronize(s.stream), vigilMismatch);
  });
}

// A group may span communicators, issued in a different order on each rank.
TEST(Groups, OpsOfTwoCommunicatorsInOneGroup) {
  vigilRootInfo rootA = newRootInfo(), rootB = newRootInfo();
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      vigilConfig cfgA = testConfig(), cfgB = testConfig();
      cfgA.commName = "group-a";
      cfgB.commName = "group-b";
      vigilComm_t a = nullptr, b = nullptr;
      ASSERT_EQ(vigilCommInitRootInfoConfig(2, &rootA, r, &cfgA, &a), vigilSuccess);
      ASSERT_EQ(vigilCommInitRootInfoConfig(2, &rootB, r, &cfgB, &b), vigilSuccess);
      std::vector<int> out(1 << 20, r + 1), inA(1 << 20, 0), inB(1 << 20, 0);  // 4 MiB: no send completes alone
      EXPECT_EQ(vigilGroupStart(), vigilSuccess);
      if (r == 0) {  // receive on B first, then send on A
        EXPECT_EQ(vigilRecv(inB.data(), inB.size(), vigilInt32, 1, b, nullptr), vigilSuccess);
        EXPECT_EQ(vigilSend(out.data(), out.size(), vigilInt32, 1, a, nullptr), vigilSuccess);
      } else {  // receive on A first, then send on B
        EXPECT_EQ(vigilRecv(inA.data(), inA.size(), vigilInt32, 0, a, nullptr), vigilSuccess);
        EXPECT_EQ(vigilSend(out.data(), out.size(), vigilInt32, 0, b, nullptr), vigilSuccess);
      }
      EXPECT_EQ(vigilGroupEnd(), vigilSuccess) << vigilGetLastError(nullptr);
      if (r == 0) {
        EXPECT_EQ(inB, std::vector<int>(1 << 20, 2));
      } else {
        EXPECT_EQ(inA, std::vector<int>(1 << 20, 1));
      }
      vigilCommDestroy(a);
      vigilCommDestroy(b);
    });
  }
  for (auto& t : ranks) t.join();
}

TEST(Streams, BadHandlesAndMixedGroupsAreRefused) {
  runRanks(1, [](int, vigilComm_t comm) {
    StreamGuard a, b;
    int x = 0;
    EXPECT_OK(vigilGroupStart(), comm);
    EXPECT_OK(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, a.stream), comm);
    EXPECT_OK(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, b.stream), comm);
    EXPECT_EQ(vigilGroupEnd(), vigilInvalidUsage);
    EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-API-009")) << vigilGetLastError(nullptr);
    EXPECT_TRUE(contains(vigilGetLastError(nullptr), "different streams")) << vigilGetLastError(nullptr);
    EXPECT_EQ(vigilEventSynchronize(nullptr), vigilInvalidArgument);
    EventGuard never;
    EXPECT_OK(vigilEventSynchronize(never.event), comm);  // an event never recorded is complete
    EXPECT_OK(vigilEventRecord(never.event, nullptr), comm);
    EXPECT_EQ(vigilEventQuery(never.event), vigilSuccess);
  });
}

}  // namespace
}  // namespace vigil::test
