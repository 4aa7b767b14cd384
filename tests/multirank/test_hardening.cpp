// Cases a hostile tester found that broke vigil's promise: displacements
// that wrap, sends nobody receives, checks turned off, errors that named the
// wrong cause. Each test failed before its fix.

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>

#include "api/handles.hpp"
#include "common/thread_ranks.hpp"
#include "core/dtype.hpp"
#include "core/errors.hpp"

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
        vigilResult_t rc = vigilAllToAllV(send.data(), counts, sdispls, recv, counts, rdispls, vigilFloat32, comm,
                                          nullptr);
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
    const size_t extremes[] = {0, 1, 2, 3, 7, kMax, kMax - 1, kMax / 2, kMax / 2 + 1, kMax / 3, kMax / 4,
                               kMax / 8, kMax / 8 + 1, kMax / 16, kMax / 24, size_t(1) << 32, size_t(1) << 62,
                               (size_t(1) << 61) - 1, 1000};
    const uintptr_t pointers[] = {0x1000, 0x7fff00000000, uintptr_t(-1) - 0xfff, uintptr_t(1) << 63};
    const vigilDataType_t dtypes[] = {vigilUint8, vigilFloat16, vigilFloat32, vigilFloat64};
    const OpKind kinds[] = {OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce,  OpKind::AllGather,
                            OpKind::ReduceScatter, OpKind::AllToAll, OpKind::AllToAllV, OpKind::Gather,
                            OpKind::Scatter, OpKind::Send,      OpKind::Recv};
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

}  // namespace
}  // namespace vigil::test
