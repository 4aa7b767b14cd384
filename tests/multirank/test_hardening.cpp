// Cases a hostile tester found that broke vigil's promise: displacements
// that wrap, sends nobody receives, checks turned off, errors that named the
// wrong cause. Each test failed before its fix.

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <latch>
#include <limits>
#include <random>
#include <thread>

#include "api/handles.hpp"
#include "common/thread_ranks.hpp"
#include "core/dtype.hpp"
#include "core/errors.hpp"
#include "net/socket.hpp"

namespace vigil::test {
namespace {

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

#define EXPECT_OK(call, comm) EXPECT_EQ((call), vigilSuccess) << vigilGetLastError(comm)

// rdispls = SIZE_MAX used to pass validation (count > limit - displ
// underflowed) and wrote the word before recvbuff on both ranks.
TEST(Hardening, WrappingAllToAllVDisplacementsAreRefusedAndWriteNothing) {
  constexpr size_t kMax = std::numeric_limits<size_t>::max();
  for (size_t bad : {kMax, kMax / 2, kMax / 4 + 1, kMax - 3}) {
    for (bool sendSide : {false, true}) {
      runRanks(2, [&](int rank, vigilComm_t comm) {
        // recvbuff sits inside a canary-filled block: nothing around it may change.
        std::vector<float> send(4, float(rank + 1));
        std::vector<uint8_t> block(64 + 4 * sizeof(float) + 64, 0xA5);
        auto* recv = reinterpret_cast<float*>(block.data() + 64);
        size_t counts[2] = {2, 2}, sdispls[2] = {0, 2}, rdispls[2] = {0, 2};
        (sendSide ? sdispls : rdispls)[1 - rank] = bad;
        vigilResult_t rc =
            vigilAllToAllV(send.data(), counts, sdispls, recv, counts, rdispls, vigilFloat32, comm, nullptr);
        const std::string text = vigilGetLastError(comm);
        EXPECT_EQ(rc, vigilInvalidArgument) << text;
        EXPECT_TRUE(contains(text, "VG-API-011")) << text;
        EXPECT_TRUE(contains(text, sendSide ? "sdispls[" : "rdispls[")) << text;
        EXPECT_TRUE(contains(text, "rank " + std::to_string(rank) + "/2")) << text;
        for (uint8_t b : block) ASSERT_EQ(b, 0xA5) << "a refused call wrote memory";
        // Refused locally, before any byte moved: the communicator works on.
        float x = 1;
        EXPECT_OK(vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr), comm);
        EXPECT_EQ(x, 2.0f);
      });
    }
  }
}

// Every size computation of the validator, fed extreme values: a call it
// accepts must describe buffers that end inside the address space.
TEST(Hardening, ValidatorFuzzWithExtremeValuesNeverAcceptsAWrappingBuffer) {
  runRanks(3, [&](int rank, vigilComm_t comm) {
    if (rank != 0) return;  // validation is local: one rank fuzzes it
    std::shared_ptr<Communicator> c = api::acquire(comm);
    constexpr size_t kMax = std::numeric_limits<size_t>::max();
    const size_t extremes[] = {0,
                               1,
                               2,
                               3,
                               7,
                               kMax,
                               kMax - 1,
                               kMax / 2,
                               kMax / 2 + 1,
                               kMax / 3,
                               kMax / 4,
                               kMax / 8,
                               kMax / 8 + 1,
                               kMax / 16,
                               kMax / 24,
                               size_t(1) << 32,
                               size_t(1) << 62,
                               (size_t(1) << 61) - 1,
                               1000};
    const uintptr_t pointers[] = {0x1000, 0x7fff00000000, uintptr_t(-1) - 0xfff, uintptr_t(1) << 63};
    const vigilDataType_t dtypes[] = {vigilUint8, vigilFloat16, vigilFloat32, vigilFloat64};
    const OpKind kinds[] = {OpKind::AllReduce,     OpKind::Broadcast, OpKind::Reduce,    OpKind::AllGather,
                            OpKind::ReduceScatter, OpKind::AllToAll,  OpKind::AllToAllV, OpKind::Gather,
                            OpKind::Scatter,       OpKind::Send,      OpKind::Recv};
    std::mt19937_64 rng(20261203);
    auto pick = [&](auto& arr) { return arr[rng() % std::size(arr)]; };
    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 20000; ++iter) {
      OpDesc op;
      op.kind = pick(kinds);
      op.dtype = pick(dtypes);
      op.count = pick(extremes);
      op.root = static_cast<int>(rng() % 3);
      op.peer = 1 + static_cast<int>(rng() % 2);
      op.send = reinterpret_cast<const void*>(pick(pointers));
      op.recv = reinterpret_cast<void*>(pick(pointers));
      size_t a[4][3];
      for (auto& row : a)
        for (size_t& v : row) v = rng() % 3 == 0 ? rng() % 64 : pick(extremes);
      op.sendcounts = a[0];
      op.sdispls = a[1];
      op.recvcounts = a[2];
      op.rdispls = a[3];
      try {
        c->validate(op);
      } catch (const Error&) {
        ++refused;
        continue;
      }
      ++accepted;
      // Accepted: recompute every extent in 128 bits; none may pass 2^64.
      using u128 = unsigned __int128;
      const u128 elem = dtypeSize(op.dtype), top = u128(1) << 64;
      auto end = [&](const void* p, u128 elements) { return u128(reinterpret_cast<uintptr_t>(p)) + elements * elem; };
      if (op.kind == OpKind::AllToAllV) {
        for (int p = 0; p < 3; ++p) {
          ASSERT_LE(end(op.send, u128(a[1][p]) + a[0][p]), top) << "iteration " << iter << " peer " << p;
          ASSERT_LE(end(op.recv, u128(a[3][p]) + a[2][p]), top) << "iteration " << iter << " peer " << p;
        }
      } else {
        // Blocks of count elements each buffer spans on rank 0 (of 3).
        const bool root = op.root == 0;
        u128 sendBlocks = 1, recvBlocks = 1;
        switch (op.kind) {
          case OpKind::AllGather: recvBlocks = 3; break;
          case OpKind::Gather: recvBlocks = root ? 3 : 0; break;
          case OpKind::ReduceScatter: sendBlocks = 3; break;
          case OpKind::Scatter: sendBlocks = root ? 3 : 0; break;
          case OpKind::AllToAll: sendBlocks = recvBlocks = 3; break;
          case OpKind::Broadcast: sendBlocks = root ? 1 : 0; break;
          case OpKind::Reduce: recvBlocks = root ? 1 : 0; break;
          case OpKind::Send: recvBlocks = 0; break;
          case OpKind::Recv: sendBlocks = 0; break;
          default: break;
        }
        ASSERT_LE(end(op.send, u128(op.count) * sendBlocks), top) << "iteration " << iter;
        ASSERT_LE(end(op.recv, u128(op.count) * recvBlocks), top) << "iteration " << iter;
      }
    }
    EXPECT_GT(accepted, 100);
    EXPECT_GT(refused, 100);
  });
}

// Over shared memory, rank 0's send landed in a byte ring that the
// allreduce (staging buffers) never reads: send, allreduce, finalize and
// destroy all returned success. Now both transports report VG-OP-002.
TEST(Hardening, AnUnmatchedSendIsAMismatchOnEveryTransport) {
  runRanks(2, [&](int rank, vigilComm_t comm) {
    std::vector<float> payload(1000, 7.0f);
    if (rank == 0) {
      EXPECT_OK(vigilSend(payload.data(), 1000, vigilFloat32, 1, comm, nullptr), comm);
    }
    float x = 1;
    vigilResult_t rc = vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr);
    std::string text = vigilGetLastError(comm);
    if (rank == 0 && rc == vigilSuccess) {
      // Its allreduce may have had all it needed; the next call cannot succeed.
      rc = vigilBarrier(comm, nullptr);
      text = vigilGetLastError(comm);
    }
    EXPECT_EQ(rc, vigilMismatch) << text;
    EXPECT_TRUE(contains(text, "VG-OP-002")) << text;
    EXPECT_TRUE(contains(text, "send #0 (float32, count 1000)")) << text;
    EXPECT_TRUE(contains(text, "kind collective vs point-to-point")) << text;
    if (rank == 1) {
      EXPECT_TRUE(contains(text, "this rank (1) runs allreduce seq 1")) << text;
    }
  });
}

// No collective after the send: finalize finds the message still waiting.
TEST(Hardening, FinalizeNamesASendThatWasNeverReceived) {
  std::promise<void> sent;
  std::shared_future<void> sendDone = sent.get_future().share();
  runRanks(2, [&](int rank, vigilComm_t comm) {
    std::vector<float> payload(1000, 7.0f);
    if (rank == 0) {
      EXPECT_OK(vigilSend(payload.data(), 1000, vigilFloat32, 1, comm, nullptr), comm);
      sent.set_value();
    } else {
      sendDone.wait();  // a send to a rank already in finalize is refused (VG-PEER-002)
    }
    vigilResult_t rc = vigilCommFinalize(comm);
    const std::string text = vigilGetLastError(comm);
    if (rank == 0) {
      EXPECT_EQ(rc, vigilSuccess) << text;  // its send completed; rank 1 holds the evidence
      return;
    }
    EXPECT_EQ(rc, vigilMismatch) << text;
    EXPECT_TRUE(contains(text, "VG-OP-005")) << text;
    EXPECT_TRUE(contains(text, "rank 1/2")) << text;
    EXPECT_TRUE(contains(text, "rank 0 (host")) << text;
    EXPECT_TRUE(contains(text, "sent its send #0 (float32, count 1000), after collective seq 0")) << text;
    EXPECT_TRUE(contains(text, "4000 bytes still waiting")) << text;
  });
}

// VIGIL_FINGERPRINT=0 on shared memory turned a count or root mismatch into
// success with unwritten output. Shape is checked whatever it says.
TEST(Hardening, CountAndRootStayCheckedWithTheFingerprintOff) {
  vigilConfig cfg = testConfig();
  cfg.fingerprint = 0;
  struct Case {
    const char* what;
    std::function<vigilResult_t(int, vigilComm_t, float*)> call;
    const char* differing;
  };
  const std::vector<Case> cases = {
      {"count",
       [](int rank, vigilComm_t comm, float* out) {
         std::vector<float> in(1000, 1.0f);
         return vigilAllReduce(in.data(), out, rank == 0 ? 1000 : 999, vigilFloat32, vigilSum, comm, nullptr);
       },
       "differing: count "},
      {"root",
       [](int rank, vigilComm_t comm, float* out) {
         std::vector<float> in(1000, 1.0f);
         return vigilBroadcast(in.data(), out, 1000, vigilFloat32, rank, comm, nullptr);
       },
       "differing: root "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    runRanks(
        2,
        [&](int rank, vigilComm_t comm) {
          std::vector<float> out(1000);
          std::memset(out.data(), 0xA5, out.size() * sizeof(float));
          vigilResult_t rc = c.call(rank, comm, out.data());
          const std::string text = vigilGetLastError(comm);
          EXPECT_EQ(rc, vigilMismatch) << text;
          EXPECT_TRUE(contains(text, "VG-OP-002")) << text;
          EXPECT_TRUE(contains(text, c.differing)) << text;
        },
        cfg);
  }
}

// VIGIL_FINGERPRINT=0 compares only the shape: ranks that differ in the
// reduction alone still run, and every payload still lands (over UCX, a large
// payload's receive is posted for the header this rank expects and moves to
// the one that came).
TEST(Hardening, ReductionsThatDifferRunWithTheFingerprintOff) {
  vigilConfig cfg = testConfig();
  cfg.fingerprint = 0;
  constexpr size_t kCount = 64 * 1024;  // 256 KiB: past every transport's eager size
  runRanks(
      2,
      [&](int rank, vigilComm_t comm) {
        std::vector<float> in(kCount, rank == 0 ? 1.0f : 2.0f);
        std::vector<float> out(kCount);
        std::memset(out.data(), 0xA5, out.size() * sizeof(float));
        const vigilResult_t rc =
            vigilAllReduce(in.data(), out.data(), kCount, vigilFloat32, rank == 0 ? vigilSum : vigilMax, comm, nullptr);
        ASSERT_EQ(rc, vigilSuccess) << vigilGetLastError(comm);
        size_t unexpected = 0;
        for (float v : out) unexpected += (v != 3.0f && v != 2.0f) ? 1 : 0;  // 1 + 2 or max(1, 2)
        EXPECT_EQ(unexpected, 0u);
      },
      cfg);
}

// Only the receiver saw a size disagreement, under VG-OP-002 and with its
// receive called "send #0"; now VG-OP-003 names both ends, and the sender
// hears it too.
TEST(Hardening, PointToPointSizeMismatchIsOp003ForBothEnds) {
  struct Case {
    const char* what;
    vigilDataType_t recvType;
    size_t recvCount;
    const char* receiverText;
  };
  const std::vector<Case> cases = {
      {"count", vigilFloat32, 12,
       "this rank's receive #0 (float32, count 12) from rank 0 expects 48 bytes, but rank 0 (host"},
      {"dtype", vigilInt32, 10, "this rank's receive #0 (int32, count 10) from rank 0 expects 40 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    runRanks(2, [&](int rank, vigilComm_t comm) {
      std::vector<float> buf(12, 1.0f);
      if (rank == 0) {
        vigilResult_t rc = vigilSend(buf.data(), 10, vigilFloat32, 1, comm, nullptr);
        std::string text = vigilGetLastError(comm);
        if (rc == vigilSuccess) {  // the message fitted in the transport: the next call hears it
          rc = vigilBarrier(comm, nullptr);
          text = vigilGetLastError(comm);
        }
        EXPECT_EQ(rc, vigilMismatch) << text;
        EXPECT_TRUE(contains(text, "VG-OP-003")) << text;
        EXPECT_TRUE(contains(text, "rank 1 (host")) << text;
        EXPECT_TRUE(contains(text, "sent its send #0 (float32, count 10) of 40 bytes")) << text;
        vigilResult_t async = vigilSuccess;
        EXPECT_OK(vigilCommGetAsyncError(comm, &async), comm);
        EXPECT_EQ(async, vigilMismatch);
        return;
      }
      vigilResult_t rc = vigilRecv(buf.data(), c.recvCount, c.recvType, 0, comm, nullptr);
      const std::string text = vigilGetLastError(comm);
      EXPECT_EQ(rc, vigilMismatch) << text;
      EXPECT_TRUE(contains(text, "VG-OP-003: rank 1/2")) << text;
      EXPECT_TRUE(contains(text, c.receiverText)) << text;
      EXPECT_TRUE(contains(text, "sent its send #0 (float32, count 10) of 40 bytes")) << text;
      EXPECT_FALSE(contains(text, "runs send #0")) << text;
    });
  }
}

// A stream op that failed because a peer left: the communicator keeps it.
TEST(Hardening, AFailedStreamOpIsTheCommunicatorsAsyncError) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    if (rank == 1) {
      EXPECT_OK(vigilCommDestroy(comm), comm);
      comm = nullptr;
      return;
    }
    vigilStream_t stream = nullptr;
    ASSERT_EQ(vigilStreamCreate(&stream), vigilSuccess);
    float x = 1;
    // Queued: the call itself may succeed (rank 1 may still be there).
    vigilResult_t rc = vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, stream);
    if (rc == vigilSuccess) rc = vigilStreamSynchronize(stream);
    EXPECT_EQ(rc, vigilRemoteError) << vigilGetLastError(nullptr);
    vigilResult_t async = vigilSuccess;
    EXPECT_OK(vigilCommGetAsyncError(comm, &async), comm);
    EXPECT_EQ(async, vigilRemoteError);
    const std::string text = vigilGetLastError(comm);
    EXPECT_TRUE(contains(text, "VG-PEER-002")) << text;
    EXPECT_TRUE(contains(text, "rank 1 (host")) << text;
    EXPECT_OK(vigilStreamDestroy(stream), comm);
  });
}

// A broadcast has no reduction and an allreduce no root: the mismatch text
// used to list "redop avg vs sum" and "root -1 vs 0".
TEST(Hardening, MismatchTextListsOnlyFieldsBothOpsHave) {
  runRanks(2, [&](int rank, vigilComm_t comm) {
    float x[4] = {};
    vigilResult_t rc = rank == 0 ? vigilAllReduce(x, x, 4, vigilFloat32, vigilAvg, comm, nullptr)
                                 : vigilBroadcast(x, x, 4, vigilFloat32, 0, comm, nullptr);
    const std::string text = vigilGetLastError(comm);
    EXPECT_EQ(rc, vigilMismatch) << text;
    EXPECT_TRUE(contains(text, "differing: op allreduce vs broadcast") ||
                contains(text, "differing: op broadcast vs allreduce"))
        << text;
    EXPECT_FALSE(contains(text, "redop")) << text;
    EXPECT_FALSE(contains(text, "root -1")) << text;
    EXPECT_TRUE(contains(text, "allreduce seq 1 (float32, count 4, avg)")) << text;
    EXPECT_TRUE(contains(text, "broadcast seq 1 (float32, count 4, root 0)")) << text;
  });
}

// A rank that finalizes while the others are in a collective: they waited
// the whole op timeout and then called it unresponsive; it said only that
// they "did not reach vigilCommFinalize". Now both sides know within 2 s.
TEST(Hardening, FinalizeWhileOthersAreInACollectiveIsReportedAtOnce) {
  runRanks(3, [&](int rank, vigilComm_t comm) {
    const auto start = std::chrono::steady_clock::now();
    vigilResult_t rc;
    if (rank == 2) {
      rc = vigilCommFinalize(comm);
    } else {
      float x = 1;
      rc = vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string text = vigilGetLastError(comm);
    EXPECT_LT(seconds, 2.0) << text;  // the op timeout is 60 s
    if (rank == 2) {
      EXPECT_EQ(rc, vigilRemoteError) << text;
      EXPECT_TRUE(contains(text, "rank 2/3")) << text;
      EXPECT_TRUE(contains(text, "finalize: rank ")) << text;
      EXPECT_TRUE(contains(text, "allreduce seq 1")) << text;
    } else {
      EXPECT_EQ(rc, vigilRemoteError) << text;
      EXPECT_TRUE(contains(text, "VG-PEER-002")) << text;
      EXPECT_TRUE(contains(text, "allreduce seq 1")) << text;
      EXPECT_TRUE(contains(text, "rank 2 (host")) << text;
      EXPECT_TRUE(contains(text, "called vigilCommFinalize before completing any collective")) << text;
    }
  });
}

// The split gather done by hand, as a rank that then never connects: what a
// rank that dies or hangs between the gather and the connections looks like.
void splitGatherOnly(vigilComm_t comm, int key) {
  Listener listener = listenInRange(resolveAddress("127.0.0.1", 0), PortRange{}, "test");
  uint8_t record[32] = {};
  const int32_t color = 0;
  std::memcpy(record, &color, 4);
  std::memcpy(record + 4, &key, 4);
  listener.address.pack(record + 8);
  std::shared_ptr<Communicator> c = api::acquire(comm);
  std::vector<uint8_t> all(32 * static_cast<size_t>(c->nranks()));
  OpDesc op;
  op.kind = OpKind::Split;
  op.send = record;
  op.recv = all.data();
  op.count = 32;
  op.dtype = vigilUint8;
  c->run(op);
}

// A member gone between the split's gather and its connections: the others
// waited for the whole connect timeout and then blamed the network.
TEST(Hardening, SplitStopsWhenAMemberLeavesWhileConnecting) {
  runRanks(3, [&](int rank, vigilComm_t& comm) {
    if (rank == 2) {
      splitGatherOnly(comm, 2);
      EXPECT_OK(vigilCommDestroy(comm), comm);
      comm = nullptr;
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    vigilComm_t child = nullptr;
    vigilResult_t rc = vigilCommSplit(comm, 0, rank, &child);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string text = vigilGetLastError(comm);
    EXPECT_EQ(rc, vigilRemoteError) << text;
    EXPECT_EQ(child, nullptr);
    EXPECT_LT(seconds, 5.0) << text;  // the connect timeout is 60 s
    EXPECT_TRUE(contains(text, "VG-PEER-002")) << text;
    EXPECT_TRUE(contains(text, "split seq 1")) << text;
    EXPECT_TRUE(contains(text, "rank 2 (host")) << text;
    EXPECT_FALSE(contains(text, "VG-BOOT-008")) << text;
  });
}

// vigilCommAbort(parent) from another thread did not interrupt a split that
// waited for its members' connections.
TEST(Hardening, AbortOfTheParentInterruptsASplit) {
  std::promise<void> gathered;
  std::shared_future<void> rank1Gathered = gathered.get_future().share();
  std::promise<void> released;
  std::shared_future<void> rank0Released = released.get_future().share();
  vigilComm_t rank0 = nullptr;
  std::promise<void> rank0Known;
  std::thread aborter([&] {
    rank0Known.get_future().wait();
    rank1Gathered.wait();  // rank 0 is inside vigilCommSplit: it sent its record
    EXPECT_EQ(vigilCommAbort(rank0), vigilSuccess);
  });
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    if (rank == 1) {
      splitGatherOnly(comm, 1);
      gathered.set_value();
      rank0Released.wait();
      return;  // then destroyed by the harness
    }
    rank0 = comm;
    rank0Known.set_value();
    const auto start = std::chrono::steady_clock::now();
    vigilComm_t child = nullptr;
    vigilResult_t rc = vigilCommSplit(comm, 0, 0, &child);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const std::string text = vigilGetLastError(nullptr);
    released.set_value();
    EXPECT_EQ(rc, vigilAborted) << text;
    EXPECT_LT(seconds, 5.0) << text;
    EXPECT_TRUE(contains(text, "VG-COMM-001")) << text;
    comm = nullptr;  // aborted: the handle is gone
  });
  aborter.join();
}

struct SelfSync {
  vigilStream_t stream = nullptr;
  vigilEvent_t event = nullptr;
  vigilResult_t syncResult = vigilSuccess, eventResult = vigilSuccess;
  std::string syncText, eventText;
  std::latch eventRecorded{1};  // the host function may start before the caller records the event
};

// A host function that synchronised its own stream hung forever.
TEST(Hardening, AHostFunctionWaitingForItsOwnStreamIsRefused) {
  SelfSync s;
  ASSERT_EQ(vigilStreamCreate(&s.stream), vigilSuccess);
  ASSERT_EQ(vigilEventCreate(&s.event), vigilSuccess);
  ASSERT_EQ(vigilLaunchHostFunc(
                s.stream,
                [](void* p) {
                  auto* self = static_cast<SelfSync*>(p);
                  self->eventRecorded.wait();
                  self->syncResult = vigilStreamSynchronize(self->stream);
                  self->syncText = vigilGetLastError(nullptr);
                  self->eventResult = vigilEventSynchronize(self->event);
                  self->eventText = vigilGetLastError(nullptr);
                },
                &s),
            vigilSuccess);
  const vigilResult_t recorded = vigilEventRecord(s.event, s.stream);  // after the host function
  s.eventRecorded.count_down();
  ASSERT_EQ(recorded, vigilSuccess);
  ASSERT_EQ(vigilStreamSynchronize(s.stream), vigilSuccess) << vigilGetLastError(nullptr);
  EXPECT_EQ(s.syncResult, vigilInvalidUsage) << s.syncText;
  EXPECT_TRUE(contains(s.syncText, "VG-API-018")) << s.syncText;
  EXPECT_TRUE(contains(s.syncText, "vigilStreamSynchronize")) << s.syncText;
  EXPECT_TRUE(contains(s.syncText, "waits for that same stream")) << s.syncText;
  EXPECT_EQ(s.eventResult, vigilInvalidUsage) << s.eventText;
  EXPECT_TRUE(contains(s.eventText, "VG-API-018")) << s.eventText;
  // The stream goes on: an event recorded before a host function is fine to wait for.
  vigilEvent_t before = nullptr;
  ASSERT_EQ(vigilEventCreate(&before), vigilSuccess);
  ASSERT_EQ(vigilEventRecord(before, s.stream), vigilSuccess);
  static vigilEvent_t waitFor;
  static vigilResult_t waited;
  waitFor = before;
  waited = vigilInternalError;
  ASSERT_EQ(vigilLaunchHostFunc(
                s.stream, [](void*) { waited = vigilEventSynchronize(waitFor); }, nullptr),
            vigilSuccess);
  ASSERT_EQ(vigilStreamSynchronize(s.stream), vigilSuccess);
  EXPECT_EQ(waited, vigilSuccess);
  EXPECT_EQ(vigilEventDestroy(before), vigilSuccess);
  EXPECT_EQ(vigilEventDestroy(s.event), vigilSuccess);
  EXPECT_EQ(vigilStreamDestroy(s.stream), vigilSuccess);
}

}  // namespace
}  // namespace vigil::test
