// One-sided windows (comm/rma_window.hpp) over the transport that has them
// (UCX), and their refusals: a range outside the target's part, a transport
// without one-sided access. Thread-ranks over loopback.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "bootstrap/root_info.hpp"
#include "comm/communicator.hpp"
#include "comm/rma_window.hpp"
#include "common/thread_ranks.hpp"
#include "core/config.hpp"

namespace vigil {
namespace {

using test::newRootInfo;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Runs body(rank, comm) on n thread-ranks whose communicators use `transport`.
void onRanks(int n, TransportKind transport, const std::function<void(int, Communicator&)>& body) {
  vigilRootInfo info = newRootInfo();
  const RootInfo root = RootInfo::decode(info);
  CommConfig config = CommConfig::resolve(nullptr, processConfig());
  config.transport = transport;
  config.timeoutMs = 60000;
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      std::shared_ptr<Communicator> comm;
      try {
        comm = Communicator::create(n, root, r, config);
      } catch (const Error& e) {
        ADD_FAILURE() << "rank " << r << ": " << e.text();
        return;
      }
      body(r, *comm);
      comm->destroy();
    });
  }
  for (auto& t : threads) t.join();
}

void barrier(Communicator& comm) {
  comm.run(OpDesc{.kind = OpKind::Barrier});
}

#if VIGIL_TEST_UCX

uint8_t pattern(int from, int to, size_t i) {
  return static_cast<uint8_t>(from * 37 + to * 11 + i * 7 + (i >> 8));
}

// Every rank puts a block into every rank's part (its own included), small
// and large (UCX's rendezvous sizes), then reads its left neighbour's part
// back with gets; the parts differ in size per rank.
TEST(RmaWindow, PutsAndGetsReachEveryRankOverUcx) {
  constexpr int kRanks = 4;
  constexpr size_t kSmall = 100, kLarge = 512 * 1024;
  onRanks(kRanks, TransportKind::Ucx, [&](int rank, Communicator& comm) {
    EXPECT_STREQ(comm.transportName(), "ucx");
    const size_t mineBytes = kRanks * kSmall + kLarge + 64 * static_cast<size_t>(rank);
    std::vector<uint8_t> mine(mineBytes, 0xA5);
    std::unique_ptr<RmaWindow> window = comm.createWindow(mine.data(), mine.size());
    for (int q = 0; q < kRanks; ++q)
      ASSERT_EQ(window->bytes(q), kRanks * kSmall + kLarge + 64 * static_cast<size_t>(q));

    std::vector<std::vector<uint8_t>> small(kRanks, std::vector<uint8_t>(kSmall));
    for (int q = 0; q < kRanks; ++q) {
      for (size_t i = 0; i < kSmall; ++i) small[q][i] = pattern(rank, q, i);
      window->put(q, kSmall * static_cast<size_t>(rank), small[q].data(), kSmall);
    }
    const int right = (rank + 1) % kRanks, left = (rank + kRanks - 1) % kRanks;
    std::vector<uint8_t> large(kLarge);
    for (size_t i = 0; i < kLarge; ++i) large[i] = pattern(rank, right, i);
    window->put(right, kRanks * kSmall, large.data(), kLarge);
    window->flush();
    barrier(comm);  // every rank's puts are complete everywhere

    for (int from = 0; from < kRanks; ++from) {
      for (size_t i = 0; i < kSmall; ++i) {
        ASSERT_EQ(mine[kSmall * static_cast<size_t>(from) + i], pattern(from, rank, i))
            << "from " << from << " i " << i;
      }
    }
    for (size_t i = 0; i < kLarge; ++i) ASSERT_EQ(mine[kRanks * kSmall + i], pattern(left, rank, i)) << i;
    for (size_t i = kRanks * kSmall + kLarge; i < mineBytes; ++i) ASSERT_EQ(mine[i], 0xA5) << i;  // untouched

    // Gets: the left neighbour's part, whole.
    std::vector<uint8_t> theirs(window->bytes(left));
    window->get(left, 0, theirs.data(), theirs.size());
    window->flush();
    for (int from = 0; from < kRanks; ++from) {
      for (size_t i = 0; i < kSmall; ++i)
        ASSERT_EQ(theirs[kSmall * static_cast<size_t>(from) + i], pattern(from, left, i));
    }
    const int leftOfLeft = (left + kRanks - 1) % kRanks;
    for (size_t i = 0; i < kLarge; ++i) ASSERT_EQ(theirs[kRanks * kSmall + i], pattern(leftOfLeft, left, i)) << i;
    barrier(comm);  // nobody unregisters while a neighbour still reads
  });
}

// A range past the end of the target's part is refused before anything
// moves, naming the rank and the sizes; the window and communicator go on.
TEST(RmaWindow, ARangeOutsideTheTargetsPartIsRefused) {
  onRanks(2, TransportKind::Ucx, [&](int rank, Communicator& comm) {
    std::vector<uint8_t> mine(1000 + 24 * static_cast<size_t>(rank), 0);
    std::unique_ptr<RmaWindow> window = comm.createWindow(mine.data(), mine.size());
    const int other = 1 - rank;
    const size_t limit = window->bytes(other);
    std::vector<uint8_t> data(64, 7);
    try {
      window->put(other, limit - 10, data.data(), 20);
      ADD_FAILURE() << "a put past the end was started";
    } catch (const Error& e) {
      EXPECT_EQ(e.errc(), Errc::ApiRmaOutOfWindow) << e.text();
      EXPECT_TRUE(contains(e.text(), "VG-API-020")) << e.text();
      EXPECT_TRUE(contains(e.text(), "bytes [" + std::to_string(limit - 10) + ", " + std::to_string(limit + 10) +
                                         ") of rank " + std::to_string(other) + "'s window, which holds " +
                                         std::to_string(limit) + " bytes"))
          << e.text();
    }
    EXPECT_THROW(window->get(other, SIZE_MAX, data.data(), 2), Error);  // offset + bytes wraps: refused too
    EXPECT_THROW(window->put(2, 0, data.data(), 1), Error);             // no rank 2
    window->put(other, limit - 10, data.data(), 10);                    // the last 10 bytes: fine
    window->flush();
    barrier(comm);
    EXPECT_EQ(mine[mine.size() - 1], 7);
    EXPECT_EQ(mine[mine.size() - 11], 0);
    barrier(comm);
  });
}

#endif  // VIGIL_TEST_UCX

// Windows need one-sided access: over tcp and shm every rank is told which
// transport has it, with VG-NET-008, and the communicator stays usable.
TEST(RmaWindow, ATransportWithoutOneSidedAccessRefusesAWindow) {
  for (TransportKind transport : {TransportKind::Tcp, TransportKind::Shm}) {
    onRanks(2, transport, [&](int, Communicator& comm) {
      std::vector<uint8_t> mine(64);
      try {
        comm.createWindow(mine.data(), mine.size());
        ADD_FAILURE() << "a window over " << comm.transportName();
      } catch (const Error& e) {
        EXPECT_EQ(e.errc(), Errc::NetNoRma) << e.text();
        EXPECT_TRUE(contains(e.text(), "VG-NET-008")) << e.text();
        EXPECT_TRUE(contains(e.text(), std::string("runs over ") + comm.transportName())) << e.text();
        EXPECT_TRUE(contains(e.text(), "VIGIL_TRANSPORT=ucx")) << e.text();
      }
      barrier(comm);
    });
  }
}

}  // namespace
}  // namespace vigil
