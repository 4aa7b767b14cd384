// Init on thread-ranks: what every rank reports when a rank is missing,
// ranks disagree (world size, version, config), a rank is claimed twice,
// the root is unreachable, or a few strangers connect to the root during
// init (floods and forged hellos: test_root_attacks.cpp).

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>

#include "bootstrap/launch_env.hpp"
#include "bootstrap/rendezvous.hpp"
#include "bootstrap/root_info.hpp"
#include "bootstrap/root_server.hpp"
#include "comm/communicator.hpp"
#include "common/thread_ranks.hpp"
#include "core/log.hpp"
#include "core/strcat.hpp"

namespace vigil::test {
namespace {

using std::chrono::steady_clock;

double secondsFrom(steady_clock::time_point t) {
  return std::chrono::duration<double>(steady_clock::now() - t).count();
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(Init, MissingRankIsNamedAfterTheConnectTimeout) {
  vigilRootInfo info = newRootInfo();
  vigilConfig cfg = testConfig(60000, 1500);
  auto start = steady_clock::now();
  auto out = initAll(info, {{0, 4}, {1, 4}, {2, 4}}, {cfg, cfg, cfg});
  double took = secondsFrom(start);
  for (const Outcome& o : out) {
    EXPECT_EQ(o.rc, vigilTimeout) << o.text;
    EXPECT_TRUE(contains(o.text, "VG-BOOT-003")) << o.text;
    EXPECT_TRUE(contains(o.text, "only 3 of 4 ranks")) << o.text;
    EXPECT_TRUE(contains(o.text, "missing: 3")) << o.text;
    EXPECT_TRUE(contains(o.text, "arrived: 0 (" + localHostName() + ", pid ")) << o.text;
    EXPECT_TRUE(contains(o.text, "VIGIL_CONNECT_TIMEOUT_MS")) << o.text;
  }
  std::cout << "missing-rank report after " << took << " s:\n  " << out[0].text << "\n";
  EXPECT_GE(took, 1.4);
  EXPECT_LT(took, 10.0);
}

TEST(Init, WorldSizeDisagreementFailsAtOnceOnEveryRank) {
  vigilRootInfo info = newRootInfo();
  vigilConfig cfg = testConfig();
  auto start = steady_clock::now();
  auto out = initAll(info, {{0, 2}, {1, 3}}, {cfg, cfg});
  for (const Outcome& o : out) {
    EXPECT_EQ(o.rc, vigilMismatch) << o.text;
    EXPECT_TRUE(contains(o.text, "VG-BOOT-004")) << o.text;
    EXPECT_TRUE(contains(o.text, "declared 2")) << o.text;
    EXPECT_TRUE(contains(o.text, "declared 3")) << o.text;
  }
  std::cout << "world-size mismatch report:\n  " << out[0].text << "\n";
  EXPECT_LT(secondsFrom(start), 5.0) << "must not wait for the 60 s connect timeout";
}

TEST(Init, ConfigThatMustAgreeIsCompared) {
  vigilRootInfo info = newRootInfo();
  vigilConfig a = testConfig(), b = testConfig();
  a.fingerprint = 1;
  b.fingerprint = 0;
  auto out = initAll(info, {{0, 2}, {1, 2}}, {a, b});
  for (const Outcome& o : out) {
    EXPECT_EQ(o.rc, vigilMismatch) << o.text;
    EXPECT_TRUE(contains(o.text, "VG-BOOT-006")) << o.text;
    EXPECT_TRUE(contains(o.text, "VIGIL_FINGERPRINT is ")) << o.text;
  }
  vigilConfig c = testConfig(1000), d = testConfig(2000);
  out = initAll(newRootInfo(), {{0, 2}, {1, 2}}, {c, d});
  for (const Outcome& o : out) {
    EXPECT_EQ(o.rc, vigilMismatch) << o.text;
    EXPECT_TRUE(contains(o.text, "VIGIL_TIMEOUT_MS")) << o.text;
    EXPECT_TRUE(contains(o.text, "1000")) << o.text;
    EXPECT_TRUE(contains(o.text, "2000")) << o.text;
  }
}

TEST(Init, VersionSkewIsReportedWithBothVersions) {
  for (bool wireSkew : {false, true}) {
    vigilRootInfo info = newRootInfo();
    RootInfo root = RootInfo::decode(info);
    Outcome current, skewed;
    std::thread a([&] {
      vigilComm_t comm = nullptr;
      vigilConfig cfg = testConfig();
      current.rc = vigilCommInitRootInfoConfig(2, &info, 0, &cfg, &comm);
      current.text = vigilGetLastError(nullptr);
      if (comm) vigilCommDestroy(comm);
    });
    std::thread b([&] {
      InitOverrides skew;
      if (wireSkew) {
        skew.wireVersion = kWireVersion + 1;
      } else {
        skew.libVersion = VIGIL_VERSION_CODE + 1;
      }
      try {
        Communicator::create(2, root, 1, CommConfig::resolve(nullptr, processConfig()), skew);
      } catch (const Error& e) {
        skewed.rc = e.result();
        skewed.text = e.text();
      }
    });
    a.join();
    b.join();
    for (const Outcome* o : {&current, &skewed}) {
      EXPECT_EQ(o->rc, vigilMismatch) << o->text;
      EXPECT_TRUE(contains(o->text, "VG-BOOT-005")) << o->text;
      EXPECT_TRUE(contains(o->text, "rank 1")) << o->text;
      EXPECT_TRUE(contains(o->text, std::to_string(wireSkew ? VIGIL_VERSION_CODE : VIGIL_VERSION_CODE + 1))) << o->text;
    }
    std::cout << "version skew report:\n  " << current.text << "\n";
  }
}

// Ranks on one host share memory unless told otherwise; ranks on different
// hosts talk over sockets, and forcing shm on them is refused on every rank.
TEST(Init, TransportFollowsTheHostsOfTheRanks) {
  for (TransportKind transport : {TransportKind::Auto, TransportKind::Shm}) {
    for (bool twoHosts : {false, true}) {
      vigilRootInfo info = newRootInfo();
      RootInfo root = RootInfo::decode(info);
      CommConfig config = CommConfig::resolve(nullptr, processConfig());
      config.transport = transport;
      Outcome outcome[2];
      std::string used[2];
      std::vector<std::thread> ranks;
      for (int r = 0; r < 2; ++r) {
        ranks.emplace_back([&, r] {
          InitOverrides where;
          if (twoHosts && r == 1) where.hostId = "another-host/1";
          try {
            std::shared_ptr<Communicator> comm = Communicator::create(2, root, r, config, where);
            used[r] = comm->transportName();
            comm->destroy();
          } catch (const Error& e) {
            outcome[r] = {e.result(), e.text()};
          }
        });
      }
      for (auto& t : ranks) t.join();
      SCOPED_TRACE(std::string(toString(transport)) + (twoHosts ? ", two hosts" : ", one host"));
      for (int r = 0; r < 2; ++r) {
        if (twoHosts && transport == TransportKind::Shm) {
          EXPECT_EQ(outcome[r].rc, vigilSystemError) << outcome[r].text;
          EXPECT_TRUE(contains(outcome[r].text, "VG-NET-006")) << outcome[r].text;
          EXPECT_TRUE(contains(outcome[r].text, cat("rank(s) ", 1 - r, " run on another host"))) << outcome[r].text;
          if (r == 0) std::cout << "shm forced across hosts:\n  " << outcome[r].text << "\n";
        } else {
          EXPECT_EQ(outcome[r].rc, vigilSuccess) << outcome[r].text;
          EXPECT_EQ(used[r], twoHosts ? "tcp" : "shm");
        }
      }
    }
  }
}

TEST(Init, ARankClaimedTwiceIsRefused) {
  vigilRootInfo info = newRootInfo();
  vigilConfig cfg = testConfig(60000, 3000);
  auto out = initAll(info, {{0, 2}, {0, 2}}, {cfg, cfg});
  for (const Outcome& o : out) {
    EXPECT_EQ(o.rc, vigilInvalidArgument) << o.text;
    EXPECT_TRUE(contains(o.text, "VG-BOOT-007")) << o.text;
    EXPECT_TRUE(contains(o.text, "rank 0 was claimed twice")) << o.text;
  }
}

TEST(Init, UnreachableRootIsNamed) {
  // A port that was free a moment ago: nothing listens there.
  int probe = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  getsockname(probe, reinterpret_cast<sockaddr*>(&addr), &len);
  ::close(probe);
  RootInfo root;
  root.token = randomToken();
  root.address.length = sizeof addr;
  std::memcpy(&root.address.storage, &addr, sizeof addr);
  vigilRootInfo info{};
  root.encode(&info);
  vigilConfig cfg = testConfig(60000, 800);
  auto out = initAll(info, {{0, 2}}, {cfg});
  EXPECT_EQ(out[0].rc, vigilTimeout) << out[0].text;
  EXPECT_TRUE(contains(out[0].text, "VG-BOOT-002")) << out[0].text;
  EXPECT_TRUE(contains(out[0].text, root.address.toString())) << out[0].text;
}

TEST(Init, StrangersAtTheRootDoNotDisturbTheJob) {
  vigilRootInfo info = newRootInfo();
  RootInfo root = RootInfo::decode(info);
  auto connectTo = [&] {
    Fd fd(::socket(root.address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
    EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&root.address.storage), root.address.length), 0);
    return fd;
  };
  std::vector<Fd> strangers;
  strangers.push_back(connectTo());  // silent
  Fd garbage = connectTo();
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n and some more bytes";
  ASSERT_GT(::send(garbage.get(), junk, sizeof junk, MSG_NOSIGNAL), 0);
  strangers.push_back(std::move(garbage));
  Fd wrongToken = connectTo();
  Preamble p;
  p.kind = static_cast<uint16_t>(ConnKind::Rendezvous);
  p.token = randomToken();
  ASSERT_EQ(::send(wrongToken.get(), &p, sizeof p, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof p));
  strangers.push_back(std::move(wrongToken));
  Fd huge = connectTo();
  p.token = root.token;
  p.rank = 0;
  p.libVersion = VIGIL_VERSION_CODE;
  uint32_t hugeLength = 0xffffffffu;
  ASSERT_EQ(::send(huge.get(), &p, sizeof p, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof p));
  ASSERT_EQ(::send(huge.get(), &hugeLength, 4, MSG_NOSIGNAL), 4);
  strangers.push_back(std::move(huge));
  Fd partial = connectTo();
  ASSERT_EQ(::send(partial.get(), &p, 10, MSG_NOSIGNAL), 10);  // a third of a preamble, then silence
  strangers.push_back(std::move(partial));

  auto start = steady_clock::now();
  std::vector<int> sums(3);
  vigilConfig cfg = testConfig(60000, 20000);
  std::vector<std::thread> threads;
  for (int r = 0; r < 3; ++r) {
    threads.emplace_back([&, r] {
      vigilComm_t comm = nullptr;
      ASSERT_EQ(vigilCommInitRootInfoConfig(3, &info, r, &cfg, &comm), vigilSuccess) << vigilGetLastError(nullptr);
      int v = r + 1;
      EXPECT_EQ(vigilAllReduce(&v, &sums[static_cast<size_t>(r)], 1, vigilInt32, vigilSum, comm, nullptr),
                vigilSuccess);
      vigilCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, std::vector<int>({6, 6, 6}));
  EXPECT_LT(secondsFrom(start), 5.0) << "silent strangers must not stall the root";
}

TEST(Init, BadArgumentsHaveIds) {
  vigilRootInfo info = newRootInfo();
  vigilComm_t comm = nullptr;
  EXPECT_EQ(vigilCommInitRootInfo(0, &info, 0, &comm), vigilInvalidArgument);
  EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-API-010")) << vigilGetLastError(nullptr);
  EXPECT_EQ(vigilCommInitRootInfo(2, &info, 2, &comm), vigilInvalidArgument);
  EXPECT_TRUE(contains(vigilGetLastError(nullptr), "rank 2 of nranks 2")) << vigilGetLastError(nullptr);
  EXPECT_EQ(vigilCommInitRootInfo(2, nullptr, 0, &comm), vigilInvalidArgument);
  EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-API-001")) << vigilGetLastError(nullptr);
  vigilRootInfo zero{};
  EXPECT_EQ(vigilCommInitRootInfo(2, &zero, 0, &comm), vigilInvalidArgument);
  EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-BOOT-001")) << vigilGetLastError(nullptr);
  vigilConfig bad = testConfig();
  bad.timeoutMs = -5;
  EXPECT_EQ(vigilCommInitRootInfoConfig(1, &info, 0, &bad, &comm), vigilInvalidArgument);
  EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-API-012")) << vigilGetLastError(nullptr);
  EXPECT_TRUE(contains(vigilGetLastError(nullptr), "timeoutMs = -5")) << vigilGetLastError(nullptr);
  vigilConfig group = testConfig();
  const int groupRanks[1] = {-1};
  group.groupName = "the-group";
  group.groupRanks = groupRanks;
  EXPECT_EQ(vigilCommInitRootInfoConfig(1, &info, 0, &group, &comm), vigilInvalidArgument);
  EXPECT_TRUE(contains(vigilGetLastError(nullptr), "VG-API-012")) << vigilGetLastError(nullptr);
  EXPECT_TRUE(contains(vigilGetLastError(nullptr), "vigilConfig.groupRanks[0] = -1 is not valid"))
      << vigilGetLastError(nullptr);
  EXPECT_EQ(comm, nullptr);
}

}  // namespace
}  // namespace vigil::test
