// The C++ layer: RAII communicators, typed calls, exceptions with ids.

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "vigil/vigil.hpp"

namespace {

TEST(CppApi, CollectivesAndExceptions) {
  vigil::RootInfo root = vigil::RootInfo::create();
  EXPECT_EQ(vigil::RootInfo::fromString(root.toString()).toString(), root.toString());
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      vigil::Communicator comm(3, root, r);
      EXPECT_EQ(comm.rank(), r);
      EXPECT_EQ(comm.size(), 3);
      std::vector<double> v(5, r + 1.0);
      comm.allReduce(v.data(), v.data(), v.size());
      EXPECT_EQ(v, std::vector<double>(5, 6.0));
      std::vector<int32_t> all(3);
      int32_t mine = 10 * r;
      comm.allGather(&mine, all.data(), 1);
      EXPECT_EQ(all, (std::vector<int32_t>{0, 10, 20}));
      {
        vigil::Group group;
        int64_t out = r, in = -1;
        comm.send(&out, 1, (r + 1) % 3);
        comm.recv(&in, 1, (r + 2) % 3);
        group.end();
        EXPECT_EQ(in, (r + 2) % 3);
      }
      try {
        comm.broadcast<float>(nullptr, nullptr, 4, 0);
        ADD_FAILURE() << "no exception";
      } catch (const vigil::Error& e) {
        EXPECT_EQ(e.result(), vigilInvalidArgument);
        EXPECT_EQ(e.id(), "VG-API-001");
      }
      comm.barrier();
    });
  }
  for (auto& t : ranks) t.join();
}

// The v-variants and prefix reductions through the C++ layer.
TEST(CppApi, VCollectivesAndScans) {
  vigil::RootInfo root = vigil::RootInfo::create();
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      vigil::Communicator comm(3, root, r);
      const size_t counts[3] = {1, 2, 3}, displs[3] = {0, 1, 3};
      std::vector<int32_t> mine(counts[r], r), all(6, -1);
      comm.allGatherV(mine.data(), mine.size(), all.data(), counts, displs);
      EXPECT_EQ(all, (std::vector<int32_t>{0, 1, 1, 2, 2, 2}));
      std::vector<int32_t> gathered(r == 2 ? 6 : 0, -1);
      comm.gatherV(mine.data(), mine.size(), gathered.data(), r == 2 ? counts : nullptr, r == 2 ? displs : nullptr, 2);
      if (r == 2) {
        EXPECT_EQ(gathered, all);
      }
      std::vector<int32_t> back(counts[r], -1);
      comm.scatterV(r == 0 ? all.data() : nullptr, r == 0 ? counts : nullptr, r == 0 ? displs : nullptr, back.data(),
                    back.size(), 0);
      EXPECT_EQ(back, mine);
      std::vector<int64_t> ones(6, 1), reduced(counts[r], 0);
      comm.reduceScatterV(ones.data(), reduced.data(), counts);
      EXPECT_EQ(reduced, std::vector<int64_t>(counts[r], 3));
      const size_t a2aCounts[3] = {1, 1, 1}, a2aDispls[3] = {0, 1, 2};
      const int32_t a2aIn[3] = {10 * r, 10 * r + 1, 10 * r + 2};
      int32_t a2aOut[3] = {};
      comm.allToAllV(a2aIn, a2aCounts, a2aDispls, a2aOut, a2aCounts, a2aDispls);
      EXPECT_EQ(a2aOut[0], r);
      EXPECT_EQ(a2aOut[2], 20 + r);
      double x = r + 1, inclusive = 0, exclusive = -1;
      comm.scan(&x, &inclusive, 1);
      comm.exscan(&x, &exclusive, 1, vigilProd);
      EXPECT_EQ(inclusive, (r + 1) * (r + 2) / 2);
      EXPECT_EQ(exclusive, r == 0 ? 1.0 : r == 1 ? 1.0 : 2.0);
      // MAXLOC on the pair structs, and a pre-multiplied sum (each rank its own scalar).
      const vigilFloat32Int32_t mine2{r == 1 ? 9.0f : 1.0f, r}, none{0, -1};
      vigilFloat32Int32_t best = none;
      comm.allReduce(&mine2, &best, 1, vigilMaxLoc);
      EXPECT_EQ(best.value, 9.0f);
      EXPECT_EQ(best.index, 1);
      const vigilRedOp_t scaled = comm.createPreMulSum(double(r + 1));
      double one = 1, total = 0;
      comm.allReduce(&one, &total, 1, scaled);
      EXPECT_EQ(total, 6.0);
      comm.destroyRedOp(scaled);
      try {
        comm.allReduce(&one, &total, 1, scaled);
        ADD_FAILURE() << "a destroyed operator was accepted";
      } catch (const vigil::Error& e) {
        EXPECT_EQ(e.id(), "VG-API-003");
      }
    });
  }
  for (auto& t : ranks) t.join();
}

TEST(CppApi, InitErrorsThrowWithTheirId) {
  try {
    vigil::Communicator comm(2, vigil::RootInfo::create(), 5);
    ADD_FAILURE() << "no exception";
  } catch (const vigil::Error& e) {
    EXPECT_EQ(e.result(), vigilInvalidArgument);
    EXPECT_EQ(e.id(), "VG-API-010");
  }
}

void onRanks(int n, const std::function<void(vigil::Communicator&)>& body) {
  vigil::RootInfo root = vigil::RootInfo::create();
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      vigil::Communicator comm(n, root, r);
      body(comm);
    });
  }
  for (auto& t : ranks) t.join();
}

// The sum of the world ranks that share this rank's coordinates outside `dims`.
int expectedGroupSum(const vigil::DeviceMesh& mesh, int rank, const std::vector<size_t>& dims, int world) {
  const std::vector<int> mine = mesh.coordinatesOf(rank);
  int sum = 0;
  for (int r = 0; r < world; ++r) {
    std::vector<int> c = mesh.coordinatesOf(r);
    bool same = true;
    for (size_t d = 0; d < c.size(); ++d) {
      bool inside = std::find(dims.begin(), dims.end(), d) != dims.end();
      if (!inside && c[d] != mine[d]) same = false;
    }
    if (same) sum += r;
  }
  return sum;
}

TEST(CppApi, SplitReturnsAnEmptyCommunicatorForANegativeColor) {
  onRanks(3, [](vigil::Communicator& comm) {
    vigil::Communicator child = comm.split(comm.rank() == 1 ? -1 : 0, -comm.rank());
    EXPECT_EQ(static_cast<bool>(child), comm.rank() != 1);
    if (!child) return;
    EXPECT_EQ(child.size(), 2);
    EXPECT_EQ(child.rank(), comm.rank() == 0 ? 1 : 0);
  });
}

TEST(CppApi, DeviceMeshTwoDimensionalGroups) {
  onRanks(8, [](vigil::Communicator& comm) {
    vigil::DeviceMesh mesh(comm, {2, 4}, {"dp", "tp"});
    const int r = comm.rank();
    EXPECT_EQ(mesh.coordinates(), (std::vector<int>{r / 4, r % 4}));
    EXPECT_EQ(mesh.coordinate("tp"), r % 4);
    EXPECT_EQ(mesh.size("dp"), 2);
    vigil::Communicator& tp = mesh.group("tp");
    vigil::Communicator& dp = mesh.group("dp");
    EXPECT_EQ(&tp, &mesh.group("tp"));  // cached: no second split
    EXPECT_EQ(tp.size(), 4);
    EXPECT_EQ(tp.rank(), r % 4);
    EXPECT_EQ(dp.size(), 2);
    EXPECT_EQ(dp.rank(), r / 4);
    int32_t v = r;
    tp.allReduce(&v, &v, 1);
    EXPECT_EQ(v, expectedGroupSum(mesh, r, {1}, 8));
    v = r;
    dp.allReduce(&v, &v, 1);
    EXPECT_EQ(v, expectedGroupSum(mesh, r, {0}, 8));
    vigil::Communicator& all = mesh.group(std::vector<std::string>{"tp", "dp"});
    EXPECT_EQ(all.size(), 8);
    EXPECT_EQ(all.rank(), (r % 4) * 2 + r / 4);  // tp varies slowest in it
  });
}

TEST(CppApi, DeviceMeshThreeDimensionalGroups) {
  onRanks(8, [](vigil::Communicator& comm) {
    vigil::DeviceMesh mesh(comm, {2, 2, 2}, {"dp", "ep", "tp"});
    const int r = comm.rank();
    const std::vector<std::string> names = {"dp", "ep", "tp"};
    for (size_t d = 0; d < 3; ++d) {
      vigil::Communicator& g = mesh.group(names[d]);
      EXPECT_EQ(g.size(), 2);
      EXPECT_EQ(g.rank(), mesh.coordinate(names[d]));
      std::vector<double> v(1000, r);
      g.allReduce(v.data(), v.data(), v.size());
      EXPECT_EQ(v, std::vector<double>(1000, expectedGroupSum(mesh, r, {d}, 8))) << names[d];
    }
    vigil::Communicator& dpTp = mesh.group(std::vector<std::string>{"dp", "tp"});
    EXPECT_EQ(dpTp.size(), 4);
    int64_t v = r;
    dpTp.allReduce(&v, &v, 1, vigilMax);
    EXPECT_EQ(v, r | 5);  // dp and tp are bits 2 and 0 of the rank
  });
}

TEST(CppApi, DeviceMeshRefusesShapesAndNamesThatDoNotFit) {
  onRanks(2, [](vigil::Communicator& comm) {
    auto expectError = [&](const std::function<void()>& body, const char* id, const char* part) {
      try {
        body();
        ADD_FAILURE() << "no exception for " << id;
      } catch (const vigil::Error& e) {
        EXPECT_EQ(e.result(), vigilInvalidArgument);
        EXPECT_EQ(e.id(), id) << e.what();
        EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
      }
    };
    expectError(
        [&] {
          vigil::DeviceMesh m(comm, {2, 4}, {"dp", "tp"});
        },
        "VG-API-016", "the sizes multiply to 8, but the communicator has 2 ranks");
    expectError([&] { vigil::DeviceMesh m(comm, {2}, {"dp", "tp"}); }, "VG-API-016", "1 dimension size(s) but 2");
    expectError([&] { vigil::DeviceMesh m(comm, {2, 1}, {"dp", "dp"}); }, "VG-API-016", "'dp' is used twice");
    expectError([&] { vigil::DeviceMesh m(comm, {2, 0}, {"dp", "tp"}); }, "VG-API-016", "'tp' has size 0");
    vigil::DeviceMesh mesh(comm, {1, 2}, {"pp", "dp"});
    expectError([&] { mesh.group("tp"); }, "VG-API-017", "has no dimension 'tp'");
    // Nothing was split by the refusals: the group still builds on both ranks.
    int32_t v = 1;
    mesh.group("dp").allReduce(&v, &v, 1);
    EXPECT_EQ(v, 2);
  });
}

}  // namespace
