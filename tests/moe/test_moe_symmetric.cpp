// MoE dispatch and combine on symmetric buffers (docs/moe.md "On symmetric
// buffers"): expandX, its scales and the expert outputs allocated with
// vigilMemAlloc on every rank. Each source then writes its rows straight
// into the destinations' copies, and combine sums straight from them: the
// results must be the bytes of the reference, as over messages, and the
// workspaces stay untouched (nothing is staged). A rank that passes private
// buffers makes every rank fall back to messages, with the same results.

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "moe/moe_harness.hpp"

namespace vigil::test::moe {
namespace {

struct Placement {
  bool combineInHeap = true;  // the expert outputs in the heap as well
  int privateRank = -1;       // this rank passes private buffers for everything
};

// A collective allocation of the same size on every rank, filled with kFill,
// freed collectively when it goes out of scope.
class SymmetricBlock {
 public:
  SymmetricBlock(vigilComm_t comm, size_t bytes) : comm_(comm) {
    EXPECT_EQ(vigilMemAlloc(comm, bytes, &ptr_), vigilSuccess) << vigilGetLastError(comm);
    if (ptr_ != nullptr) std::memset(ptr_, kFill, bytes);
    bytes_ = ptr_ != nullptr ? bytes : 0;
  }
  ~SymmetricBlock() { EXPECT_EQ(vigilMemFree(comm_, ptr_), vigilSuccess) << vigilGetLastError(comm_); }
  SymmetricBlock(const SymmetricBlock&) = delete;
  SymmetricBlock& operator=(const SymmetricBlock&) = delete;
  uint8_t* data() const { return static_cast<uint8_t*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  vigilComm_t comm_;
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Copies the first v.size() elements of a block into v (for the checks on
// RankBuffers) and expects the rest of the block unwritten.
template <class T>
void takeBack(const SymmetricBlock& block, std::vector<T>& v, const std::string& what) {
  const size_t bytes = v.size() * sizeof(T);
  ASSERT_GE(block.bytes(), bytes) << what;
  std::memcpy(v.data(), block.data(), bytes);
  EXPECT_EQ(firstWritten(block.data() + bytes, block.bytes() - bytes), -1) << what << ": written past this rank's part";
}

bool allFill(const std::vector<uint8_t>& v) {
  return firstWritten(v.data(), v.size()) < 0;
}

// One dispatch + combine with the outputs (and expert outputs) in the heap,
// checked against the reference. `staged`: whether the workspaces were written.
struct Staged {
  bool dispatch = false, combine = false;
};

Staged runSymmetric(int64_t rank, vigilComm_t comm, const Case& k, const Placement& p) {
  const Config& c = k.in.cfg;
  const bool mine = rank != p.privateRank;
  RankBuffers b(k, rank);
  // Sizes every rank computes alike: the largest rank's need.
  size_t xBytes = 0, floatsBytes = 0, expertBytes = 0;
  for (int64_t r = 0; r < c.W; ++r) {
    const RankBuffers other(k, r);
    xBytes = std::max(xBytes, other.expandX.size());
    floatsBytes = std::max(floatsBytes, other.expandScales.size() * sizeof(float));
    expertBytes = std::max(expertBytes, k.cin.expertOut[static_cast<size_t>(r)].size() + 16);
  }
  SymmetricBlock x(comm, xBytes), scales(comm, floatsBytes), dyn(comm, floatsBytes), expert(comm, expertBytes);
  Staged staged;
  vigilMoeDispatchArgs a = b.args();
  if (mine) {
    a.expandX = x.data();
    if (a.expandScales != nullptr) a.expandScales = reinterpret_cast<float*>(scales.data());
    if (a.dynamicScales != nullptr) a.dynamicScales = reinterpret_cast<float*>(dyn.data());
  }
  size_t ws = 0;
  vigilResult_t rc = vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws);
  EXPECT_EQ(rc, vigilSuccess) << vigilGetLastError(comm);
  std::vector<uint8_t> work(std::max<size_t>(ws, 1), kFill);
  vigilMoeHandle_t h = nullptr;
  if (rc == vigilSuccess) rc = vigilMoeDispatch(&b.cfg, &a, work.data(), ws, &h, comm, nullptr);
  EXPECT_EQ(rc, vigilSuccess) << "rank " << rank << " dispatch: " << vigilGetLastError(comm);
  if (!allAgree(comm, rc == vigilSuccess)) {
    if (h != nullptr) vigilMoeHandleDestroy(h);
    return staged;
  }
  staged.dispatch = !allFill(work);
  if (mine) {
    takeBack(x, b.expandX, "rank " + std::to_string(rank) + " expandX");
    if (b.hasExpandScales) takeBack(scales, b.expandScales, "rank " + std::to_string(rank) + " expandScales");
    if (b.quant) takeBack(dyn, b.dyn, "rank " + std::to_string(rank) + " dynamicScales");
  }
  if (!b.hasExpandScales) {
    EXPECT_EQ(firstWritten(scales.data(), scales.bytes()), -1) << "expandScales not passed";
  }
  if (!b.quant) {
    EXPECT_EQ(firstWritten(dyn.data(), dyn.bytes()), -1) << "dynamicScales not passed";
  }
  checkDispatch(k, rank, b);
  checkRoundTrip(k, rank, b);

  CombineBuffers cb(k, rank);
  vigilMoeCombineArgs ca = cb.args;
  if (mine && p.combineInHeap) {
    std::memcpy(expert.data(), cb.expertOut.data(), cb.expertOut.size());
    ca.expandX = expert.data();
  }
  size_t cws = 0;
  rc = vigilMoeCombineGetWorkspaceSize(&b.cfg, h, comm, &cws);
  EXPECT_EQ(rc, vigilSuccess) << vigilGetLastError(comm);
  std::vector<uint8_t> cwork(std::max<size_t>(cws, 1), kFill);
  if (rc == vigilSuccess) rc = vigilMoeCombine(&b.cfg, h, &ca, cwork.data(), cws, comm, nullptr);
  EXPECT_EQ(rc, vigilSuccess) << "rank " << rank << " combine: " << vigilGetLastError(comm);
  if (allAgree(comm, rc == vigilSuccess)) {
    staged.combine = !allFill(cwork);
    expectSameBytes(cb.out.data(), k.refOut[rank].data(), cb.outBytes, "rank " + std::to_string(rank) + " combine out");
    expectUnwritten(cb.out, cb.outBytes, "rank " + std::to_string(rank) + " combine out beyond bs rows");
    checkIdentity(k, rank, cb.out.data());
  }
  EXPECT_EQ(vigilMoeHandleDestroy(h), vigilSuccess) << vigilGetLastError(comm);
  return staged;
}

struct Named {
  const char* name;
  Spec spec;
};

const std::vector<Named>& cases() {
  static const std::vector<Named> list = {
      {"W2_f32", {.W = 2, .bs = {5, 3}}},
      {"W3_f16_mask1_unused_sharedX",
       {.W = 3,
        .E = 6,
        .K = 3,
        .bs = {4, 0, 6},
        .xType = vigilFloat16,
        .tokenNumsType = 0,
        .maskDims = 1,
        .unusedPercent = 25,
        .sharedX = true,
        .seed = 3}},
      {"W4_bf16_no_expandScales_full_capacity",
       {.W = 4, .E = 8, .H = 40, .K = 3, .xType = vigilBfloat16, .expandScales = false, .hot = true, .seed = 7}},
      {"W5_f32_mask2_empty_rank",
       {.W = 5, .E = 10, .K = 3, .bs = {3, 0, 5, 2, 6}, .maskDims = 2, .unusedPercent = 10, .seed = 31}},
      {"W8_S2_Sh2_bf16_mask2",
       {.W = 8,
        .S = 2,
        .Sh = 2,
        .E = 12,
        .K = 3,
        .bs = {4, 0, 2, 6, 1, 3, 5, 0},
        .xType = vigilBfloat16,
        .tokenNumsType = 0,
        .maskDims = 2,
        .unusedPercent = 15,
        .identity = false,
        .sharedX = true,
        .seed = 9}},
      {"W3_q_f16_smooth", {.W = 3, .E = 6, .xType = vigilFloat16, .quantMode = 2, .smooth = true, .seed = 15}},
      {"W4_S2_Sh1_q_bf16_smooth_sharedX",
       {.W = 4,
        .S = 2,
        .Sh = 1,
        .E = 4,
        .bs = {4, 0, 6, 2},
        .xType = vigilBfloat16,
        .quantMode = 2,
        .smooth = true,
        .sharedX = true,
        .seed = 16}},
      {"W8_q_f32_H1024", {.W = 8, .E = 16, .H = 1024, .K = 4, .maxTokens = 32, .quantMode = 2, .seed = 32}},
      {"W4_combine_bf16_after_f32_dispatch",
       {.W = 4, .E = 8, .bs = {2, 6, 3, 0}, .sharedX = true, .combineType = vigilBfloat16, .seed = 19}},
  };
  return list;
}

class MoeSymmetric : public ::testing::TestWithParam<size_t> {};

TEST_P(MoeSymmetric, RowsGoStraightIntoThePeersCopiesAndMatchTheReference) {
  const Case k = makeCase(cases()[GetParam()].spec);
  runRanks(static_cast<int>(k.spec.W), [&](int rank, vigilComm_t& comm) {
    const Staged staged = runSymmetric(rank, comm, k, {});
    EXPECT_FALSE(staged.dispatch) << "rank " << rank << ": dispatch staged rows in its workspace";
    EXPECT_FALSE(staged.combine) << "rank " << rank << ": combine staged rows in its workspace";
  });
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeSymmetric, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) { return std::string(cases()[i.param].name); });

const Spec kBusy{.W = 4, .E = 8, .K = 3, .maxTokens = 8, .sharedX = true, .seed = 41};

TEST(MoeSymmetricFallback, OneRankWithPrivateBuffersMakesEveryRankUseMessages) {
  const Case k = makeCase(kBusy);
  runRanks(4, [&](int rank, vigilComm_t& comm) {
    const Staged staged = runSymmetric(rank, comm, k, {.privateRank = 2});
    // Every rank sends rows to peers here, so the message path stages them.
    EXPECT_TRUE(staged.dispatch) << "rank " << rank << ": dispatch did not fall back to messages";
    EXPECT_TRUE(staged.combine) << "rank " << rank << ": combine did not fall back to messages";
  });
}

TEST(MoeSymmetricFallback, ExpertOutputsOutsideTheHeapAreReturnedByMessages) {
  const Case k = makeCase(kBusy);
  runRanks(4, [&](int rank, vigilComm_t& comm) {
    const Staged staged = runSymmetric(rank, comm, k, {.combineInHeap = false});
    EXPECT_FALSE(staged.dispatch) << "rank " << rank;
    EXPECT_TRUE(staged.combine) << "rank " << rank << ": combine did not fall back to messages";
  });
}

TEST(MoeSymmetricRepeat, TenRunsGiveTheReference) {
  const Case k = makeCase({.W = 8,
                           .S = 2,
                           .Sh = 1,
                           .E = 6,
                           .bs = {3, 5, 0, 6, 2, 1, 4, 6},
                           .xType = vigilBfloat16,
                           .quantMode = 2,
                           .maskDims = 2,
                           .unusedPercent = 15,
                           .smooth = true,
                           .sharedX = true,
                           .seed = 42});
  runRanks(8, [&](int rank, vigilComm_t& comm) {
    for (int i = 0; i < 10; ++i) {
      const Staged staged = runSymmetric(rank, comm, k, {});
      EXPECT_FALSE(staged.dispatch || staged.combine) << "rank " << rank << " run " << i;
    }
  });
}

}  // namespace
}  // namespace vigil::test::moe
