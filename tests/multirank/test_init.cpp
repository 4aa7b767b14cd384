// Init on thread-ranks: what every rank reports when a rank is missing,
// ranks disagree (world size, version, config), a rank is claimed twice,
// the root is unreachable, or strangers connect to the root during init
// (a few, or floods of idle and garbage connections).

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>

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

// Starts `ranks` (rank -> declared nranks), each with its own config, and
// collects every init outcome. Successful communicators are destroyed.
std::vector<Outcome> initAll(const vigilRootInfo& info, const std::vector<std::pair<int, int>>& ranks,
                             const std::vector<vigilConfig>& configs) {
  std::vector<Outcome> out(ranks.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i) {
    threads.emplace_back([&, i] {
      vigilComm_t comm = nullptr;
      out[i].rc = vigilCommInitRootInfoConfig(ranks[i].second, &info, ranks[i].first, &configs[i], &comm);
      out[i].text = vigilGetLastError(nullptr);
      if (out[i].rc == vigilSuccess) vigilCommDestroy(comm);
    });
  }
  for (auto& t : threads) t.join();
  return out;
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

Fd connectToRoot(const RootInfo& root) {
  Fd fd(::socket(root.address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_EQ(::connect(fd.get(), reinterpret_cast<const sockaddr*>(&root.address.storage), root.address.length), 0)
      << errnoText(errno);
  return fd;
}

// True when the peer has closed `fd` (read end of file or reset), waiting at most `ms`.
bool closedByPeer(int fd, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, ms) != 1) return false;
  char byte;
  ssize_t n = ::recv(fd, &byte, 1, MSG_DONTWAIT);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

// Sends this process's WARN log to a file for the test's lifetime and reads it back.
class CapturedLog {
 public:
  CapturedLog() : path_(cat(::testing::TempDir(), "vigil-log-", getpid(), ".txt")) {
    std::remove(path_.c_str());
    processConfig();  // configures the logger once; ours must come after
    Logger::instance().configure(LogLevel::Warn, path_);
  }
  ~CapturedLog() {
    Logger::instance().configure(LogLevel::Warn, "");
    std::remove(path_.c_str());
  }
  std::vector<std::string> lines(const std::string& containing) const {
    std::vector<std::string> out;
    std::ifstream in(path_);
    for (std::string line; std::getline(in, line);) {
      if (line.find(containing) != std::string::npos) out.push_back(line);
    }
    return out;
  }

 private:
  std::string path_;
};

// Three ranks init on `info` and allreduce; every rank must succeed.
void initAndAllReduce(const vigilRootInfo& info, int connectTimeoutMs) {
  std::vector<int> sums(3);
  vigilConfig cfg = testConfig(60000, connectTimeoutMs);
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
}

// The counts of the summary lines ("... closed 59 more connection(s) ...").
size_t summarisedCount(const std::vector<std::string>& lines) {
  static const std::regex more(" closed ([0-9]+) more connection\\(s\\)");
  size_t total = 0;
  for (const std::string& line : lines) {
    std::smatch m;
    if (std::regex_search(line, m, more)) total += std::stoul(m[1]);
  }
  return total;
}

TEST(Init, IdleStrangersBeyondThePendingLimitDoNotLockRanksOut) {
  // Each idle connection costs this process two fds (ours and the root's).
  raiseFdLimit();
  rlimit fds{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &fds), 0);
  size_t limit = kMaxPendingConnections;
  if (fds.rlim_cur < 2 * limit + 1024) {
    limit = (fds.rlim_cur - 1024) / 2;
    setMaxPendingConnectionsForTesting(limit);
    std::cout << "open-file limit " << fds.rlim_cur << ": the root's limit is lowered to " << limit << "\n";
  }
  CapturedLog log;
  vigilRootInfo info = newRootInfo();
  RootInfo root = RootInfo::decode(info);
  // More idle strangers than the root keeps. The root accepts in arrival
  // order, so every rank below connects after the root is at its limit.
  std::vector<Fd> idle;
  for (size_t i = 0; i < limit + 64; ++i) idle.push_back(connectToRoot(root));

  initAndAllReduce(info, 30000);
  // The oldest strangers made room for the newcomers.
  EXPECT_TRUE(closedByPeer(idle.front().get(), 10000)) << "the oldest idle connection is still open";
  stopAllRootServers();
  setMaxPendingConnectionsForTesting(0);
  auto rejected = log.lines(" closed a connection from ");
  ASSERT_FALSE(rejected.empty());
  EXPECT_EQ(rejected.size(), 8u) << "only the first rejections are logged in full";
  EXPECT_TRUE(contains(rejected.front(), "VG-NET-004")) << rejected.front();
  EXPECT_TRUE(contains(rejected.front(), "it was the oldest of " + std::to_string(limit) +
                                             " connections that had not identified themselves"))
      << rejected.front();
  EXPECT_TRUE(contains(rejected.back(), "(further ones are counted, not logged one by one)")) << rejected.back();
  // 64 idle strangers beyond the limit, then the first rank (a rank that has
  // identified itself frees its place): at least 65 evictions.
  EXPECT_GE(8 + summarisedCount(log.lines(" more connection(s) ")), 65u);
}

TEST(Init, AGarbageFloodAtTheRootLogsABoundedNumberOfLines) {
  CapturedLog log;
  vigilRootInfo info = newRootInfo();
  RootInfo root = RootInfo::decode(info);
  const char junk[] = "GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: scanner\r\n\r\n";  // longer than a preamble
  constexpr size_t kFlood = 5000, kBatch = 250;
  for (size_t done = 0; done < kFlood; done += kBatch) {
    std::vector<Fd> batch;
    for (size_t i = 0; i < kBatch; ++i) {
      batch.push_back(connectToRoot(root));
      ASSERT_EQ(::send(batch.back().get(), junk, sizeof junk, MSG_NOSIGNAL), static_cast<ssize_t>(sizeof junk));
    }
    // The root has judged a connection once it closed it.
    for (Fd& fd : batch) ASSERT_TRUE(closedByPeer(fd.get(), 30000)) << "the root did not close a garbage connection";
  }
  initAndAllReduce(info, 30000);
  stopAllRootServers();  // its last summary is written when it ends
  auto full = log.lines("it did not present vigil's magic");
  auto summaries = log.lines(" more connection(s) ");
  EXPECT_EQ(full.size(), 8u);
  ASSERT_FALSE(summaries.empty());
  EXPECT_EQ(8 + summarisedCount(summaries), kFlood) << summaries.back();
  EXPECT_TRUE(contains(summaries.back(), "VG-NET-004: rendezvous root at " + root.address.toString() + " closed "))
      << summaries.back();
  EXPECT_LE(log.lines("VG-NET-004").size(), 20u) << "5000 strangers must not flood the log";
}

TEST(Init, ARankWhoseConnectionTheRootClosedUnreadConnectsAgain) {
  Listener listener = listenInRange(resolveAddress("127.0.0.1", 0), PortRange{}, "a test root");
  JobToken token = randomToken();
  Hello hello;
  hello.nranks = 1;
  hello.rank = 0;
  hello.libVersion = VIGIL_VERSION_CODE;
  hello.hostname = "here";
  hello.listenAddress = listener.address;
  hello.connectTimeoutMs = 20000;
  std::vector<PeerInfo> table;
  std::string failure;
  std::thread rank([&] {
    try {
      table = rendezvous(listener.address, token, hello, Deadline::afterMs(20000));
    } catch (const Error& e) {
      failure = e.text();
    }
  });
  auto accept = [&] {
    EXPECT_EQ(waitFd(listener.fd.get(), POLLIN, Deadline::afterMs(20000)), IoStatus::Done);
    return Fd(::accept4(listener.fd.get(), nullptr, nullptr, SOCK_CLOEXEC));
  };
  // As a fake root: the first connection is closed with its hello unread (a
  // reset), as a root at its limit does; the second one is answered.
  auto serve = [&] {
    {
      Fd first = accept();
      EXPECT_EQ(waitFd(first.get(), POLLIN, Deadline::afterMs(20000)), IoStatus::Done);
    }
    Fd second = accept();
    setNonBlocking(second.get());
    Preamble preamble;
    ASSERT_EQ(recvAll(second.get(), &preamble, sizeof preamble, Deadline::afterMs(20000)), IoStatus::Done);
    EXPECT_EQ(preamble.token, token);
    ReceivedMessage msg = recvMessage(second.get(), kMaxHelloBytes, Deadline::afterMs(20000));
    ASSERT_EQ(msg.status, IoStatus::Done);
    EXPECT_EQ(Hello::decode(msg.payload).hostname, "here");
    RendezvousReply reply;
    reply.ok = true;
    reply.peers.push_back({"here", "id", 1, listener.address});
    ASSERT_EQ(sendMessage(second.get(), reply.encode(), Deadline::afterMs(20000)), IoStatus::Done);
  };
  serve();
  rank.join();
  EXPECT_EQ(failure, "");
  ASSERT_EQ(table.size(), 1u);
  EXPECT_EQ(table[0].hostname, "here");
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
  EXPECT_EQ(comm, nullptr);
}

}  // namespace
}  // namespace vigil::test
