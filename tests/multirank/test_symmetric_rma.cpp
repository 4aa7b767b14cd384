// The symmetric heap across hosts (docs/symmetric.md "Across hosts"):
// thread-ranks that declare two hosts (ranks 0-1 and 2-3, each host with its
// own shared segment), so that a peer on the other host is reached through
// the transport's one-sided access: UCX put, get, a remote atomic add,
// fence and flush; over TCP (no one-sided access) the same calls are
// refused with VG-SYM-004 naming the transport, and nothing is written.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/root_info.hpp"
#include "comm/communicator.hpp"
#include "common/thread_ranks.hpp"
#include "core/config.hpp"
#include "symm/heap.hpp"

namespace vigil {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

constexpr int kRanks = 4;

// body(rank, heap) on `ranks` thread-ranks over `transport`, `perHost` per declared host.
void onHosts(int ranks, int perHost, TransportKind transport,
             const std::function<void(int, Communicator&, SymmetricHeap&)>& body, int timeoutMs = 60000) {
  vigilRootInfo info = test::newRootInfo();
  const RootInfo root = RootInfo::decode(info);
  CommConfig config = CommConfig::resolve(nullptr, processConfig());
  config.transport = transport;
  config.timeoutMs = timeoutMs;
  std::vector<std::thread> threads;
  for (int r = 0; r < ranks; ++r) {
    threads.emplace_back([&, r] {
      InitOverrides overrides;
      overrides.hostId = "host-" + std::to_string(r / perHost);
      std::shared_ptr<Communicator> comm;
      try {
        comm = Communicator::create(ranks, root, r, config, overrides);
        body(r, *comm, *SymmetricHeap::of(*comm, /*create=*/true));
      } catch (const Error& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.text();
      }
      if (comm) comm->destroy();
    });
  }
  for (auto& t : threads) t.join();
}

// body(rank, heap) on kRanks thread-ranks over `transport`, two per declared host.
void onTwoHosts(TransportKind transport, const std::function<void(int, SymmetricHeap&)>& body, int timeoutMs = 60000) {
  onHosts(
      kRanks, 2, transport, [&](int rank, Communicator&, SymmetricHeap& heap) { body(rank, heap); }, timeoutMs);
}

#if VIGIL_TEST_UCX

uint8_t pattern(int from, int to, size_t i) {
  return static_cast<uint8_t>(from * 41 + to * 13 + i * 7 + (i >> 9));
}

// Every rank puts a block into every rank's copy (this host's by memcpy, the
// other host's over UCX: small and rendezvous-sized), then reads the other
// host's copies back with get.
TEST(SymmetricAcrossHosts, PutAndGetReachEveryRankOverUcx) {
  constexpr size_t kSmall = 200, kLarge = 300 * 1024;
  onTwoHosts(TransportKind::Ucx, [&](int rank, SymmetricHeap& heap) {
    auto* small = static_cast<uint8_t*>(heap.alloc(kSmall * kRanks));
    auto* large = static_cast<uint8_t*>(heap.alloc(kLarge * kRanks));
    std::vector<uint8_t> a(kSmall), b(kLarge);
    for (int q = 0; q < kRanks; ++q) {
      for (size_t i = 0; i < kSmall; ++i) a[i] = pattern(rank, q, i);
      for (size_t i = 0; i < kLarge; ++i) b[i] = pattern(rank, q, i + 1);
      heap.put(small + kSmall * static_cast<size_t>(rank), a.data(), kSmall, q);
      heap.put(large + kLarge * static_cast<size_t>(rank), b.data(), kLarge, q);
    }
    heap.barrierAll();
    for (int from = 0; from < kRanks; ++from) {
      for (size_t i = 0; i < kSmall; ++i) {
        ASSERT_EQ(small[kSmall * static_cast<size_t>(from) + i], pattern(from, rank, i))
            << "rank " << rank << ": small block from rank " << from << " byte " << i;
      }
      for (size_t i = 0; i < kLarge; ++i) {
        ASSERT_EQ(large[kLarge * static_cast<size_t>(from) + i], pattern(from, rank, i + 1))
            << "rank " << rank << ": large block from rank " << from << " byte " << i;
      }
    }
    // Gets from the other host: what rank q holds from rank `from`.
    const int q = (rank + 2) % kRanks;
    for (int from = 0; from < kRanks; ++from) {
      std::vector<uint8_t> got(kLarge, 0);
      heap.get(got.data(), large + kLarge * static_cast<size_t>(from), kLarge, q);
      for (size_t i = 0; i < kLarge; ++i) {
        ASSERT_EQ(got[i], pattern(from, q, i + 1)) << "rank " << rank << ": get from rank " << q << " byte " << i;
      }
    }
    heap.barrierAll();  // nobody frees what a peer still reads
    heap.free(large);
    heap.free(small);
  });
}

// Put-signal across hosts: a ring over the hosts (data, then a set signal,
// 50 rounds), then every rank adds 1 (and its rank) to one word of every
// other rank, mixing this host's CPU atomics with UCX's remote ones.
TEST(SymmetricAcrossHosts, PutSignalSetAndAddOverUcx) {
  constexpr size_t kBytes = 4096;
  onTwoHosts(TransportKind::Ucx, [&](int rank, SymmetricHeap& heap) {
    auto* data = static_cast<uint8_t*>(heap.alloc(kBytes));
    auto* words = static_cast<uint64_t*>(heap.alloc(2 * sizeof(uint64_t)));
    const int next = (rank + 2) % kRanks;  // on the other host
    const int prev = (rank + 2) % kRanks;
    std::vector<uint8_t> mine(kBytes);
    for (uint64_t round = 1; round <= 50; ++round) {
      for (size_t i = 0; i < kBytes; ++i) mine[i] = static_cast<uint8_t>(pattern(rank, next, i) + round);
      heap.putSignal(data, mine.data(), kBytes, &words[0], round, SignalOp::Set, next);
      EXPECT_GE(heap.waitUntil(&words[0], CmpOp::Ge, round, prev), round);
      for (size_t i = 0; i < kBytes; ++i) {
        ASSERT_EQ(data[i], static_cast<uint8_t>(pattern(prev, rank, i) + round))
            << "rank " << rank << " round " << round << " byte " << i << ": the data did not precede the signal";
      }
      heap.barrierAll();  // the buffer is written again in the next round
    }
    for (int q = 0; q < kRanks; ++q) {
      if (q != rank) heap.putSignal(data, nullptr, 0, &words[1], 1000 + static_cast<uint64_t>(rank), SignalOp::Add, q);
    }
    uint64_t want = 0;
    for (int q = 0; q < kRanks; ++q) want += q == rank ? 0 : 1000 + static_cast<uint64_t>(q);
    EXPECT_EQ(heap.waitUntil(&words[1], CmpOp::Eq, want, -1), want) << "rank " << rank;
    heap.barrierAll();
    heap.free(words);
    heap.free(data);
  });
}

// A peer pointer to the other host stays refused: there is no load/store path.
TEST(SymmetricAcrossHosts, PeerPointerToAnotherHostIsRefusedOverUcx) {
  onTwoHosts(TransportKind::Ucx, [&](int rank, SymmetricHeap& heap) {
    void* p = heap.alloc(64);
    EXPECT_NE(heap.peerPtr(p, rank ^ 1), nullptr);
    try {
      heap.peerPtr(p, (rank + 2) % kRanks);
      ADD_FAILURE() << "rank " << rank << ": a peer pointer to another host";
    } catch (const Error& e) {
      EXPECT_EQ(e.errc(), Errc::SymRemotePeer) << e.text();
      EXPECT_TRUE(contains(e.text(), "no load/store path")) << e.text();
    }
    heap.barrierAll();
    heap.free(p);
  });
}

// A wait for a signal from the other host that never comes names that rank.
TEST(SymmetricAcrossHosts, WaitTimeoutNamesThePeerOnTheOtherHost) {
  onTwoHosts(
      TransportKind::Ucx,
      [&](int rank, SymmetricHeap& heap) {
        auto* word = static_cast<uint64_t*>(heap.alloc(sizeof(uint64_t)));
        const int far = (rank + 2) % kRanks;
        try {  // every rank waits (and times out), so that none waits in the barrier below meanwhile
          heap.waitUntil(word, CmpOp::Ge, 1, far);
          ADD_FAILURE() << "rank " << rank << ": the wait returned";
        } catch (const Error& e) {
          EXPECT_EQ(e.errc(), Errc::SymWaitTimeout) << e.text();
          EXPECT_TRUE(contains(e.text(), "the rank expected to signal is " + std::to_string(far))) << e.text();
          EXPECT_TRUE(contains(e.text(), "rank " + std::to_string(far) + " (pid")) << e.text();
          EXPECT_TRUE(contains(e.text(), "runs on another host")) << e.text();
        }
        heap.barrierAll();
        heap.free(word);
      },
      /*timeoutMs=*/1500);
}

// True when the kernel reports thread `tid` of this process asleep (state S).
bool threadSleeps(pid_t tid) {
  std::ifstream stat("/proc/self/task/" + std::to_string(tid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'S';
}

// A peer on the other host that leaves ends the wait on it with its error.
TEST(SymmetricAcrossHosts, APeerOnAnotherHostThatLeavesEndsTheWait) {
  onTwoHosts(TransportKind::Ucx, [&](int rank, SymmetricHeap& heap) {
    auto* word = static_cast<uint64_t*>(heap.alloc(sizeof(uint64_t)));
    heap.barrierAll();
    if (rank == 2) {
      heap.comm().destroy();  // leaves while rank 0 waits for its signal
      return;
    }
    if (rank != 0) return;  // ranks 1 and 3 leave too, once done
    try {
      heap.waitUntil(word, CmpOp::Ge, 1, 2);
      ADD_FAILURE() << "the wait returned";
    } catch (const Error& e) {
      EXPECT_EQ(e.errc(), Errc::PeerLeft) << e.text();
      EXPECT_TRUE(contains(e.text(), "vigilSignalWaitUntil")) << e.text();
      EXPECT_TRUE(contains(e.text(), "rank 2")) << e.text();
    }
  });
}

// An abort from another thread wakes a waiter asleep on the UCX worker's
// events (one rank per host: no doorbell to look at meanwhile), and the
// peer on the other host that waits on the aborted rank hears of it.
TEST(SymmetricAcrossHosts, AbortFromAnotherThreadWakesAWaiterAsleepOnTheFabric) {
  onHosts(2, 1, TransportKind::Ucx, [&](int rank, Communicator& comm, SymmetricHeap& heap) {
    auto* word = static_cast<uint64_t*>(heap.alloc(sizeof(uint64_t)));
    heap.barrierAll();
    if (rank == 1) {
      try {
        heap.waitUntil(word, CmpOp::Eq, 7, 0);
        ADD_FAILURE() << "rank 1: the wait returned";
      } catch (const Error& e) {
        EXPECT_TRUE(contains(e.text(), "rank 0")) << e.text();
        EXPECT_TRUE(contains(e.text(), "test stops the wait")) << e.text();
      }
      return;
    }
    std::atomic<pid_t> waiterTid{0};
    std::string text;
    std::thread waiter([&] {
      waiterTid = static_cast<pid_t>(::syscall(SYS_gettid));
      try {
        heap.waitUntil(word, CmpOp::Eq, 7, 1);
      } catch (const Error& e) {
        text = e.text();
      }
    });
    while (waiterTid == 0 || !threadSleeps(waiterTid)) std::this_thread::yield();
    comm.abort("test stops the wait");
    waiter.join();
    EXPECT_TRUE(contains(text, "VG-COMM-001")) << text;
    EXPECT_TRUE(contains(text, "test stops the wait")) << text;
  });
}

#endif  // VIGIL_TEST_UCX

// Over TCP there is no one-sided access: calls to the other host are
// refused, naming the transport, and write nothing; this host's work.
TEST(SymmetricAcrossHosts, WithoutOneSidedAccessCallsToAnotherHostAreRefused) {
  onTwoHosts(TransportKind::Tcp, [&](int rank, SymmetricHeap& heap) {
    auto* data = static_cast<uint8_t*>(heap.alloc(256));
    std::memset(data, 0x5A, 256);
    heap.barrierAll();
    const int far = (rank + 2) % kRanks;
    std::vector<uint8_t> src(256, 0xEE);
    auto refused = [&](const std::function<void()>& call, const char* what) {
      try {
        call();
        ADD_FAILURE() << "rank " << rank << ": " << what << " to another host over tcp returned";
      } catch (const Error& e) {
        EXPECT_EQ(e.errc(), Errc::SymRemotePeer) << e.text();
        EXPECT_TRUE(contains(e.text(), "transport, tcp, has no one-sided access")) << e.text();
        EXPECT_TRUE(contains(e.text(), "rank " + std::to_string(far) + " runs on another host")) << e.text();
      }
    };
    refused([&] { heap.put(data, src.data(), 256, far); }, "vigilPut");
    refused([&] { heap.get(src.data(), data, 256, far); }, "vigilGet");
    refused([&] { heap.putSignal(data, src.data(), 8, reinterpret_cast<uint64_t*>(data + 64), 1, SignalOp::Set, far); },
            "vigilPutSignal");
    heap.put(data, src.data(), 16, rank ^ 1);  // this host still works
    heap.barrierAll();
    for (size_t i = 16; i < 256; ++i) ASSERT_EQ(data[i], 0x5A) << "rank " << rank << " byte " << i;
    for (size_t i = 0; i < 16; ++i) ASSERT_EQ(data[i], 0xEE) << "rank " << rank << " byte " << i;
    heap.free(data);
  });
}

}  // namespace
}  // namespace vigil
