// MoE refusals (moe.md "Validation"): every rank returns, with the right
// result code and error id, a text that names what it must name, and
// nothing written (outputs stay 0xA5). A refusal every rank shares is local
// to each rank (the first phase refuses too); a refusal of one rank reaches
// the others through the handshake (VG-MOE-006 naming it), and config
// disagreements give VG-MOE-005 everywhere. Combine refuses handles that are
// not its own (VG-MOE-007).

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "moe/moe_harness.hpp"

namespace vigil::test::moe {
namespace {

// A deadline well inside the ctest timeout: a rank left waiting fails the test instead of hanging it.
vigilConfig refusalConfig() {
  return testConfig(20000, 20000);
}

// Valid cases per communicator size; E is a multiple of 8 and 16 so that a
// declared epWorldSize of 8 or 16 breaks nothing else.
const Case& baseCase(int W, bool quant = false) {
  static std::map<std::pair<int, bool>, Case> cache;
  auto it = cache.find({W, quant});
  if (it == cache.end()) {
    Spec s{.W = W, .E = W == 3 ? 6 : 16, .H = 8, .K = 2, .maxTokens = 4, .bs = std::vector<int64_t>(W, 3)};
    s.quantMode = quant ? 2 : 0;
    s.seed = 100 + W;
    it = cache.emplace(std::make_pair(W, quant), makeCase(s)).first;
  }
  return it->second;
}

struct Plan {
  int W = 2;
  std::function<const Case&(int)> caseOf{};  // default: baseCase(W)
  // Breaks this rank's call after the workspace was sized for the valid one.
  std::function<void(int, RankBuffers&, vigilMoeDispatchArgs&, size_t&)> breakIt{};
  std::function<Expect(int)> expect{};
  std::function<bool(int)> firstPhaseRefuses{};  // this rank's first phase must refuse the same way
  bool followUp = true;                          // then a valid dispatch + combine must work
};

void runRefusal(const Plan& p) {
  std::vector<const Case*> cases;
  for (int r = 0; r < p.W; ++r) cases.push_back(p.caseOf ? &p.caseOf(r) : &baseCase(p.W));
  const Case& base = baseCase(p.W);
  runRanks(
      p.W,
      [&](int rank, vigilComm_t& comm) {
        const std::string at = "rank " + std::to_string(rank);
        RankBuffers b(*cases[rank], rank);
        vigilMoeDispatchArgs a = b.args();
        size_t ws = 0;
        if (vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws) != vigilSuccess) {
          ADD_FAILURE() << at << ": first phase of a valid call: " << vigilGetLastError(comm);
          ws = size_t{1} << 22;
        }
        if (p.breakIt) p.breakIt(rank, b, a, ws);
        const Expect e = p.expect(rank);
        if (p.firstPhaseRefuses && p.firstPhaseRefuses(rank)) {
          size_t ws2 = 777;
          const Outcome f = outcome(vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws2), comm);
          expectRefusal(f, Expect{e.rc, e.id, {}, {}, {}}, at + " first phase");
        }
        std::vector<uint8_t> work(ws + 64, kFill);
        vigilMoeHandle_t h = nullptr;
        const Outcome o = outcome(vigilMoeDispatch(&b.cfg, &a, work.data(), ws, &h, comm, nullptr), comm);
        expectRefusal(o, e, at + " dispatch");
        EXPECT_EQ(h, nullptr) << at;
        if (h != nullptr) vigilMoeHandleDestroy(h);
        EXPECT_TRUE(untouched(b)) << at << ": a refused dispatch wrote its outputs";
        if (p.followUp) {
          EXPECT_TRUE(runExact(rank, comm, base)) << at << ": the communicator after the refusal";
        }
      },
      refusalConfig());
}

auto everyRank = [](int) { return true; };

Expect moeArg(const char* id) {
  return Expect{vigilInvalidArgument, id, {}, {}, {}};
}

TEST(MoeTextChecks, NamesAndNumbers) {
  EXPECT_TRUE(names("rank 1, token 3: expert 5 (slots 0 and 2)", "slot", 2));
  EXPECT_TRUE(names("rank(s) 1 refused it", "rank", 1));
  EXPECT_TRUE(names("ranks 0, 3 and 1 disagree", "rank", 1));
  EXPECT_TRUE(names("token=3", "token", 3));
  EXPECT_FALSE(names("rank 0/4: token 13", "token", 3));
  EXPECT_FALSE(names("rank 0/4 (comm x): prank 1", "rank", 1));
  EXPECT_FALSE(names("rank 11", "rank", 1));
  EXPECT_TRUE(hasNumber("needs 320 bytes, has 319", 319));
  EXPECT_FALSE(hasNumber("needs 3200", 320));
  EXPECT_FALSE(hasNumber("version 1.5", 5));
  EXPECT_TRUE(hasNumber("id -2 is outside", -2));
  EXPECT_FALSE(hasNumber("id -2 is outside", 2));
  EXPECT_EQ(withoutCommName("rank 0/2 (comm 'c3fa2'): x"), "rank 0/2 (comm): x");
}

// ---- Declared world and rank (VG-MOE-001) -----------------------------------

void declaredWorld(int commSize, int declared) {
  runRefusal(
      {.W = commSize,
       .breakIt = [&](int, RankBuffers& b, vigilMoeDispatchArgs&, size_t&) { b.cfg.epWorldSize = declared; },
       .expect =
           [&](int) {
             Expect e = moeArg("VG-MOE-001");
             e.contains = {"declared epWorldSize " + std::to_string(declared), std::to_string(commSize) + " ranks"};
             return e;
           },
       .firstPhaseRefuses = everyRank});
}

TEST(MoeRefusal, DeclaredEpWorldSize8OnTwoRanks) {
  declaredWorld(2, 8);
}
TEST(MoeRefusal, DeclaredEpWorldSize16OnEightRanks) {
  declaredWorld(8, 16);
}
TEST(MoeRefusal, DeclaredEpWorldSize2OnFourRanks) {
  declaredWorld(4, 2);
}

TEST(MoeRefusal, EpRankIdNotTheCommunicatorRank) {
  runRefusal(
      {.W = 3,
       .breakIt = [](int rank, RankBuffers& b, vigilMoeDispatchArgs&, size_t&) { b.cfg.epRankId = (rank + 1) % 3; },
       .expect =
           [](int rank) {
             Expect e = moeArg("VG-MOE-001");
             e.contains = {"epRankId"};
             e.numbers = {rank, (rank + 1) % 3};
             return e;
           },
       .firstPhaseRefuses = everyRank});
}

// ---- Expert ids (VG-MOE-003) ------------------------------------------------

TEST(MoeRefusal, SameExpertTwiceInOneToken) {
  const Case& base = baseCase(2);
  runRefusal({.W = 2,
              .breakIt = [](int, RankBuffers& b, vigilMoeDispatchArgs&, size_t&) { b.ids[1 * 2 + 1] = b.ids[1 * 2]; },
              .expect =
                  [&](int rank) {
                    Expect e = moeArg("VG-MOE-003");
                    e.named = {{"rank", rank}, {"token", 1}, {"slot", 1}};
                    e.numbers = {base.in.ranks[rank].expertIds[2]};
                    return e;
                  },
              .firstPhaseRefuses = everyRank});
}

void outOfRange(int32_t value) {
  runRefusal({.W = 2,
              .breakIt = [=](int, RankBuffers& b, vigilMoeDispatchArgs&, size_t&) { b.ids[2 * 2 + 0] = value; },
              .expect =
                  [=](int rank) {
                    Expect e = moeArg("VG-MOE-003");
                    e.named = {{"rank", rank}, {"token", 2}, {"slot", 0}};
                    e.numbers = {value};
                    return e;
                  },
              .firstPhaseRefuses = everyRank});
}

TEST(MoeRefusal, ExpertIdEqualToMoeExpertNum) {
  outOfRange(16);
}
TEST(MoeRefusal, ExpertIdBelowMinusOne) {
  outOfRange(-2);
}

// ---- Config fields (VG-MOE-002) ---------------------------------------------

struct BadConfig {
  const char* name;
  int W;
  std::function<void(RankBuffers&, vigilMoeDispatchArgs&)> apply;
  const char* field;                // the text must contain it
  int64_t value;                    // and this value
  bool requiredRowsRefuses = true;  // vigilMoeRequiredRows returns -1 for the config (docs/api.md)
};

const std::vector<BadConfig>& badConfigs() {
  using B = RankBuffers&;
  using A = vigilMoeDispatchArgs&;
  static const std::vector<BadConfig> list = {
      {"E_not_multiple_of_routed_ranks", 4, [](B b, A) { b.cfg.moeExpertNum = 6; }, "moeExpertNum", 6},
      {"E_zero", 2, [](B b, A) { b.cfg.moeExpertNum = 0; }, "moeExpertNum", 0},
      {"K_above_E", 2, [](B b, A) { b.cfg.moeExpertNum = 4, b.cfg.topK = 5; }, "topK", 5},
      {"K_zero", 2, [](B b, A) { b.cfg.topK = 0; }, "topK", 0},
      {"bs_above_maxTokensPerRank", 2, [](B, A a) { a.bs = 5; }, "bs", 5, false},
      {"Sh_above_4", 8,
       [](B b, A) { b.cfg.sharedExpertRankNum = 5, b.cfg.sharedExpertNum = 5, b.cfg.moeExpertNum = 6; },
       "sharedExpertNum", 5},
      {"S_not_multiple_of_Sh", 4,
       [](B b, A) { b.cfg.sharedExpertRankNum = 3, b.cfg.sharedExpertNum = 2, b.cfg.moeExpertNum = 8; }, "sharedExpert",
       3},
      {"Sh_without_S", 2, [](B b, A) { b.cfg.sharedExpertNum = 1; }, "sharedExpert", 1},
      {"S_without_Sh", 2, [](B b, A) { b.cfg.sharedExpertRankNum = 1; }, "sharedExpert", 1},
      {"S_equal_to_W", 2, [](B b, A) { b.cfg.sharedExpertRankNum = 2, b.cfg.sharedExpertNum = 1; },
       "sharedExpertRankNum", 2},
      {"S_negative", 2, [](B b, A) { b.cfg.sharedExpertRankNum = -1; }, "sharedExpertRankNum", -1},
      {"hidden_zero", 2, [](B b, A) { b.cfg.hidden = 0; }, "hidden", 0},
      {"hidden_negative", 2, [](B b, A) { b.cfg.hidden = -3; }, "hidden", -3},
      {"quantMode_1", 2, [](B b, A) { b.cfg.quantMode = 1; }, "quantMode", 1},
      {"expertTokenNumsType_2", 2, [](B b, A) { b.cfg.expertTokenNumsType = 2; }, "expertTokenNumsType", 2},
      {"activeMaskDims_3", 2, [](B b, A a) { a.activeMask = b.mask.data(), a.activeMaskDims = 3; }, "activeMaskDims", 3,
       false},
      {"cfg_size", 2, [](B b, A) { b.cfg.size = sizeof(vigilMoeConfig) - 8; }, "size",
       static_cast<int64_t>(sizeof(vigilMoeConfig) - 8)},
  };
  return list;
}

class MoeBadConfig : public ::testing::TestWithParam<size_t> {};

TEST_P(MoeBadConfig, RefusedOnEveryRankNamingTheField) {
  const BadConfig& bad = badConfigs()[GetParam()];
  runRefusal({.W = bad.W,
              .breakIt =
                  [&](int rank, RankBuffers& b, vigilMoeDispatchArgs& a, size_t&) {
                    bad.apply(b, a);
                    if (bad.requiredRowsRefuses) {
                      EXPECT_EQ(vigilMoeRequiredRows(&b.cfg, rank), -1) << bad.name;
                    }
                  },
              .expect =
                  [&](int) {
                    Expect e = moeArg("VG-MOE-002");
                    e.contains = {bad.field};
                    e.numbers = {bad.value};
                    return e;
                  },
              .firstPhaseRefuses = everyRank});
}

INSTANTIATE_TEST_SUITE_P(Fields, MoeBadConfig, ::testing::Range<size_t>(0, badConfigs().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) { return badConfigs()[i.param].name; });

// ---- Sizes (VG-MOE-004) -----------------------------------------------------

TEST(MoeRefusal, ExpandXRowsBelowCapacity) {
  const Config cfg = baseCase(2).in.cfg;
  runRefusal({.W = 2,
              .breakIt = [](int, RankBuffers& b, vigilMoeDispatchArgs& a, size_t&) { a.expandXRows = b.capacity - 1; },
              .expect =
                  [&](int rank) {
                    const int64_t need = moeref::requiredRows(cfg, rank);
                    Expect e = moeArg("VG-MOE-004");
                    e.numbers = {need, need - 1};
                    return e;
                  },
              .firstPhaseRefuses = everyRank});
}

TEST(MoeRefusal, WorkspaceSmallerThanTheFirstPhaseSaid) {
  std::vector<int64_t> needed(4, 0);
  runRefusal({.W = 4,
              .breakIt =
                  [&](int rank, RankBuffers&, vigilMoeDispatchArgs&, size_t& ws) {
                    EXPECT_GT(ws, 0u) << "this test needs a nonzero workspace";
                    needed[rank] = static_cast<int64_t>(ws);
                    ws -= 1;
                  },
              .expect =
                  [&](int rank) {
                    Expect e = moeArg("VG-MOE-004");
                    e.numbers = {needed[rank], needed[rank] - 1};
                    return e;
                  }});
}

// ---- Pointers and types (VG-API-001, VG-API-002) ----------------------------

void nullOutput(const char* what, bool quant, const std::function<void(vigilMoeDispatchArgs&)>& apply) {
  SCOPED_TRACE(what);
  runRefusal({.W = 2,
              .caseOf = [=](int) -> const Case& { return baseCase(2, quant); },
              .breakIt = [&](int, RankBuffers&, vigilMoeDispatchArgs& a, size_t&) { apply(a); },
              .expect = [](int) { return moeArg("VG-API-001"); },
              .firstPhaseRefuses = everyRank});
}

TEST(MoeRefusal, NullRequiredPointers) {
  using A = vigilMoeDispatchArgs&;
  nullOutput("expandX", false, [](A a) { a.expandX = nullptr; });
  nullOutput("x", false, [](A a) { a.x = nullptr; });
  nullOutput("expertIds", false, [](A a) { a.expertIds = nullptr; });
  nullOutput("expertTokenNums", false, [](A a) { a.expertTokenNums = nullptr; });
  nullOutput("epRecvCounts", false, [](A a) { a.epRecvCounts = nullptr; });
  nullOutput("recvRows", false, [](A a) { a.recvRows = nullptr; });
  nullOutput("dynamicScales (quantised)", true, [](A a) { a.dynamicScales = nullptr; });
}

TEST(MoeRefusal, NullConfigArgsHandleOrWorkspace) {
  const Case& base = baseCase(2);
  runRanks(
      2,
      [&](int rank, vigilComm_t& comm) {
        RankBuffers b(base, rank);
        vigilMoeDispatchArgs a = b.args();
        size_t ws = 0;
        vigilMoeHandle_t h = nullptr;
        std::vector<uint8_t> work(1 << 20);
        const Expect e = moeArg("VG-API-001");
        expectRefusal(outcome(vigilMoeDispatchGetWorkspaceSize(nullptr, &a, comm, &ws), comm), e, "first phase cfg");
        expectRefusal(outcome(vigilMoeDispatchGetWorkspaceSize(&b.cfg, nullptr, comm, &ws), comm), e,
                      "first phase args");
        expectRefusal(outcome(vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, nullptr), comm), e, "first phase out");
        ASSERT_EQ(vigilMoeDispatchGetWorkspaceSize(&b.cfg, &a, comm, &ws), vigilSuccess) << vigilGetLastError(comm);
        expectRefusal(outcome(vigilMoeDispatch(nullptr, &a, work.data(), ws, &h, comm, nullptr), comm), e, "cfg");
        expectRefusal(outcome(vigilMoeDispatch(&b.cfg, nullptr, work.data(), ws, &h, comm, nullptr), comm), e, "args");
        expectRefusal(outcome(vigilMoeDispatch(&b.cfg, &a, work.data(), ws, nullptr, comm, nullptr), comm), e,
                      "handle out");
        if (ws > 0)
          expectRefusal(outcome(vigilMoeDispatch(&b.cfg, &a, nullptr, ws, &h, comm, nullptr), comm), e, "workspace");
        EXPECT_EQ(h, nullptr);
        EXPECT_TRUE(untouched(b));
        EXPECT_TRUE(runExact(rank, comm, base)) << "the communicator after the refusals";
      },
      refusalConfig());
}

TEST(MoeRefusal, UnsupportedXType) {
  for (int t : {static_cast<int>(vigilInt32), static_cast<int>(vigilFloat64), 42}) {
    SCOPED_TRACE(t);
    runRefusal({.W = 2,
                .breakIt = [=](int, RankBuffers&, vigilMoeDispatchArgs& a,
                               size_t&) { a.xType = static_cast<vigilDataType_t>(t); },
                .expect = [](int) { return moeArg("VG-API-002"); },
                .firstPhaseRefuses = everyRank});
  }
}

// ---- One rank refuses: it returns its own error, the others VG-MOE-006 -----

void oneRankRefuses(int W, int bad, const char* id,
                    const std::function<void(RankBuffers&, vigilMoeDispatchArgs&)>& apply, bool followUp = false) {
  runRefusal({.W = W,
              .breakIt =
                  [&](int rank, RankBuffers& b, vigilMoeDispatchArgs& a, size_t&) {
                    if (rank == bad) apply(b, a);
                  },
              .expect =
                  [&](int rank) {
                    if (rank == bad) return moeArg(id);
                    Expect e{vigilRemoteError, "VG-MOE-006", {id}, {{"rank", bad}}, {}};  // quotes the id
                    return e;
                  },
              .firstPhaseRefuses = [&](int rank) { return rank == bad; },
              .followUp = followUp});
}

TEST(MoeRefusal, OnlyRank1HasADuplicateExpert) {
  oneRankRefuses(3, 1, "VG-MOE-003", [](RankBuffers& b, vigilMoeDispatchArgs&) { b.ids[1] = b.ids[0]; });
}
TEST(MoeRefusal, OnlyRank3PassesNullExpandX) {
  oneRankRefuses(4, 3, "VG-API-001", [](RankBuffers&, vigilMoeDispatchArgs& a) { a.expandX = nullptr; });
}
TEST(MoeRefusal, OnlyRank2HasTooFewRows) {
  oneRankRefuses(4, 2, "VG-MOE-004", [](RankBuffers& b, vigilMoeDispatchArgs& a) { a.expandXRows = b.capacity - 1; });
}
TEST(MoeRefusal, OnlyRank5DeclaresEpWorldSize16) {
  oneRankRefuses(8, 5, "VG-MOE-001", [](RankBuffers& b, vigilMoeDispatchArgs&) { b.cfg.epWorldSize = 16; });
}

// The handshake refused the call before anything moved: the communicator is
// still usable (api.md: a refused call leaves it usable).
TEST(MoeRefusal, CommunicatorUsableAfterARemoteRefusal) {
  oneRankRefuses(
      3, 1, "VG-MOE-003", [](RankBuffers& b, vigilMoeDispatchArgs&) { b.ids[1] = b.ids[0]; }, true);
}

// ---- Config disagreement between locally valid ranks (VG-MOE-005) ----------

struct Disagreement {
  const char* name;
  std::function<void(Spec&)> change;  // rank 1's spec
  const char* field;
  int64_t base, other;  // the two values the text must name (-1: not checked)
};

const std::vector<Disagreement>& disagreements() {
  static const std::vector<Disagreement> list = {
      {"hidden", [](Spec& s) { s.H = 12; }, "hidden", 8, 12},
      {"topK", [](Spec& s) { s.K = 3; }, "topK", 2, 3},
      {"moeExpertNum", [](Spec& s) { s.E = 24; }, "moeExpertNum", 16, 24},
      {"maxTokensPerRank", [](Spec& s) { s.maxTokens = 6; }, "maxTokensPerRank", 4, 6},
      {"quantMode", [](Spec& s) { s.quantMode = 2; }, "quantMode", 0, 2},
      {"sharedExpertNum", [](Spec& s) { s.S = 2, s.Sh = 2; }, "sharedExpert", -1, -1},
      {"sharedExpertRankNum", [](Spec& s) { s.S = 2, s.Sh = 1; }, "sharedExpert", -1, -1},
      {"xType", [](Spec& s) { s.xType = vigilFloat16; }, "", -1, -1},  // errors.md: "the data type" must agree
  };
  return list;
}

class MoeDisagreement : public ::testing::TestWithParam<size_t> {};

TEST_P(MoeDisagreement, MismatchOnEveryRankNamingTheField) {
  const Disagreement& d = disagreements()[GetParam()];
  const bool sharedBase = std::string(d.name) == "sharedExpertNum";  // base with S=2, Sh=1; rank 1 has Sh=2
  Spec s = baseCase(4).spec;
  if (sharedBase) s.S = 2, s.Sh = 1, s.E = 16;
  const Case base = makeCase(s);
  d.change(s);
  const Case other = makeCase(s);
  runRefusal({.W = 4,
              .caseOf = [&](int rank) -> const Case& { return rank == 1 ? other : base; },
              .expect =
                  [&](int) {
                    Expect e{vigilMismatch, "VG-MOE-005", {d.field}, {{"rank", 1}}, {}};
                    if (d.base >= 0) e.numbers = {d.base, d.other};
                    return e;
                  },
              .followUp = false});
}

INSTANTIATE_TEST_SUITE_P(Fields, MoeDisagreement, ::testing::Range<size_t>(0, disagreements().size()),
                         [](const ::testing::TestParamInfo<size_t>& i) { return disagreements()[i.param].name; });

// ---- Combine with a handle that is not its own (VG-MOE-007) -----------------

struct Dispatched {
  std::unique_ptr<RankBuffers> b;
  std::vector<uint8_t> work, expertOut, out;
  std::vector<float> scales;
  vigilMoeCombineArgs args{};
  vigilMoeHandle_t h = nullptr;
  size_t outBytes = 0;
};

void dispatchOk(const Case& k, int rank, vigilComm_t comm, Dispatched& d) {
  d.b = std::make_unique<RankBuffers>(k, rank);
  vigilMoeDispatchArgs a = d.b->args();
  size_t ws = 0;
  ASSERT_EQ(vigilMoeDispatchGetWorkspaceSize(&d.b->cfg, &a, comm, &ws), vigilSuccess) << vigilGetLastError(comm);
  d.work.assign(ws + 1, 0);
  ASSERT_EQ(vigilMoeDispatch(&d.b->cfg, &a, d.work.data(), ws, &d.h, comm, nullptr), vigilSuccess)
      << vigilGetLastError(comm);
  d.outBytes = static_cast<size_t>(k.in.ranks[rank].bs * k.in.cfg.H) * 4;
  d.expertOut = k.cin.expertOut[rank];
  d.expertOut.resize(d.expertOut.size() + 16);
  d.out.assign(d.outBytes + 16, kFill);
  d.scales = k.cin.scales[rank];
  d.scales.resize(d.scales.size() + 4);
  d.args = vigilMoeCombineArgs{d.expertOut.data(), vigilFloat32, d.scales.data(), nullptr, d.out.data()};
}

// A valid combine of `d` on `comm`, checked against the reference.
void combineOk(const Case& k, int rank, vigilComm_t comm, Dispatched& d) {
  size_t cws = 0;
  ASSERT_EQ(vigilMoeCombineGetWorkspaceSize(&d.b->cfg, d.h, comm, &cws), vigilSuccess) << vigilGetLastError(comm);
  std::vector<uint8_t> cw(cws + 1);
  std::fill(d.out.begin(), d.out.end(), kFill);
  ASSERT_EQ(vigilMoeCombine(&d.b->cfg, d.h, &d.args, cw.data(), cws, comm, nullptr), vigilSuccess)
      << vigilGetLastError(comm);
  expectSameBytes(d.out.data(), k.refOut[rank].data(), d.outBytes, "combine out");
  expectUnwritten(d.out, d.outBytes, "combine out beyond bs rows");
}

void expectCombineRefused(vigilComm_t comm, const vigilMoeConfig& cfg, vigilMoeHandle_t h, Dispatched& d,
                          const Expect& e, const std::string& what, bool firstPhase = true) {
  if (firstPhase) {
    size_t cws = 777;
    expectRefusal(outcome(vigilMoeCombineGetWorkspaceSize(&cfg, h, comm, &cws), comm), e, what + " first phase");
  }
  std::vector<uint8_t> cw(1 << 20);
  std::fill(d.out.begin(), d.out.end(), kFill);
  expectRefusal(outcome(vigilMoeCombine(&cfg, h, &d.args, cw.data(), cw.size(), comm, nullptr), comm), e, what);
  expectUnwritten(d.out, 0, what + ": a refused combine wrote out");
}

const Expect kNotItsHandle{vigilInvalidUsage, "VG-MOE-007", {}, {}, {}};

TEST(MoeCombineRefusal, HandleFromAnotherCommunicatorOrConfigOrNull) {
  const Case& k = baseCase(4);
  runRanks(
      4,
      [&](int rank, vigilComm_t& comm) {
        vigilComm_t other = nullptr;
        ASSERT_EQ(vigilCommSplit(comm, 0, rank, &other), vigilSuccess) << vigilGetLastError(comm);
        Dispatched d;
        dispatchOk(k, rank, comm, d);
        if (d.h == nullptr) return (void)vigilCommDestroy(other);
        expectCombineRefused(other, d.b->cfg, d.h, d, kNotItsHandle, "another communicator");
        vigilMoeConfig changed = d.b->cfg;
        changed.hidden += 1;
        expectCombineRefused(comm, changed, d.h, d, kNotItsHandle, "another hidden");
        changed = d.b->cfg;
        changed.topK = 1;
        expectCombineRefused(comm, changed, d.h, d, kNotItsHandle, "another topK");
        expectCombineRefused(comm, d.b->cfg, nullptr, d, kNotItsHandle, "NULL handle");
        combineOk(k, rank, comm, d);  // the handle still works where it belongs
        EXPECT_EQ(vigilMoeHandleDestroy(d.h), vigilSuccess);
        EXPECT_EQ(vigilCommDestroy(other), vigilSuccess);
      },
      refusalConfig());
}

TEST(MoeCombineRefusal, DestroyedHandle) {
  const Case& k = baseCase(2);
  runRanks(
      2,
      [&](int rank, vigilComm_t& comm) {
        Dispatched d;
        dispatchOk(k, rank, comm, d);
        if (d.h == nullptr) return;
        combineOk(k, rank, comm, d);
        ASSERT_EQ(vigilMoeHandleDestroy(d.h), vigilSuccess);
        // The handle's memory is gone: every later use is refused without reading it (ASan checks that).
        const Expect destroyed{vigilInvalidUsage, "VG-MOE-007", {"was destroyed (vigilMoeHandleDestroy)"}, {}, {}};
        expectRefusal(outcome(vigilMoeHandleDestroy(d.h), nullptr), destroyed, "destroyed twice");
        Expect combined = destroyed;
        combined.contains.push_back("rank " + std::to_string(rank) + "/2");
        expectCombineRefused(comm, d.b->cfg, d.h, d, combined, "combine with a destroyed handle");
        d.h = nullptr;
        // The communicator is still usable.
        Dispatched again;
        dispatchOk(k, rank, comm, again);
        if (again.h == nullptr) return;
        combineOk(k, rank, comm, again);
        EXPECT_EQ(vigilMoeHandleDestroy(again.h), vigilSuccess);
      },
      refusalConfig());
}

TEST(MoeCombineRefusal, RanksCombiningDifferentDispatches) {
  const Case& a = baseCase(3);
  Spec s = a.spec;
  s.seed = 77;
  const Case b = makeCase(s);
  runRanks(
      3,
      [&](int rank, vigilComm_t& comm) {
        Dispatched da, db;
        dispatchOk(a, rank, comm, da);
        dispatchOk(b, rank, comm, db);
        if (da.h == nullptr || db.h == nullptr) return;
        // Rank 0 combines the first dispatch, the others the second: refused on every rank.
        Dispatched& mine = rank == 0 ? da : db;
        expectCombineRefused(comm, mine.b->cfg, mine.h, mine, kNotItsHandle, "different dispatches", false);
        combineOk(b, rank, comm, db);
        combineOk(a, rank, comm, da);
        EXPECT_EQ(vigilMoeHandleDestroy(da.h), vigilSuccess);
        EXPECT_EQ(vigilMoeHandleDestroy(db.h), vigilSuccess);
      },
      refusalConfig());
}

TEST(MoeCombineRefusal, WorkspaceSmallerThanTheFirstPhaseSaid) {
  const Case& k = baseCase(2);
  runRanks(
      2,
      [&](int rank, vigilComm_t& comm) {
        Dispatched d;
        dispatchOk(k, rank, comm, d);
        if (d.h == nullptr) return;
        size_t cws = 0;
        ASSERT_EQ(vigilMoeCombineGetWorkspaceSize(&d.b->cfg, d.h, comm, &cws), vigilSuccess);
        if (allAgree(comm, cws > 0)) {
          std::vector<uint8_t> cw(cws);
          Expect e = moeArg("VG-MOE-004");
          e.numbers = {static_cast<int64_t>(cws), static_cast<int64_t>(cws - 1)};
          expectRefusal(outcome(vigilMoeCombine(&d.b->cfg, d.h, &d.args, cw.data(), cws - 1, comm, nullptr), comm), e,
                        "combine workspace");
          expectUnwritten(d.out, 0, "a refused combine wrote out");
        }
        combineOk(k, rank, comm, d);
        EXPECT_EQ(vigilMoeHandleDestroy(d.h), vigilSuccess);
      },
      refusalConfig());
}

}  // namespace
}  // namespace vigil::test::moe
