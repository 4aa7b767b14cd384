// Lifecycle and failure reports on thread-ranks: abort from another thread,
// timeouts, mismatched collectives, sticky errors, bad arguments, use after
// destroy, finalize, and 30 init/destroy cycles without leaks.

#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>

#include "bootstrap/root_server.hpp"
#include "common/thread_ranks.hpp"

namespace vigil::test {
namespace {

using std::chrono::steady_clock;

double msFrom(steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(steady_clock::now() - t).count();
}
bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Blocks until thread `tid` is asleep in the kernel (in the op's poll), or
// fails the test after 10 s. Polling /proc is how a test can see it.
void waitUntilAsleep(pid_t tid) {
  auto deadline = steady_clock::now() + std::chrono::seconds(10);
  while (steady_clock::now() < deadline) {
    std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string line;
    std::getline(stat, line);
    size_t close = line.rfind(')');
    if (close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'S') return;
    std::this_thread::yield();
  }
  FAIL() << "thread " << tid << " never blocked";
}

size_t countEntries(const char* dir) {
  size_t n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d) != nullptr) ++n;
    closedir(d);
  }
  return n;
}

#define EXPECT_OK(call, comm) EXPECT_EQ((call), vigilSuccess) << vigilGetLastError(comm)

TEST(Lifecycle, AbortFromAnotherThreadReleasesABlockedOp) {
  std::promise<void> abortedRank0;
  std::shared_future<void> aborted = abortedRank0.get_future().share();
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    float x = 1;
    if (rank == 1) {
      aborted.wait();  // rank 1 joins the allreduce only after rank 0 aborted
      vigilResult_t rc = vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr);
      if (rc == vigilSuccess) {
        // Rank 0 had published its input before it aborted, and the notice
        // may still be on its way: the result is right, and the next
        // operation, which rank 0 never joins, hears the abort.
        EXPECT_EQ(x, 2.0f);
        rc = vigilBarrier(comm, nullptr);
      }
      EXPECT_EQ(rc, vigilRemoteError);
      EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-PEER-003")) << vigilGetLastError(comm);
      EXPECT_TRUE(contains(vigilGetLastError(comm), "rank 0 aborted the communicator")) << vigilGetLastError(comm);
      return;
    }
    std::atomic<pid_t> tid{0};
    Outcome op;
    steady_clock::time_point returned;
    std::thread worker([&] {
      tid = static_cast<pid_t>(syscall(SYS_gettid));
      op.rc = vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr);
      returned = steady_clock::now();
      op.text = vigilGetLastError(comm);
    });
    while (tid.load() == 0) std::this_thread::yield();
    waitUntilAsleep(tid.load());
    auto start = steady_clock::now();
    EXPECT_OK(vigilCommAbort(comm), comm);
    double abortMs = msFrom(start);
    worker.join();
    abortedRank0.set_value();
    EXPECT_LT(abortMs, 1000.0);
    EXPECT_EQ(op.rc, vigilAborted) << op.text;
    EXPECT_TRUE(contains(op.text, "VG-COMM-001")) << op.text;
    EXPECT_TRUE(contains(op.text, "allreduce seq 1")) << op.text;
    EXPECT_LT((std::chrono::duration<double, std::milli>(returned - start).count()), 1000.0);
    std::cout << "abort returned in " << abortMs << " ms; the blocked op: " << op.text << "\n";
    // The handle is dead now: every later call says so.
    EXPECT_EQ(vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr), vigilInvalidUsage);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-API-007")) << vigilGetLastError(comm);
    EXPECT_EQ(vigilCommDestroy(comm), vigilInvalidUsage);
    comm = nullptr;
  });
}

TEST(Lifecycle, AbortWithReasonTellsThePeersWhy) {
  std::promise<void> abortedRank0;
  std::shared_future<void> aborted = abortedRank0.get_future().share();
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    float x = 1;
    if (rank == 0) {
      EXPECT_OK(vigilCommAbortWithReason(comm, "KeyboardInterrupt: SIGINT in Python"), comm);
      comm = nullptr;
      abortedRank0.set_value();
      return;
    }
    aborted.wait();
    EXPECT_EQ(vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr), vigilRemoteError);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-PEER-003")) << text;
    EXPECT_TRUE(contains(text, "rank 0 aborted the communicator (KeyboardInterrupt: SIGINT in Python)")) << text;
  });
}

TEST(Lifecycle, TimeoutNamesTheRankThatDidNotProgress) {
  std::promise<void> timedOut;
  std::shared_future<void> done = timedOut.get_future().share();
  runRanks(
      2,
      [&](int rank, vigilComm_t comm) {
        int x = rank;
        if (rank == 1) {
          done.wait();
          // Over shared memory rank 0 may have published all this small
          // allreduce needs before it timed out: then rank 1 completes it
          // with the right sum, and its next call quotes rank 0's timeout.
          // Otherwise this call does (it waits on rank 0 and hears of the
          // failure). Either way no rank goes on unaware.
          vigilResult_t rc = vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr);
          if (rc == vigilSuccess) {
            EXPECT_EQ(x, 1);
            rc = vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr);
          }
          EXPECT_EQ(rc, vigilRemoteError);
          EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-OP-001"))
              << "the peer's timeout is quoted: " << vigilGetLastError(comm);
          return;
        }
        auto start = steady_clock::now();
        vigilResult_t rc = vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr);
        double ms = msFrom(start);
        std::string text = vigilGetLastError(comm);
        timedOut.set_value();
        EXPECT_EQ(rc, vigilTimeout) << text;
        EXPECT_TRUE(contains(text, "VG-OP-001: rank 0/2")) << text;
        EXPECT_TRUE(contains(text, "allreduce seq 1: timed out: ran 0.5")) << text;
        EXPECT_TRUE(contains(text, "s on rank 0, past the timeout of 500 ms (vigilConfig.timeoutMs)")) << text;
        EXPECT_TRUE(contains(text, "receiving from rank 1")) << text;
        EXPECT_TRUE(contains(text, "Rank 1 is alive, last completed seq 0, has not entered seq 1")) << text;
        std::cout << "timeout report: " << text << "\n";
        EXPECT_GE(ms, 490.0);
        EXPECT_LT(ms, 5000.0);
      },
      testConfig(500));
}

TEST(Lifecycle, DifferentCollectivesAreAMismatchOnEveryRank) {
  struct Case {
    const char* what;
    std::function<vigilResult_t(int, vigilComm_t)> call;
    std::vector<const char*> expect;
  };
  std::vector<Case> cases = {
      {"allreduce vs broadcast",
       [](int rank, vigilComm_t comm) {
         float x[4] = {};
         return rank == 0 ? vigilAllReduce(x, x, 4, vigilFloat32, vigilSum, comm, nullptr)
                          : vigilBroadcast(x, x, 4, vigilFloat32, 0, comm, nullptr);
       },
       {"differing: op ", "allreduce seq 1 (float32, count 4, sum)", "broadcast seq 1 (float32, count 4, root 0)"}},
      {"count",
       [](int rank, vigilComm_t comm) {
         float x[12] = {};
         return vigilAllReduce(x, x, rank == 0 ? 10 : 12, vigilFloat32, vigilSum, comm, nullptr);
       },
       {"count 1"}},
      {"dtype",
       [](int rank, vigilComm_t comm) {
         double x[4] = {};
         return vigilAllReduce(x, x, 4, rank == 0 ? vigilFloat64 : vigilInt64, vigilSum, comm, nullptr);
       },
       {"dtype "}},
      {"redop",
       [](int rank, vigilComm_t comm) {
         int x[4] = {};
         return vigilAllReduce(x, x, 4, vigilInt32, rank == 0 ? vigilSum : vigilMax, comm, nullptr);
       },
       {"redop "}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    runRanks(2, [&](int rank, vigilComm_t comm) {
      auto start = steady_clock::now();
      vigilResult_t rc = c.call(rank, comm);
      double ms = msFrom(start);
      std::string text = vigilGetLastError(comm);
      EXPECT_EQ(rc, vigilMismatch) << text;
      EXPECT_TRUE(contains(text, "VG-OP-002")) << text;
      for (const char* part : c.expect) EXPECT_TRUE(contains(text, part)) << text;
      EXPECT_LT(ms, 2000.0);
      if (rank == 0 && std::string(c.what) == "allreduce vs broadcast")
        std::cout << "mismatch report: " << text << "\n";
      // Sticky: the next op returns the stored error.
      int y = 0;
      EXPECT_EQ(vigilAllReduce(&y, &y, 1, vigilInt32, vigilSum, comm, nullptr), vigilMismatch);
      EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-COMM-002")) << vigilGetLastError(comm);
      vigilResult_t async = vigilSuccess;
      EXPECT_OK(vigilCommGetAsyncError(comm, &async), comm);
      EXPECT_EQ(async, vigilMismatch);
    });
  }
}

TEST(Lifecycle, SendRecvSizeDisagreementIsReported) {
  runRanks(2, [&](int rank, vigilComm_t comm) {
    std::vector<float> buf(12, 1.0f);
    if (rank == 0) {
      vigilSend(buf.data(), 10, vigilFloat32, 1, comm, nullptr);  // may complete before the receiver judges it
      return;
    }
    vigilResult_t rc = vigilRecv(buf.data(), 12, vigilFloat32, 0, comm, nullptr);
    std::string text = vigilGetLastError(comm);
    EXPECT_EQ(rc, vigilMismatch) << text;
    EXPECT_TRUE(contains(text, "VG-OP-002") || contains(text, "VG-OP-003")) << text;
    EXPECT_TRUE(contains(text, "count 10")) << text;
    EXPECT_TRUE(contains(text, "count 12")) << text;
  });
}

// A failed vigilGroupEnd has no communicator argument; its error is still
// the last error of every communicator in the group, also when it left them
// usable (here: a group split across streams, refused before anything ran).
TEST(Lifecycle, AFailedGroupIsTheLastErrorOfItsCommunicators) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    (void)rank;
    vigilStream_t stream = nullptr;
    ASSERT_EQ(vigilStreamCreate(&stream), vigilSuccess);
    float a = 1, b = 2;
    EXPECT_OK(vigilGroupStart(), comm);
    EXPECT_OK(vigilAllReduce(&a, &a, 1, vigilFloat32, vigilSum, comm, nullptr), comm);
    EXPECT_OK(vigilAllReduce(&b, &b, 1, vigilFloat32, vigilSum, comm, stream), comm);
    EXPECT_EQ(vigilGroupEnd(), vigilInvalidUsage);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-API-009")) << text;
    EXPECT_TRUE(contains(text, "different streams")) << text;
    // Nothing ran, nothing broke: the communicator works on.
    EXPECT_OK(vigilAllReduce(&a, &a, 1, vigilFloat32, vigilSum, comm, nullptr), comm);
    EXPECT_EQ(a, 2.0f);
    EXPECT_OK(vigilStreamDestroy(stream), comm);
  });
}

TEST(Lifecycle, BadArgumentsFailLocallyAndLoseNothing) {
  runRanks(2, [&](int rank, vigilComm_t comm) {
    std::vector<int> buf(8, rank + 1);
    auto lastError = [&] { return std::string(vigilGetLastError(comm)); };
    EXPECT_EQ(vigilAllReduce(nullptr, buf.data(), 8, vigilInt32, vigilSum, comm, nullptr), vigilInvalidArgument);
    EXPECT_TRUE(contains(lastError(), "VG-API-001")) << lastError();
    EXPECT_TRUE(contains(lastError(), "allreduce: sendbuff is NULL")) << lastError();
    EXPECT_EQ(vigilAllReduce(buf.data(), buf.data(), 8, static_cast<vigilDataType_t>(99), vigilSum, comm, nullptr),
              vigilInvalidArgument);
    EXPECT_TRUE(contains(lastError(), "VG-API-002")) << lastError();
    EXPECT_EQ(vigilAllReduce(buf.data(), buf.data(), 8, vigilInt32, static_cast<vigilRedOp_t>(42), comm, nullptr),
              vigilInvalidArgument);
    EXPECT_TRUE(contains(lastError(), "VG-API-003")) << lastError();
    EXPECT_EQ(vigilBroadcast(buf.data(), buf.data(), 8, vigilInt32, 5, comm, nullptr), vigilInvalidArgument);
    EXPECT_TRUE(contains(lastError(), "VG-API-004")) << lastError();
    EXPECT_TRUE(contains(lastError(), "root 5 is outside [0, 2)")) << lastError();
    EXPECT_EQ(vigilAllReduce(buf.data(), buf.data() + 1, 4, vigilInt32, vigilSum, comm, nullptr), vigilInvalidArgument);
    EXPECT_TRUE(contains(lastError(), "VG-API-006")) << lastError();
    vigilStream_t fake = reinterpret_cast<vigilStream_t>(&buf);
    EXPECT_EQ(vigilAllReduce(buf.data(), buf.data(), 8, vigilInt32, vigilSum, comm, fake), vigilInvalidUsage);
    EXPECT_TRUE(contains(lastError(), "VG-API-013")) << lastError();
    EXPECT_TRUE(contains(lastError(), "is not a live vigil stream")) << lastError();
    EXPECT_EQ(vigilGroupEnd(), vigilInvalidUsage);
    EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-API-009")) << vigilGetLastError(nullptr);
    EXPECT_EQ(buf, std::vector<int>(8, rank + 1)) << "a refused call writes nothing";
    // The communicator is still good.
    EXPECT_OK(vigilAllReduce(buf.data(), buf.data(), 8, vigilInt32, vigilSum, comm, nullptr), comm);
    EXPECT_EQ(buf, std::vector<int>(8, 3));
  });
}

TEST(Lifecycle, FinalizeThenOnlyDestroy) {
  runRanks(3, [&](int, vigilComm_t comm) {
    int x = 1;
    EXPECT_OK(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr), comm);
    EXPECT_OK(vigilCommFinalize(comm), comm);
    EXPECT_EQ(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr), vigilInvalidUsage);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-COMM-003")) << vigilGetLastError(comm);
  });
}

TEST(Lifecycle, ThirtyInitDestroyCyclesLeakNoFdsOrThreads) {
  // Warm up once: the first cycle creates process-wide state (config, logger).
  runRanks(4, [](int, vigilComm_t) {});
  runningRootServers();
  const size_t fdsBefore = countEntries("/proc/self/fd");
  const size_t threadsBefore = countEntries("/proc/self/task");
  for (int cycle = 0; cycle < 30; ++cycle) {
    runRanks(4, [&](int rank, vigilComm_t comm) {
      int64_t v = rank;
      EXPECT_OK(vigilAllReduce(&v, &v, 1, vigilInt64, vigilSum, comm, nullptr), comm);
      EXPECT_EQ(v, 6);
    });
  }
  EXPECT_EQ(runningRootServers(), 0);  // joins the roots that served their rendezvous
  const size_t fdsAfter = countEntries("/proc/self/fd");
  const size_t threadsAfter = countEntries("/proc/self/task");
  std::cout << "after 30 cycles of 4 ranks: fds " << fdsBefore << " -> " << fdsAfter << ", threads " << threadsBefore
            << " -> " << threadsAfter << "\n";
  EXPECT_EQ(fdsAfter, fdsBefore);
  EXPECT_EQ(threadsAfter, threadsBefore);
}

}  // namespace
}  // namespace vigil::test
