// MoE dispatch and combine against the single-process reference
// (moe_reference.hpp): thread-ranks on W in {2, 3, 4, 8}, through the C API
// only. Dispatch must match bit for bit (rows, order, counts, scales, int8
// values); combine too (the reference sums in moe.md's order), and the
// identity expert must give x * sum(w) within float rounding. Outputs start
// as 0xA5: every required byte must be written and nothing beyond.

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "moe/moe_harness.hpp"

namespace vigil::test::moe {
namespace {

// ---- The reference itself ---------------------------------------------------

TEST(MoeReference, HalfConversionsRoundHalfToEven) {
  using moeref::floatToHalf;
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // the tie above the largest half goes to Inf
  EXPECT_EQ(floatToHalf(0x1p-14f), 0x0400);
  EXPECT_EQ(floatToHalf(0x1p-24f), 0x0001);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);             // tie: to even (zero)
  EXPECT_EQ(floatToHalf(0x1.8p-24f), 0x0002);           // 1.5 units: to even (2)
  EXPECT_EQ(floatToHalf(0x1.4p-23f), 0x0002);           // 2.5 units: to even (2)
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);      // tie: stays even
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);  // tie: up to even
  EXPECT_EQ(floatToHalf(0x1.ffep-15f), 0x0400);         // subnormal that rounds up to the smallest normal
  EXPECT_EQ(floatToHalf(std::nanf("")) & 0x7c00, 0x7c00);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0) continue;  // NaN
    ASSERT_EQ(uint32_t{floatToHalf(moeref::halfToFloat(static_cast<uint16_t>(h)))}, h) << std::hex << h;
  }
  // Nearest, ties to even, against the neighbours.
  Rng rng{5};
  for (int i = 0; i < 100000; ++i) {
    const float f = std::ldexp(rng.uniform(-1.0f, 1.0f), static_cast<int>(rng.below(42)) - 26);
    const uint16_t h = floatToHalf(f);
    const double got = moeref::halfToFloat(h), err = std::fabs(got - f);
    for (int d : {-1, 1}) {
      const uint16_t n = static_cast<uint16_t>(h + d);
      if ((h & 0x7fff) == 0 && d < 0) continue;
      const double other = std::fabs(double(moeref::halfToFloat(n)) - f);
      ASSERT_TRUE(err < other || (err == other && (h & 1) == 0)) << f;
    }
  }
}

TEST(MoeReference, Bfloat16ConversionsRoundHalfToEven) {
  using moeref::floatToBf16;
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBf16(1.0f + 0x1p-8f), 0x3f80);      // tie: stays even
  EXPECT_EQ(floatToBf16(1.0f + 3 * 0x1p-8f), 0x3f82);  // tie: up to even
  EXPECT_EQ(floatToBf16(1.0f + 0x1.2p-8f), 0x3f81);
  EXPECT_EQ(floatToBf16(-3.0f), 0xc040);
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0) continue;
    ASSERT_EQ(uint32_t{floatToBf16(moeref::bf16ToFloat(static_cast<uint16_t>(b)))}, b) << std::hex << b;
  }
}

TEST(MoeReference, PlacementLayoutAndQuantisationByHand) {
  // W=4, S=2, Sh=1, E=4 (L=2 on ranks 2, 3), K=2, H=4.
  Spec s{.W = 4, .S = 2, .Sh = 1, .E = 4, .H = 4, .K = 2, .maxTokens = 2, .bs = {0, 0, 0, 2}, .quantMode = 2};
  Inputs in = generate(s);
  const float row0[] = {1.0f, -2.0f, 0.5f, 0.0f};
  for (int h = 0; h < 4; ++h) moeref::store(vigilFloat32, in.ranks[3].x.data(), h, row0[h]);
  in.ranks[3].expertIds = {3, 0, -1, 2};  // experts 3 -> rank 3 local 1, 0 -> rank 2 local 0, 2 -> rank 3 local 0
  const std::vector<RankOutput> out = moeref::dispatch(in);
  // Shared expert 0 for source rank 3: rank 0 * (2/1) + 3 % 2 = rank 1.
  EXPECT_EQ(out[0].recvRows, 0);
  EXPECT_EQ(out[1].recvRows, 2);  // both tokens of rank 3
  EXPECT_EQ(out[2].recvRows, 1);  // expert 0 (token 0)
  EXPECT_EQ(out[3].recvRows, 2);  // expert 2 (token 1) at local 0, then expert 3 (token 0) at local 1
  EXPECT_EQ(out[2].epRecvCounts, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 1}));
  EXPECT_EQ(out[3].epRecvCounts, (std::vector<int32_t>{0, 0, 0, 1, 1, 1, 1, 2}));
  EXPECT_EQ(out[2].expertTokenNums, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(out[3].expertTokenNums, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(out[3].rows[0].token, 1);
  EXPECT_EQ(out[3].rows[1].token, 0);
  EXPECT_EQ(moeref::requiredRows(in.cfg, 0), 2 * 2);  // maxTokens * ceil(W / (S / Sh))
  EXPECT_EQ(moeref::requiredRows(in.cfg, 2), 2 * 4 * 2);
  EXPECT_EQ(out[3].destRank[0 * 3 + 0], 3);
  EXPECT_EQ(out[3].destRow[0 * 3 + 0], 1);
  EXPECT_EQ(out[3].destRank[0 * 3 + 1], 2);
  EXPECT_EQ(out[3].destRank[0 * 3 + 2], 1);
  EXPECT_EQ(out[3].destRank[1 * 3 + 0], -1);
  // Token 0 is row 1 on rank 3: amax 2, scale 63.5; 1 * 63.5 = 63.5 rounds to even 64; 0.5 * 63.5 = 31.75 -> 32.
  std::vector<int8_t> q(out[3].expandX.begin() + 4, out[3].expandX.begin() + 8);
  EXPECT_EQ(q, (std::vector<int8_t>{64, -127, 32, 0}));
  EXPECT_EQ(out[3].dynamicScales[1], 1.0f / 63.5f);
  EXPECT_EQ(out[3].expandScales[1], in.ranks[3].expertScales[0]);
  EXPECT_EQ(out[1].expandScales[0], 1.0f);  // shared
}

// ---- Against the implementation ---------------------------------------------

struct Named {
  const char* name;
  Spec spec;
};

const std::vector<Named>& cases() {
  static const std::vector<Named> list = {
      {"W2_f32_plain", {.W = 2, .bs = {5, 3}}},
      {"W2_f32_L4_above_K_counts_prefix", {.W = 2, .E = 8, .bs = {6, 6}, .tokenNumsType = 0, .unusedPercent = 20}},
      {"W2_f16_no_expandScales_H7", {.W = 2, .H = 7, .xType = vigilFloat16, .expandScales = false, .seed = 2}},
      {"W3_f16_mask1_unused_prefix",
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
      {"W4_bf16_mask2_empty_rank",
       {.W = 4,
        .E = 8,
        .bs = {6, 1, 0, 3},
        .xType = vigilBfloat16,
        .maskDims = 2,
        .unusedPercent = 10,
        .identity = false,
        .seed = 4}},
      {"W8_f32_mask2_unused_prefix",
       {.W = 8,
        .E = 16,
        .K = 4,
        .bs = {3, 0, 5, 2, 1, 6, 0, 4},
        .tokenNumsType = 0,
        .maskDims = 2,
        .unusedPercent = 20,
        .identity = false,
        .combineScales = false,
        .seed = 5}},
      {"W4_L1_full_capacity", {.W = 4, .E = 4, .K = 3, .hot = true, .seed = 6}},
      {"W4_L2_K3_full_capacity_H40", {.W = 4, .E = 8, .H = 40, .K = 3, .xType = vigilBfloat16, .hot = true, .seed = 7}},
      {"W4_S2_Sh1_f16_mask1",
       {.W = 4,
        .S = 2,
        .Sh = 1,
        .E = 4,
        .bs = {3, 5, 0, 2},
        .xType = vigilFloat16,
        .maskDims = 1,
        .sharedX = true,
        .seed = 8}},
      {"W8_S2_Sh2_bf16_mask2_prefix",
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
      {"W8_S4_Sh2_f32_unused",
       {.W = 8,
        .S = 4,
        .Sh = 2,
        .E = 8,
        .bs = {2, 6, 0, 1, 5, 3, 4, 6},
        .tokenNumsType = 0,
        .unusedPercent = 10,
        .combineScales = false,
        .seed = 10}},
      {"W3_S1_Sh1_no_scales",
       {.W = 3, .S = 1, .Sh = 1, .E = 4, .scales = false, .expandScales = false, .sharedX = true, .seed = 11}},
      {"W8_S2_Sh1_full_capacity", {.W = 8, .S = 2, .Sh = 1, .E = 6, .hot = true, .seed = 12}},
      {"W4_all_slots_unused_or_masked",
       {.W = 4, .E = 8, .bs = {3, 2, 0, 4}, .maskDims = 2, .unusedPercent = 70, .sharedX = true, .seed = 13}},
      {"W2_q_f32", {.W = 2, .bs = {6, 4}, .quantMode = 2, .seed = 14}},
      {"W3_q_f16_smooth_mask1",
       {.W = 3,
        .E = 6,
        .xType = vigilFloat16,
        .quantMode = 2,
        .maskDims = 1,
        .unusedPercent = 20,
        .smooth = true,
        .identity = false,
        .seed = 15}},
      {"W4_S2_Sh1_q_bf16_smooth_prefix",
       {.W = 4,
        .S = 2,
        .Sh = 1,
        .E = 4,
        .bs = {4, 0, 6, 2},
        .xType = vigilBfloat16,
        .quantMode = 2,
        .tokenNumsType = 0,
        .smooth = true,
        .sharedX = true,
        .seed = 16}},
      {"W8_S2_Sh2_q_f16_mask2",
       {.W = 8,
        .S = 2,
        .Sh = 2,
        .E = 12,
        .K = 3,
        .bs = {1, 0, 6, 2, 0, 5, 3, 4},
        .xType = vigilFloat16,
        .quantMode = 2,
        .maskDims = 2,
        .unusedPercent = 10,
        .seed = 17}},
      {"W4_q_f32_full_capacity", {.W = 4, .E = 8, .K = 3, .quantMode = 2, .hot = true, .seed = 18}},
      {"W3_q_ties_round_half_to_even_bf16",
       {.W = 3, .E = 6, .H = 32, .xType = vigilBfloat16, .quantMode = 2, .ties = true, .seed = 20}},
      {"W2_q_ties_round_half_to_even_f32", {.W = 2, .H = 32, .quantMode = 2, .ties = true, .seed = 26}},
      // Messages larger than a socket buffer or a ring: partial writes and
      // reads that stop inside a row or between the pieces of a message.
      {"W4_f32_H2048_large_messages", {.W = 4, .E = 16, .H = 2048, .K = 4, .maxTokens = 64, .seed = 27}},
      {"W3_q_bf16_H1536_large_messages",
       {.W = 3, .E = 6, .H = 1536, .K = 2, .maxTokens = 48, .xType = vigilBfloat16, .quantMode = 2, .seed = 28}},
      {"W4_combine_bf16_after_f32_dispatch",
       {.W = 4, .E = 8, .bs = {2, 6, 3, 0}, .sharedX = true, .combineType = vigilBfloat16, .seed = 19}},
  };
  return list;
}

class MoeExact : public ::testing::TestWithParam<size_t> {};

TEST_P(MoeExact, DispatchAndCombineMatchTheReference) {
  const Case k = makeCase(cases()[GetParam()].spec);
  runRanks(static_cast<int>(k.spec.W), [&](int rank, vigilComm_t& comm) { runExact(rank, comm, k); });
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeExact, ::testing::Range<size_t>(0, cases().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) { return std::string(cases()[i.param].name); });

TEST(MoeExactSanity, FullCapacityCasesReallyFillTheCapacity) {
  for (const Named& n : cases()) {
    if (!n.spec.hot) continue;
    const Case k = makeCase(n.spec);
    EXPECT_EQ(k.ref[n.spec.S].recvRows, moeref::requiredRows(k.in.cfg, n.spec.S)) << n.name;
  }
}

TEST(MoeRepeat, TwentyRunsGiveIdenticalBytes) {
  const Case k = makeCase({.W = 4,
                           .S = 2,
                           .Sh = 1,
                           .E = 4,
                           .bs = {5, 2, 6, 0},
                           .xType = vigilBfloat16,
                           .quantMode = 2,
                           .maskDims = 2,
                           .unusedPercent = 15,
                           .smooth = true,
                           .sharedX = true,
                           .seed = 21});
  runRanks(4, [&](int rank, vigilComm_t& comm) {
    std::vector<uint8_t> first;
    ASSERT_TRUE(runExact(rank, comm, k, &first));
    for (int i = 1; i < 20; ++i) {
      std::vector<uint8_t> again;
      ASSERT_TRUE(runExact(rank, comm, k, &again)) << "run " << i;
      ASSERT_EQ(again, first) << "rank " << rank << " run " << i << " differs from run 0";
    }
  });
}

TEST(MoeRepeat, TwentyRunsGiveIdenticalBytesOnEightRanks) {
  const Case k = makeCase({.W = 8,
                           .E = 16,
                           .K = 3,
                           .bs = {2, 0, 3, 1, 4, 2, 0, 3},
                           .xType = vigilFloat16,
                           .maskDims = 1,
                           .unusedPercent = 10,
                           .identity = false,
                           .seed = 22});
  runRanks(8, [&](int rank, vigilComm_t& comm) {
    std::vector<uint8_t> first;
    ASSERT_TRUE(runExact(rank, comm, k, &first));
    for (int i = 1; i < 20; ++i) {
      std::vector<uint8_t> again;
      ASSERT_TRUE(runExact(rank, comm, k, &again)) << "run " << i;
      ASSERT_EQ(again, first) << "rank " << rank << " run " << i << " differs from run 0";
    }
  });
}

// expertTokenNumsType only formats this rank's own output; it is not among
// the fields that must agree (moe.md, Validation 6), so ranks may differ.
TEST(MoeExactMixed, ExpertTokenNumsTypeMayDifferBetweenRanks) {
  Spec s{.W = 3, .E = 6, .K = 3, .bs = {4, 6, 2}, .tokenNumsType = 0, .unusedPercent = 10, .seed = 23};
  const Case prefix = makeCase(s);
  s.tokenNumsType = 1;
  const Case counts = makeCase(s);
  runRanks(3, [&](int rank, vigilComm_t& comm) { runExact(rank, comm, rank == 1 ? counts : prefix); });
}

// ---- The mode enums of vigil.h ----------------------------------------------

// vigilMoeQuantMode_t and vigilMoeExpertTokenNumsType_t name the integers
// vigilMoeConfig has always taken (docs/api.md); the fields stay int.
TEST(MoeModes, EnumValuesAreTheDocumentedIntegers) {
  static_assert(std::is_same_v<std::underlying_type_t<vigilMoeQuantMode_t>, int>);
  static_assert(std::is_same_v<std::underlying_type_t<vigilMoeExpertTokenNumsType_t>, int>);
  EXPECT_EQ(vigilMoeQuantNone, 0);
  EXPECT_EQ(vigilMoeQuantDynamicInt8, 2);
  EXPECT_EQ(vigilMoeExpertTokenNumsPrefixSum, 0);
  EXPECT_EQ(vigilMoeExpertTokenNumsCount, 1);
}

// One dispatch of `b` (its outputs start as 0xA5): every output byte,
// guard areas included.
std::vector<uint8_t> dispatchOutputs(vigilComm_t comm, RankBuffers& b) {
  vigilMoeDispatchArgs a = b.args();
  size_t ws = 0;
  EXPECT_EQ(vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws), vigilSuccess) << vigilGetLastError(comm);
  std::vector<uint8_t> work(std::max<size_t>(ws, 1), kFill);
  vigilMoeHandle_t h = nullptr;
  EXPECT_EQ(vigilMoeDispatch(&b.cfg, &a, work.data(), ws, &h, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
  if (h != nullptr) {
    EXPECT_EQ(vigilMoeHandleDestroy(h), vigilSuccess);
  }
  std::vector<uint8_t> bytes;
  auto append = [&](const auto& v) {
    const auto* p = reinterpret_cast<const uint8_t*>(v.data());
    bytes.insert(bytes.end(), p, p + v.size() * sizeof(v[0]));
  };
  append(b.expandX), append(b.dyn), append(b.expandScales), append(b.tokenNums), append(b.recvCounts),
      append(b.recvRows);
  return bytes;
}

TEST(MoeModes, EnumAndIntegerGiveIdenticalDispatches) {
  struct Modes {
    vigilMoeQuantMode_t quant;
    int quantValue;
    vigilMoeExpertTokenNumsType_t tokenNums;
    int tokenNumsValue;
  };
  for (const Modes m : {Modes{vigilMoeQuantNone, 0, vigilMoeExpertTokenNumsPrefixSum, 0},
                        Modes{vigilMoeQuantNone, 0, vigilMoeExpertTokenNumsCount, 1},
                        Modes{vigilMoeQuantDynamicInt8, 2, vigilMoeExpertTokenNumsPrefixSum, 0},
                        Modes{vigilMoeQuantDynamicInt8, 2, vigilMoeExpertTokenNumsCount, 1}}) {
    SCOPED_TRACE("quantMode " + std::to_string(m.quantValue) + ", expertTokenNumsType " +
                 std::to_string(m.tokenNumsValue));
    const Case k = makeCase({.W = 3,
                             .S = 1,
                             .Sh = 1,
                             .E = 4,
                             .bs = {3, 0, 5},
                             .xType = vigilBfloat16,
                             .quantMode = m.quantValue,
                             .tokenNumsType = m.tokenNumsValue,
                             .unusedPercent = 20,
                             .smooth = true,
                             .seed = 31});
    runRanks(3, [&](int rank, vigilComm_t& comm) {
      RankBuffers byValue(k, rank), byEnum(k, rank);
      byValue.cfg.quantMode = m.quantValue;
      byValue.cfg.expertTokenNumsType = m.tokenNumsValue;
      byEnum.cfg.quantMode = m.quant;
      byEnum.cfg.expertTokenNumsType = m.tokenNums;
      const std::vector<uint8_t> fromValue = dispatchOutputs(comm, byValue);
      checkDispatch(k, rank, byValue);
      EXPECT_EQ(dispatchOutputs(comm, byEnum), fromValue) << "rank " << rank;
    });
  }
}

// Two dispatches in flight, then their combines (micro-batch pipelining):
// each handle keeps its own routing.
TEST(MoeHandles, TwoDispatchesThenTwoCombines) {
  const Case a = makeCase({.W = 4, .S = 2, .Sh = 1, .E = 4, .bs = {3, 5, 0, 2}, .maskDims = 1, .seed = 24});
  const Case b = makeCase({.W = 4, .S = 2, .Sh = 1, .E = 4, .bs = {6, 1, 4, 3}, .unusedPercent = 30, .seed = 25});
  runRanks(4, [&](int rank, vigilComm_t& comm) {
    struct Run {
      const Case* k;
      std::unique_ptr<RankBuffers> buf;
      std::vector<uint8_t> work;
      vigilMoeHandle_t h = nullptr;
    };
    Run runs[2] = {{&a, std::make_unique<RankBuffers>(a, rank), {}, nullptr},
                   {&b, std::make_unique<RankBuffers>(b, rank), {}, nullptr}};
    for (Run& r : runs) {
      vigilMoeDispatchArgs args = r.buf->args();
      size_t ws = 0;
      ASSERT_EQ(vigilMoeDispatchGetWorkspaceSize(&r.buf->cfg, &args, comm, &ws), vigilSuccess)
          << vigilGetLastError(comm);
      r.work.assign(std::max<size_t>(ws, 1), 0);
      ASSERT_EQ(vigilMoeDispatch(&r.buf->cfg, &args, r.work.data(), ws, &r.h, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      checkDispatch(*r.k, rank, *r.buf);
    }
    for (Run& r : runs) {
      const Case& k = *r.k;
      const size_t outBytes = static_cast<size_t>(k.in.ranks[rank].bs * k.in.cfg.H) * 4;
      std::vector<uint8_t> expertOut(k.cin.expertOut[rank]), out(outBytes + 16, kFill);
      expertOut.resize(expertOut.size() + 16);
      std::vector<float> scales(k.cin.scales[rank]);
      scales.resize(scales.size() + 4);
      vigilMoeCombineArgs ca{expertOut.data(), vigilFloat32, scales.data(), nullptr, out.data()};
      size_t cws = 0;
      ASSERT_EQ(vigilMoeCombineGetWorkspaceSize(&r.buf->cfg, r.h, comm, &cws), vigilSuccess) << vigilGetLastError(comm);
      std::vector<uint8_t> cw(std::max<size_t>(cws, 1));
      ASSERT_EQ(vigilMoeCombine(&r.buf->cfg, r.h, &ca, cw.data(), cws, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      expectSameBytes(out.data(), k.refOut[rank].data(), outBytes, "combine out");
      expectUnwritten(out, outBytes, "combine out beyond bs rows");
      EXPECT_EQ(vigilMoeHandleDestroy(r.h), vigilSuccess);
    }
  });
}

TEST(MoeHandles, DestroyNullIsHarmless) {
  // Neither api.md nor vigil.h says; both success and a refusal are acceptable, a crash is not.
  const vigilResult_t rc = vigilMoeHandleDestroy(nullptr);
  EXPECT_TRUE(rc == vigilSuccess || rc == vigilInvalidArgument) << rc;
}

}  // namespace
}  // namespace vigil::test::moe
