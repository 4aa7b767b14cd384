// MoE dispatch and combine queued on streams: the calls return at once and
// the results, checked after vigilStreamSynchronize, are the reference's; a
// refusal found at the call is returned there and still reaches the other
// ranks, whose streams report VG-MOE-006; destroying a handle waits for its
// queued uses; MoE calls inside a group are refused (VG-MOE-008).

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "moe/moe_harness.hpp"

namespace vigil::test::moe {
namespace {

struct StreamGuard {
  vigilStream_t s = nullptr;
  StreamGuard() { EXPECT_EQ(vigilStreamCreate(&s), vigilSuccess); }
  ~StreamGuard() { vigilStreamDestroy(s); }
};

// Dispatch and combine queued back to back on one stream, the handle
// destroyed before the stream is synchronized; then every output checked.
void runQueued(int64_t rank, vigilComm_t comm, const Case& k) {
  const std::string at = "rank " + std::to_string(rank);
  StreamGuard stream;
  RankBuffers b(k, rank);
  vigilMoeDispatchArgs a = b.args();
  size_t ws = 0;
  ASSERT_EQ(vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws), vigilSuccess) << vigilGetLastError(comm);
  std::vector<uint8_t> work(std::max<size_t>(ws, 1), kFill);
  vigilMoeHandle_t h = nullptr;
  ASSERT_EQ(vigilMoeDispatch(&b.cfg, &a, work.data(), ws, &h, comm, stream.s), vigilSuccess)
      << at << ": " << vigilGetLastError(comm);
  ASSERT_NE(h, nullptr) << at;

  CombineBuffers cb(k, rank);
  vigilMoeCombineArgs ca = cb.args;
  size_t cws = 0;  // waits for the queued dispatch: the size depends on its routing
  ASSERT_EQ(vigilMoeCombineGetWorkspaceSize(&b.cfg, h, comm, &cws), vigilSuccess) << vigilGetLastError(comm);
  std::vector<uint8_t> cwork(std::max<size_t>(cws, 1), kFill);
  ASSERT_EQ(vigilMoeCombine(&b.cfg, h, &ca, cwork.data(), cws, comm, stream.s), vigilSuccess)
      << at << ": " << vigilGetLastError(comm);
  // The structs the calls read were copies: changing them now changes nothing.
  a = vigilMoeDispatchArgs{};
  ca = vigilMoeCombineArgs{};
  EXPECT_EQ(vigilMoeHandleDestroy(h), vigilSuccess) << vigilGetLastError(comm);  // waits for the combine
  ASSERT_EQ(vigilStreamSynchronize(stream.s), vigilSuccess) << at << ": " << vigilGetLastError(comm);

  checkDispatch(k, rank, b);
  checkRoundTrip(k, rank, b);
  expectSameBytes(cb.out.data(), k.refOut[rank].data(), cb.outBytes, at + " combine out");
  expectUnwritten(cb.out, cb.outBytes, at + " combine out beyond bs rows");
}

class MoeQueued : public ::testing::TestWithParam<int> {};

TEST_P(MoeQueued, DispatchAndCombineOnAStreamMatchTheReference) {
  static const std::vector<Spec> specs = {
      {.W = 4, .E = 8, .bs = {6, 1, 0, 3}, .seed = 40},
      {.W = 3, .E = 6, .xType = vigilBfloat16, .quantMode = 2, .seed = 41},
      {.W = 4, .S = 2, .Sh = 1, .E = 4, .xType = vigilFloat16, .maskDims = 1, .sharedX = true, .seed = 42},
  };
  const Case k = makeCase(specs[static_cast<size_t>(GetParam())]);
  runRanks(static_cast<int>(k.spec.W), [&](int rank, vigilComm_t& comm) { runQueued(rank, comm, k); });
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeQueued, ::testing::Range(0, 3));

TEST(MoeQueuedRefusal, TheCallReturnsItAndThePeersStreamsReportIt) {
  const Case k = makeCase({.W = 2, .E = 8, .bs = {3, 3}, .seed = 43});
  runRanks(
      2,
      [&](int rank, vigilComm_t& comm) {
        const std::string at = "rank " + std::to_string(rank);
        StreamGuard stream;
        RankBuffers b(k, rank);
        vigilMoeDispatchArgs a = b.args();
        size_t ws = 0;
        ASSERT_EQ(vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws), vigilSuccess) << vigilGetLastError(comm);
        if (rank == 1) b.ids[1] = 8;  // routed expert 8 of 8: out of range
        std::vector<uint8_t> work(ws + 64, kFill);
        vigilMoeHandle_t h = nullptr;
        const Outcome call = outcome(vigilMoeDispatch(&b.cfg, &a, work.data(), ws, &h, comm, stream.s), comm);
        if (rank == 1) {
          expectRefusal(call, Expect{vigilInvalidArgument, "VG-MOE-003", {}, {{"token", 0}, {"slot", 1}}, {8}},
                        at + " call");
          EXPECT_EQ(h, nullptr);
          EXPECT_EQ(vigilStreamSynchronize(stream.s), vigilSuccess) << "its stream only told the others";
        } else {
          EXPECT_EQ(call.rc, vigilSuccess) << call.text;
          const Outcome sync = outcome(vigilStreamSynchronize(stream.s), nullptr);  // a stream's error is the thread's
          expectRefusal(sync, Expect{vigilRemoteError, "VG-MOE-006", {"VG-MOE-003"}, {{"rank", 1}}, {}},
                        at + " synchronize");
          // The handle of a dispatch that failed on its stream is refused by combine, and destroyed cleanly.
          size_t cws = 0;
          expectRefusal(outcome(vigilMoeCombineGetWorkspaceSize(&b.cfg, h, comm, &cws), comm),
                        Expect{vigilInvalidUsage, "VG-MOE-007", {"did not complete"}, {}, {}}, at + " handle");
          EXPECT_EQ(vigilMoeHandleDestroy(h), vigilSuccess);
        }
        EXPECT_TRUE(untouched(b)) << at << ": a refused dispatch wrote its outputs";
        // The communicator is intact: a blocking dispatch and combine work.
        EXPECT_TRUE(runExact(rank, comm, makeCase({.W = 2, .E = 8, .seed = 44})));
      },
      testConfig(20000, 20000));
}

TEST(MoeQueuedRefusal, InsideAGroupOnEveryRank) {
  const Case k = makeCase({.W = 2, .E = 8, .seed = 45});
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    RankBuffers b(k, rank);
    vigilMoeDispatchArgs a = b.args();
    size_t ws = 0;
    ASSERT_EQ(vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws), vigilSuccess) << vigilGetLastError(comm);
    std::vector<uint8_t> work(ws + 64, kFill);
    vigilMoeHandle_t h = nullptr;
    ASSERT_EQ(vigilGroupStart(), vigilSuccess);
    const Outcome o = outcome(vigilMoeDispatch(&b.cfg, &a, work.data(), ws, &h, comm, nullptr), comm);
    ASSERT_EQ(vigilGroupEnd(), vigilSuccess);
    expectRefusal(o, Expect{vigilInvalidUsage, "VG-MOE-008", {"vigilMoeDispatch", "group"}, {}, {}}, "group");
    EXPECT_EQ(h, nullptr);
    EXPECT_TRUE(untouched(b));
    EXPECT_TRUE(runExact(rank, comm, k));
  });
}

}  // namespace
}  // namespace vigil::test::moe
