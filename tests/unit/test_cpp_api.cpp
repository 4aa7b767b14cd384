// The C++ layer: RAII communicators, typed calls, exceptions with ids.

#include <gtest/gtest.h>

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

TEST(CppApi, InitErrorsThrowWithTheirId) {
  try {
    vigil::Communicator comm(2, vigil::RootInfo::create(), 5);
    ADD_FAILURE() << "no exception";
  } catch (const vigil::Error& e) {
    EXPECT_EQ(e.result(), vigilInvalidArgument);
    EXPECT_EQ(e.id(), "VG-API-010");
  }
}

}  // namespace
