// Symmetric memory (symm/heap.hpp) through the C API, thread-ranks over
// loopback: the heap (sizes, zeroing, peer pointers, mismatches, exhaustion,
// free and reuse, cycles without leaks), every one-sided call and compare
// op, the refusals (bounds, addresses, ops, peers), and waits that end with
// a timeout naming the peer, a peer that left, or an abort.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "common/thread_ranks.hpp"
#include "vigil/vigil.h"

namespace {

using vigil::test::runRanks;
using vigil::test::testConfig;

// Each rank's part of the heap in this binary: small, so that exhaustion is cheap to reach.
const bool kSmallHeap = ::setenv("VIGIL_SYMMETRIC_HEAP", "64M", /*overwrite=*/0) == 0;
constexpr size_t kHeap = size_t{64} << 20;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

#define OK(call, comm) ASSERT_EQ((call), vigilSuccess) << vigilGetLastError(comm)

uint8_t pattern(int from, int to, size_t i) {
  return static_cast<uint8_t>(from * 31 + to * 7 + i * 13 + (i >> 9));
}

int countOpenFds() {
  int n = 0;
  if (DIR* d = ::opendir("/proc/self/fd")) {
    while (::readdir(d) != nullptr) ++n;
    ::closedir(d);
  }
  return n;
}

// Segments this process made (their names carry its pid; tests in other
// processes run beside it).
int countSymmetricSegments() {
  const std::string prefix = "vigil-symm-" + std::to_string(::getpid()) + "-";
  int n = 0;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) n += std::string(e->d_name).rfind(prefix, 0) == 0 ? 1 : 0;
    ::closedir(d);
  }
  return n;
}

class SymmetricRanks : public ::testing::TestWithParam<int> {};

// Allocations are zero, land at the same offset on every rank, and a peer's
// copy is plain memory: stores through vigilMemPeerPtr are seen after a barrier.
TEST_P(SymmetricRanks, AllocZeroedAndPeerPointers) {
  const int n = GetParam();
  runRanks(n, [n](int rank, vigilComm_t& comm) {
    ASSERT_TRUE(kSmallHeap);
    std::vector<void*> ptrs;
    for (size_t bytes : {size_t{8}, size_t{100}, size_t{4096}, size_t{1} << 20, size_t{3}}) {
      void* p = nullptr;
      OK(vigilMemAlloc(comm, bytes, &p), comm);
      ASSERT_NE(p, nullptr);
      const auto* b = static_cast<const uint8_t*>(p);
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(b[i], 0) << "byte " << i << " of " << bytes;
      ptrs.push_back(p);
    }
    // Every rank writes its pattern into slot `rank` of every peer's 1 MiB allocation.
    auto* big = static_cast<uint8_t*>(ptrs[3]);
    const size_t slot = (size_t{1} << 20) / static_cast<size_t>(n);
    for (int peer = 0; peer < n; ++peer) {
      void* q = nullptr;
      OK(vigilMemPeerPtr(comm, big, peer, &q), comm);
      auto* dst = static_cast<uint8_t*>(q) + slot * static_cast<size_t>(rank);
      for (size_t i = 0; i < slot; ++i) dst[i] = pattern(rank, peer, i);
    }
    OK(vigilBarrierAll(comm, nullptr), comm);
    for (int from = 0; from < n; ++from) {
      for (size_t i = 0; i < slot; ++i) {
        ASSERT_EQ(big[slot * static_cast<size_t>(from) + i], pattern(from, rank, i)) << "from " << from << " byte " << i;
      }
    }
    OK(vigilBarrierAll(comm, nullptr), comm);
    for (void* p : ptrs) {
      OK(vigilMemFree(comm, p), comm);
    }
  });
}

// put, get and put-signal with both signal ops; every rank talks to every rank (itself included).
TEST_P(SymmetricRanks, PutGetPutSignal) {
  const int n = GetParam();
  runRanks(n, [n](int rank, vigilComm_t& comm) {
    const size_t block = 3000;
    void* data = nullptr;
    void* sigs = nullptr;
    OK(vigilMemAlloc(comm, block * static_cast<size_t>(n), &data), comm);
    OK(vigilMemAlloc(comm, 2 * sizeof(uint64_t), &sigs), comm);
    auto* counter = static_cast<uint64_t*>(sigs);
    uint64_t* flag = counter + 1;
    auto* d = static_cast<uint8_t*>(data);
    std::vector<uint8_t> mine(block);
    for (int peer = 0; peer < n; ++peer) {
      for (size_t i = 0; i < block; ++i) mine[i] = pattern(rank, peer, i);
      // Block `rank` of the peer's copy, then one more on the peer's counter.
      OK(vigilPutSignal(d + block * static_cast<size_t>(rank), mine.data(), block, counter, 1, vigilSignalAdd, peer,
                        comm, nullptr),
         comm);
    }
    uint64_t seen = 0;
    OK(vigilSignalWaitUntil(counter, vigilCmpEq, static_cast<uint64_t>(n), -1, &seen, comm, nullptr), comm);
    EXPECT_EQ(seen, static_cast<uint64_t>(n));
    for (int from = 0; from < n; ++from) {
      for (size_t i = 0; i < block; ++i) {
        ASSERT_EQ(d[block * static_cast<size_t>(from) + i], pattern(from, rank, i)) << "from " << from;
      }
    }
    // Every rank has checked its copy before anyone reads or overwrites it.
    OK(vigilBarrierAll(comm, nullptr), comm);
    // get: read the right neighbour's block 0 (written there by rank 0).
    const int right = (rank + 1) % n;
    std::vector<uint8_t> got(block);
    OK(vigilGet(got.data(), d, block, right, comm, nullptr), comm);
    for (size_t i = 0; i < block; ++i) ASSERT_EQ(got[i], pattern(0, right, i));
    OK(vigilBarrierAll(comm, nullptr), comm);
    // put, then set the right neighbour's flag to our rank + 100: the data arrives first.
    for (size_t i = 0; i < block; ++i) mine[i] = static_cast<uint8_t>(i ^ rank);
    OK(vigilQuiet(comm, nullptr), comm);
    OK(vigilPut(d, mine.data(), block, right, comm, nullptr), comm);
    OK(vigilFence(comm, nullptr), comm);
    OK(vigilPutSignal(nullptr, nullptr, 0, flag, static_cast<uint64_t>(rank) + 100, vigilSignalSet, right, comm, nullptr),
       comm);
    const int left = (rank + n - 1) % n;
    OK(vigilSignalWaitUntil(flag, vigilCmpEq, static_cast<uint64_t>(left) + 100, left, &seen, comm, nullptr), comm);
    for (size_t i = 0; i < block; ++i) ASSERT_EQ(d[i], static_cast<uint8_t>(i ^ left));
    OK(vigilBarrierAll(comm, nullptr), comm);
    OK(vigilMemFree(comm, sigs), comm);
    OK(vigilMemFree(comm, data), comm);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, SymmetricRanks, ::testing::Values(1, 2, 3, 8));

// Every compare op, true and false: a wait that is already true returns at once with the value.
TEST(Symmetric, EveryCompareOp) {
  runRanks(2, [](int rank, vigilComm_t& comm) {
    void* p = nullptr;
    OK(vigilMemAlloc(comm, 8, &p), comm);
    auto* sig = static_cast<uint64_t*>(p);
    struct Case {
      vigilCmpOp_t cmp;
      uint64_t value;    // we wait for: *sig cmp value
      uint64_t initial;  // false before the peer sets 5
    };
    const Case cases[] = {{vigilCmpEq, 5, 0}, {vigilCmpNe, 0, 0}, {vigilCmpGt, 4, 0},
                          {vigilCmpGe, 5, 0}, {vigilCmpLt, 6, 10}, {vigilCmpLe, 5, 10}};
    for (const Case& c : cases) {
      if (rank == 0) *sig = c.initial;
      OK(vigilBarrierAll(comm, nullptr), comm);
      if (rank == 1) {
        OK(vigilPutSignal(nullptr, nullptr, 0, sig, 5, vigilSignalSet, 0, comm, nullptr), comm);
      }
      if (rank == 0) {
        uint64_t seen = 0;
        OK(vigilSignalWaitUntil(sig, c.cmp, c.value, 1, &seen, comm, nullptr), comm);
        EXPECT_EQ(seen, 5u) << "cmp " << c.cmp;
      }
      OK(vigilBarrierAll(comm, nullptr), comm);
    }
    OK(vigilMemFree(comm, p), comm);
  });
}

TEST(Symmetric, MismatchedSizesFailEveryRankAndAllocateNothing) {
  runRanks(3, [](int rank, vigilComm_t& comm) {
    void* p = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(vigilMemAlloc(comm, rank == 2 ? 8192 : 4096, &p), vigilMismatch);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-SYM-001")) << text;
    EXPECT_TRUE(contains(text, "vigilMemAlloc")) << text;
    EXPECT_TRUE(contains(text, rank == 2 ? "4096 on rank 0" : "8192 on rank 2")) << text;
    EXPECT_EQ(p, nullptr);
    // Nothing was taken: the whole heap is still free.
    OK(vigilMemAlloc(comm, kHeap, &p), comm);
    OK(vigilMemFree(comm, p), comm);
    // Freeing different allocations is a mismatch too, and frees nothing.
    void* a = nullptr;
    void* b = nullptr;
    OK(vigilMemAlloc(comm, 64, &a), comm);
    OK(vigilMemAlloc(comm, 64, &b), comm);
    EXPECT_EQ(vigilMemFree(comm, rank == 1 ? b : a), vigilMismatch);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "VG-SYM-001")) << vigilGetLastError(comm);
    OK(vigilMemFree(comm, a), comm);
    OK(vigilMemFree(comm, b), comm);
  });
}

TEST(Symmetric, ExhaustionIsAnErrorAndFreeingMakesRoom) {
  runRanks(2, [](int, vigilComm_t& comm) {
    void* big = nullptr;
    OK(vigilMemAlloc(comm, kHeap / 4 * 3, &big), comm);
    void* more = reinterpret_cast<void*>(0x1);
    EXPECT_EQ(vigilMemAlloc(comm, kHeap / 2, &more), vigilSystemError);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-SYM-002")) << text;
    EXPECT_TRUE(contains(text, "its largest free range is 16777216 bytes")) << text;
    EXPECT_TRUE(contains(text, "VIGIL_SYMMETRIC_HEAP")) << text;
    EXPECT_EQ(more, nullptr);
    OK(vigilMemFree(comm, big), comm);
    OK(vigilMemAlloc(comm, kHeap / 2, &more), comm);
    // Reused memory reads as zero again.
    auto* b = static_cast<uint8_t*>(more);
    for (size_t i = 0; i < kHeap / 2; i += 4093) ASSERT_EQ(b[i], 0);
    OK(vigilMemFree(comm, more), comm);
  });
}

TEST(Symmetric, FreedMemoryReadsZeroWhenReallocated) {
  runRanks(2, [](int rank, vigilComm_t& comm) {
    for (size_t bytes : {size_t{24}, size_t{5000}}) {
      void* p = nullptr;
      OK(vigilMemAlloc(comm, bytes, &p), comm);
      std::memset(p, 0xab + rank, bytes);
      OK(vigilMemFree(comm, p), comm);
      void* q = nullptr;
      OK(vigilMemAlloc(comm, bytes, &q), comm);
      EXPECT_EQ(q, p);  // first fit: the same range
      for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(static_cast<uint8_t*>(q)[i], 0) << i;
      OK(vigilMemFree(comm, q), comm);
    }
  });
}

// 30 communicators, each with a heap, allocations and a barrier: no file
// descriptor, mapping or /dev/shm name is left behind.
TEST(Symmetric, ThirtyCyclesLeaveNothing) {
  const int segmentsBefore = countSymmetricSegments();
  int fdsBefore = -1;
  for (int cycle = 0; cycle < 30; ++cycle) {
    runRanks(2, [](int, vigilComm_t& comm) {
      void* p = nullptr;
      OK(vigilMemAlloc(comm, 1 << 16, &p), comm);
      OK(vigilBarrierAll(comm, nullptr), comm);
      OK(vigilMemFree(comm, p), comm);
    });
    if (cycle == 0) fdsBefore = countOpenFds();  // after the first: lazily made process state exists
  }
  EXPECT_EQ(countOpenFds(), fdsBefore);
  EXPECT_EQ(countSymmetricSegments(), segmentsBefore);
}

TEST(Symmetric, RefusalsNameTheProblemAndChangeNothing) {
  runRanks(2, [](int rank, vigilComm_t& comm) {
    void* p = nullptr;
    OK(vigilMemAlloc(comm, 100, &p), comm);
    auto* d = static_cast<uint8_t*>(p);
    const int peer = 1 - rank;
    std::vector<uint8_t> src(200, 0xee);
    auto expectRefused = [&](vigilResult_t rc, vigilResult_t want, const std::vector<std::string>& parts) {
      EXPECT_EQ(rc, want);
      const std::string text = vigilGetLastError(comm);
      for (const std::string& part : parts) EXPECT_TRUE(contains(text, part)) << text;
    };
    expectRefused(vigilPut(d + 60, src.data(), 64, peer, comm, nullptr), vigilInvalidArgument,
                  {"VG-SYM-003", "vigilPut", "bytes [60, 124) of symmetric allocation #1 (100 bytes", "24 bytes past its end"});
    expectRefused(vigilGet(src.data(), d + 99, 2, peer, comm, nullptr), vigilInvalidArgument,
                  {"VG-SYM-003", "vigilGet", "1 bytes past its end"});
    expectRefused(vigilPut(src.data(), src.data(), 8, peer, comm, nullptr), vigilInvalidArgument,
                  {"VG-SYM-003", "is not inside a live symmetric allocation"});
    expectRefused(vigilPutSignal(d, src.data(), 8, reinterpret_cast<uint64_t*>(d + 4), 1, vigilSignalSet, peer, comm,
                                 nullptr),
                  vigilInvalidArgument, {"VG-SYM-003", "not 8-byte aligned"});
    expectRefused(vigilPutSignal(d, src.data(), 8, reinterpret_cast<uint64_t*>(d), 1, static_cast<vigilSignalOp_t>(7),
                                 peer, comm, nullptr),
                  vigilInvalidArgument, {"VG-SYM-007", "sigOp 7"});
    expectRefused(vigilSignalWaitUntil(reinterpret_cast<uint64_t*>(d), static_cast<vigilCmpOp_t>(9), 0, -1, nullptr,
                                       comm, nullptr),
                  vigilInvalidArgument, {"VG-SYM-007", "cmp 9"});
    expectRefused(vigilPut(d, src.data(), 8, 5, comm, nullptr), vigilInvalidArgument, {"VG-API-005", "peer 5"});
    void* q = nullptr;
    expectRefused(vigilMemPeerPtr(comm, src.data(), peer, &q), vigilInvalidArgument, {"VG-SYM-003"});
    EXPECT_EQ(q, nullptr);
    // Nothing was written anywhere, and the communicator still works.
    OK(vigilBarrierAll(comm, nullptr), comm);
    for (int i = 0; i < 100; ++i) ASSERT_EQ(d[i], 0) << i;
    OK(vigilBarrierAll(comm, nullptr), comm);
    OK(vigilMemFree(comm, p), comm);
  });
}

// Both ranks wait for a signal the other never sends: each times out, naming
// the other and what it is doing.
TEST(Symmetric, WaitTimeoutNamesThePeerAndWhatItDoes) {
  runRanks(
      2,
      [](int rank, vigilComm_t& comm) {
        void* p = nullptr;
        OK(vigilMemAlloc(comm, 16, &p), comm);
        auto* sig = static_cast<uint64_t*>(p) + rank;
        const int peer = 1 - rank;
        uint64_t seen = 99;
        EXPECT_EQ(vigilSignalWaitUntil(sig, vigilCmpGe, 4, peer, &seen, comm, nullptr), vigilTimeout);
        const std::string text = vigilGetLastError(comm);
        EXPECT_TRUE(contains(text, "VG-SYM-005")) << text;
        EXPECT_TRUE(contains(text, "vigilSignalWaitUntil: waited 1500 ms (vigilConfig.timeoutMs)")) << text;
        EXPECT_TRUE(contains(text, "to become >= 4; it holds 0; the rank expected to signal is " + std::to_string(peer)))
            << text;
        // The peer's own wait (or, if it already gave up, its last call) is named.
        EXPECT_TRUE(contains(text, "rank " + std::to_string(peer) + " (pid ")) << text;
        EXPECT_TRUE(contains(text, "vigilSignalWaitUntil on its signal at heap offset " + std::to_string(8 * peer) +
                                       " for >= 4 from rank " + std::to_string(rank)))
            << text;
        vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;
        OK(vigilGetLastErrorInfo(comm, &info), comm);
        EXPECT_EQ(info.peer, peer);
        EXPECT_EQ(seen, 99u);  // not written on failure
        // A timed-out wait leaves the communicator usable; and neither rank
        // leaves while the other still waits (its wait would end with
        // VG-PEER-002, this rank having left, instead of its own timeout).
        OK(vigilBarrier(comm, nullptr), comm);
      },
      testConfig(1500));
}

// A peer that leaves ends the wait on it with the peer's error, not a timeout.
TEST(Symmetric, PeerThatLeavesEndsTheWait) {
  runRanks(2, [](int rank, vigilComm_t& comm) {
    void* p = nullptr;
    OK(vigilMemAlloc(comm, 8, &p), comm);
    if (rank == 1) {
      OK(vigilCommDestroy(comm), comm);
      comm = nullptr;
      return;
    }
    EXPECT_EQ(vigilSignalWaitUntil(static_cast<uint64_t*>(p), vigilCmpEq, 1, 1, nullptr, comm, nullptr),
              vigilRemoteError);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "vigilSignalWaitUntil")) << text;
    EXPECT_TRUE(contains(text, "rank 1")) << text;
    EXPECT_TRUE(contains(text, "left the communicator")) << text;
  });
}

// True when the kernel reports thread `tid` of this process asleep (state S).
bool threadSleeps(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');  // the name may hold spaces; the state follows it
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'S';
}

// vigilCommAbort from another thread ends a wait at once; the peer waiting
// on the aborted rank hears of it.
TEST(Symmetric, AbortFromAnotherThreadEndsTheWait) {
  runRanks(2, [](int rank, vigilComm_t& comm) {
    void* p = nullptr;
    OK(vigilMemAlloc(comm, 8, &p), comm);
    OK(vigilBarrierAll(comm, nullptr), comm);
    auto* sig = static_cast<uint64_t*>(p);
    if (rank == 1) {
      // Rank 0 never signals: it is aborted while it waits for us.
      const vigilResult_t rc = vigilSignalWaitUntil(sig, vigilCmpEq, 7, 0, nullptr, comm, nullptr);
      const std::string text = vigilGetLastError(comm);
      EXPECT_TRUE(rc == vigilRemoteError || rc == vigilAborted) << rc << " " << text;
      EXPECT_TRUE(contains(text, "rank 0")) << text;
      EXPECT_TRUE(contains(text, "test stops the wait")) << text;
      return;
    }
    std::atomic<pid_t> waiterTid{0};
    vigilResult_t rc = vigilSuccess;
    std::string text;
    std::thread waiter([&] {
      waiterTid = static_cast<pid_t>(::syscall(SYS_gettid));
      rc = vigilSignalWaitUntil(sig, vigilCmpEq, 7, 1, nullptr, comm, nullptr);
      text = vigilGetLastError(comm);
    });
    // Abort only once the waiter sleeps inside the wait: before the call it
    // never blocks, so state S in /proc means it is in the wait's sleep.
    while (waiterTid == 0 || !threadSleeps(waiterTid)) std::this_thread::yield();
    EXPECT_EQ(vigilCommAbortWithReason(comm, "test stops the wait"), vigilSuccess);
    waiter.join();
    EXPECT_EQ(rc, vigilAborted) << text;
    EXPECT_TRUE(contains(text, "VG-COMM-001")) << text;
    EXPECT_TRUE(contains(text, "test stops the wait")) << text;
    comm = nullptr;
  });
}

// After an abort the heap stays mapped: a thread that still loads or stores
// through a symmetric or peer pointer (a compute kernel, a Python array)
// reads what was there and does not fault.
TEST(Symmetric, AbortKeepsTheHeapMapped) {
  runRanks(2, [](int rank, vigilComm_t& comm) {
    void* p = nullptr;
    OK(vigilMemAlloc(comm, 4096, &p), comm);
    static_cast<uint32_t*>(p)[0] = 100 + static_cast<uint32_t>(rank);
    OK(vigilBarrierAll(comm, nullptr), comm);
    void* peer = nullptr;
    OK(vigilMemPeerPtr(comm, p, 1 - rank, &peer), comm);
    OK(vigilBarrierAll(comm, nullptr), comm);  // both read nothing yet; both abort next
    EXPECT_EQ(vigilCommAbortWithReason(comm, "test"), vigilSuccess);
    comm = nullptr;
    EXPECT_EQ(static_cast<uint32_t*>(p)[0], 100u + static_cast<uint32_t>(rank));
    EXPECT_EQ(static_cast<uint32_t*>(peer)[0], 100u + static_cast<uint32_t>(1 - rank));
    static_cast<uint32_t*>(peer)[1] = 7;  // a store after the abort: the memory is still there
  });
}

// Queued on a stream: the calls run in order on the stream's thread.
TEST(Symmetric, OnAStream) {
  runRanks(2, [](int rank, vigilComm_t& comm) {
    void* p = nullptr;
    OK(vigilMemAlloc(comm, 4096 + 8, &p), comm);
    auto* d = static_cast<uint8_t*>(p);
    auto* sig = reinterpret_cast<uint64_t*>(d + 4096);
    vigilStream_t s = nullptr;
    OK(vigilStreamCreate(&s), comm);
    std::vector<uint8_t> src(4096, static_cast<uint8_t>(rank + 1));
    uint64_t seen = 0;
    OK(vigilPutSignal(d, src.data(), 4096, sig, 1, vigilSignalAdd, 1 - rank, comm, s), comm);
    OK(vigilSignalWaitUntil(sig, vigilCmpEq, 1, 1 - rank, &seen, comm, s), comm);
    OK(vigilBarrierAll(comm, s), comm);
    OK(vigilStreamSynchronize(s), comm);
    EXPECT_EQ(seen, 1u);
    for (size_t i = 0; i < 4096; ++i) ASSERT_EQ(d[i], 2 - rank);
    // A refusal on a stream comes back at synchronize.
    OK(vigilPut(d + 4000, src.data(), 200, 1 - rank, comm, s), comm);
    EXPECT_EQ(vigilStreamSynchronize(s), vigilInvalidArgument);
    OK(vigilStreamDestroy(s), comm);
    OK(vigilMemFree(comm, p), comm);
  });
}

// Many barriers on 8 ranks sharing 2 cores: each round's puts are seen by every rank after it.
TEST(Symmetric, BarrierAllOrdersRounds) {
  constexpr int n = 8;
  runRanks(n, [](int rank, vigilComm_t& comm) {
    void* p = nullptr;
    OK(vigilMemAlloc(comm, n * sizeof(uint64_t), &p), comm);
    auto* slots = static_cast<uint64_t*>(p);
    for (uint64_t round = 1; round <= 200; ++round) {
      const uint64_t v = round * 100 + static_cast<uint64_t>(rank);
      for (int peer = 0; peer < n; ++peer) {
        OK(vigilPut(slots + rank, &v, sizeof v, peer, comm, nullptr), comm);
      }
      OK(vigilBarrierAll(comm, nullptr), comm);
      for (int from = 0; from < n; ++from) ASSERT_EQ(slots[from], round * 100 + static_cast<uint64_t>(from));
      OK(vigilBarrierAll(comm, nullptr), comm);
    }
    OK(vigilMemFree(comm, p), comm);
  });
}

// The symmetric allreduce gives the bits of vigilAllReduce: every dtype and
// reduction, odd rank counts, in place, sizes around the chunk and slice edges.
class SymmetricAllReduce : public ::testing::TestWithParam<int> {};

TEST_P(SymmetricAllReduce, SameBitsAsVigilAllReduce) {
  const int n = GetParam();
  runRanks(n, [n](int rank, vigilComm_t& comm) {
    struct Case {
      vigilDataType_t dtype;
      vigilRedOp_t op;
      size_t elem;
    };
    const Case cases[] = {{vigilFloat32, vigilSum, 4}, {vigilFloat16, vigilAvg, 2}, {vigilBfloat16, vigilMax, 2},
                          {vigilInt32, vigilProd, 4}, {vigilFloat64, vigilMin, 8}, {vigilInt64, vigilAvg, 8}};
    for (size_t count : {size_t{1}, size_t{7}, size_t{16385}, size_t{300001}}) {
      for (const Case& c : cases) {
        const size_t bytes = count * c.elem;
        void* send = nullptr;
        void* recv = nullptr;
        OK(vigilMemAlloc(comm, bytes, &send), comm);
        OK(vigilMemAlloc(comm, bytes, &recv), comm);
        // Values whose sums round differently in another order.
        auto* in = static_cast<uint8_t*>(send);
        for (size_t i = 0; i < bytes; ++i) in[i] = static_cast<uint8_t>((i * 2654435761u + static_cast<size_t>(rank) * 97) >> 7);
        if (c.dtype == vigilFloat32 || c.dtype == vigilFloat64 || c.dtype == vigilFloat16 || c.dtype == vigilBfloat16) {
          // Keep floats finite: clear the exponent's top bit of every element.
          for (size_t i = 0; i < count; ++i) in[i * c.elem + c.elem - 1] &= 0x3f;
        }
        std::vector<uint8_t> input(in, in + bytes), expected(bytes);
        OK(vigilAllReduce(input.data(), expected.data(), count, c.dtype, c.op, comm, nullptr), comm);
        OK(vigilAllReduceSymmetric(send, recv, count, c.dtype, c.op, comm, nullptr), comm);
        ASSERT_EQ(std::memcmp(recv, expected.data(), bytes), 0) << "dtype " << c.dtype << " op " << c.op << " count " << count;
        ASSERT_EQ(std::memcmp(send, input.data(), bytes), 0) << "the input changed";
        // In place.
        OK(vigilAllReduceSymmetric(send, send, count, c.dtype, c.op, comm, nullptr), comm);
        ASSERT_EQ(std::memcmp(send, expected.data(), bytes), 0) << "in place, dtype " << c.dtype << " count " << count;
        OK(vigilMemFree(comm, recv), comm);
        OK(vigilMemFree(comm, send), comm);
      }
    }
    (void)n;
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, SymmetricAllReduce, ::testing::Values(1, 2, 3, 5));

TEST(Symmetric, AllReduceWithDifferentArgumentsFailsEveryRank) {
  runRanks(3, [](int rank, vigilComm_t& comm) {
    void* buf = nullptr;
    OK(vigilMemAlloc(comm, 4096, &buf), comm);
    EXPECT_EQ(vigilAllReduceSymmetric(buf, buf, rank == 1 ? 100 : 200, vigilFloat32, vigilSum, comm, nullptr),
              vigilMismatch);
    std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-SYM-001")) << text;
    EXPECT_TRUE(contains(text, rank == 1 ? "rank 0 runs it with other arguments (200 elements"
                                         : "rank 1 runs it with other arguments (100 elements"))
        << text;
    // Rank 2 calls vigilBarrierAll where the others run the allreduce: all three hear of it.
    const vigilResult_t rc = rank == 2 ? vigilBarrierAll(comm, nullptr)
                                       : vigilAllReduceSymmetric(buf, buf, 10, vigilFloat32, vigilSum, comm, nullptr);
    EXPECT_EQ(rc, vigilMismatch);
    text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-SYM-001")) << text;
    EXPECT_TRUE(contains(text, rank == 2 ? "and rank 0 reached it in vigilAllReduceSymmetric (its entry barrier)"
                                         : "and rank 2 reached it in vigilBarrierAll;"))
        << text;
    OK(vigilMemFree(comm, buf), comm);
  });
}

TEST(Symmetric, CallsWithoutAHeap) {
  runRanks(2, [](int, vigilComm_t& comm) {
    uint64_t x = 0;
    EXPECT_EQ(vigilPut(&x, &x, 8, 0, comm, nullptr), vigilInvalidArgument);
    EXPECT_TRUE(contains(vigilGetLastError(comm), "has no symmetric allocation")) << vigilGetLastError(comm);
    OK(vigilQuiet(comm, nullptr), comm);
    OK(vigilFence(comm, nullptr), comm);
    OK(vigilBarrierAll(comm, nullptr), comm);  // makes the heap: collective
    void* p = reinterpret_cast<void*>(0x1);
    OK(vigilMemAlloc(comm, 0, &p), comm);
    EXPECT_EQ(p, nullptr);
    OK(vigilMemFree(comm, nullptr), comm);
  });
}

}  // namespace
