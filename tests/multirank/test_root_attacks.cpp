// Init on thread-ranks against a hostile network at the rendezvous root:
// floods of idle and garbage connections, a root that closes a rank's
// connection, and forged hellos at a root without a secret token (claims of
// a held or not yet arrived rank, another wire version).

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

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
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

// Rank `r` of `n` in a thread: init on `info`, allreduce r+1 into *sum.
std::thread rankThread(const vigilRootInfo& info, int r, int n, int connectTimeoutMs, int* sum) {
  return std::thread([&info, r, n, connectTimeoutMs, sum] {
    vigilConfig cfg = testConfig(60000, connectTimeoutMs);
    vigilComm_t comm = nullptr;
    ASSERT_EQ(vigilCommInitRootInfoConfig(n, &info, r, &cfg, &comm), vigilSuccess) << vigilGetLastError(nullptr);
    int v = r + 1;
    EXPECT_EQ(vigilAllReduce(&v, sum, 1, vigilInt32, vigilSum, comm, nullptr), vigilSuccess);
    vigilCommDestroy(comm);
  });
}

// `n` ranks init on `info` and allreduce; every rank must succeed.
void initAndAllReduce(const vigilRootInfo& info, int connectTimeoutMs, int n = 3) {
  std::vector<int> sums(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.push_back(rankThread(info, r, n, connectTimeoutMs, &sums[static_cast<size_t>(r)]));
  for (auto& t : threads) t.join();
  EXPECT_EQ(sums, std::vector<int>(static_cast<size_t>(n), n * (n + 1) / 2));
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

// An address-based launch without VIGIL_JOB_TOKEN, as torchrun sets it up:
// the job token is derived from MASTER_ADDR:MASTER_PORT/WORLD_SIZE, which
// anyone who knows them can compute. This process plays rank 0's, which
// hosts the root.
vigilRootInfo hostOpenRoot(int nranks) {
  Listener probe = listenInRange(resolveAddress("127.0.0.1", 0), PortRange{}, "a port probe");
  const std::string port = std::to_string(probe.address.port());
  probe.fd.reset();  // free again for the root, which binds it at once
  std::map<std::string, std::string> vars{
      {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", port}, {"RANK", "0"}, {"WORLD_SIZE", std::to_string(nranks)}};
  LaunchEnv env = resolveLaunchEnv([&](const char* var) -> const char* {
    auto it = vars.find(var);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
  EXPECT_FALSE(env.secretToken);
  hostRootAt(env, processConfig());
  vigilRootInfo info{};
  env.root.encode(&info);  // what every rank derives from the same variables
  return info;
}

// Someone on the network who computed the derived token sends one hello
// claiming `rank`, and reads what the root answers; it never confirms.
struct Forger {
  Fd fd;
  Forger(const RootInfo& root, int rank, int nranks, uint16_t wireVersion = kWireVersion) : fd(connectToRoot(root)) {
    setNonBlocking(fd.get());
    Preamble preamble;
    preamble.kind = static_cast<uint16_t>(ConnKind::Rendezvous);
    preamble.wireVersion = wireVersion;
    preamble.token = root.token;
    preamble.rank = rank;
    preamble.libVersion = VIGIL_VERSION_CODE;
    Hello hello;
    hello.nranks = nranks;
    hello.rank = rank;
    hello.libVersion = VIGIL_VERSION_CODE;
    hello.pid = 4242;
    hello.hostname = "forger";
    hello.hostId = "forged";
    hello.listenAddress = resolveAddress("127.0.0.1", 9);
    hello.connectTimeoutMs = 30000;
    hello.timeoutMs = 60000;
    EXPECT_EQ(sendAll(fd.get(), &preamble, sizeof preamble, Deadline::afterMs(10000)), IoStatus::Done);
    EXPECT_EQ(sendMessage(fd.get(), hello.encode(), Deadline::afterMs(10000)), IoStatus::Done);
  }
  ReceivedMessage next() { return recvMessage(fd.get(), 1 << 20, Deadline::afterMs(30000)); }
};

TEST(Init, OpenRootRefusesAForgedClaimOfARankAlreadyHeldAndTheJobRuns) {
  CapturedLog log;
  vigilRootInfo info = hostOpenRoot(3);
  RootInfo root = RootInfo::decode(info);
  std::vector<int> sums(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) ranks.push_back(rankThread(info, r, 3, 30000, &sums[static_cast<size_t>(r)]));
  // Rank 2 is not started yet, so ranks 0 and 1 wait at the root. Until the
  // real rank 0 is held, a forged claim of it is asked for a confirmation
  // (which a forger does not give); once it is held, the claim is refused.
  std::string refusal;
  for (Deadline until = Deadline::afterMs(30000); refusal.empty() && !until.expired();) {
    Forger forger(root, 0, 3);
    ReceivedMessage msg = forger.next();
    ASSERT_EQ(msg.status, IoStatus::Done);
    if (!RendezvousReply::isConfirmRequest(msg.payload)) refusal = RendezvousReply::decode(msg.payload).errorText;
  }
  ranks.push_back(rankThread(info, 2, 3, 30000, &sums[2]));
  for (auto& t : ranks) t.join();
  EXPECT_EQ(sums, std::vector<int>({6, 6, 6}));
  EXPECT_TRUE(
      contains(refusal, "VG-BOOT-007: init: rank 0 was claimed by rank 0 (host forger, pid 4242) from 127.0.0.1:"))
      << refusal;
  EXPECT_TRUE(contains(refusal, " but rank 0 (host " + localHostName() + ", pid ")) << refusal;
  EXPECT_TRUE(contains(refusal, ") holds it already")) << refusal;
  stopAllRootServers();
  auto logged =
      log.lines("VG-BOOT-012: rendezvous root at " + root.address.toString() + " refused a claim from 127.0.0.1:");
  ASSERT_FALSE(logged.empty());
  EXPECT_TRUE(contains(logged.back(), "(VG-BOOT-007: ")) << logged.back();
  EXPECT_TRUE(contains(logged.back(), "; the rendezvous goes on")) << logged.back();
}

TEST(Init, OpenRootRefusesAHelloOfAnotherWireVersionAndTheJobRuns) {
  CapturedLog log;
  vigilRootInfo info = hostOpenRoot(2);
  RootInfo root = RootInfo::decode(info);
  Forger forger(root, 1, 2, static_cast<uint16_t>(kWireVersion + 1));
  ReceivedMessage msg = forger.next();
  ASSERT_EQ(msg.status, IoStatus::Done);
  RendezvousReply reply = RendezvousReply::decode(msg.payload);
  EXPECT_FALSE(reply.ok);
  EXPECT_TRUE(contains(reply.errorText, cat("VG-BOOT-005: init: rank 1 (127.0.0.1:"))) << reply.errorText;
  EXPECT_TRUE(contains(reply.errorText, cat(" with wire version ", kWireVersion + 1, ", but the rendezvous root runs")))
      << reply.errorText;
  initAndAllReduce(info, 30000, 2);
  stopAllRootServers();
  auto logged =
      log.lines("VG-BOOT-012: rendezvous root at " + root.address.toString() + " refused a claim from 127.0.0.1:");
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_TRUE(contains(logged[0], "(VG-BOOT-005: ")) << logged[0];
}

TEST(Init, OpenRootLetsTheRealRankWinOverAForgedClaimThatCameFirst) {
  CapturedLog log;
  vigilRootInfo info = hostOpenRoot(2);
  RootInfo root = RootInfo::decode(info);
  // Before any real rank: the forged claim of rank 1 is asked to confirm.
  Forger forger(root, 1, 2);
  ReceivedMessage msg = forger.next();
  ASSERT_EQ(msg.status, IoStatus::Done);
  EXPECT_TRUE(RendezvousReply::isConfirmRequest(msg.payload));
  // The real ranks confirm their claims; the forger never does.
  initAndAllReduce(info, 30000, 2);
  // It never gets the table: the root closes it when the rendezvous ends.
  EXPECT_EQ(forger.next().status, IoStatus::Closed);
  stopAllRootServers();
  auto logged = log.lines(" closed a connection from ");
  ASSERT_EQ(logged.size(), 1u);
  EXPECT_TRUE(contains(logged[0], "VG-NET-004: rendezvous root at " + root.address.toString())) << logged[0];
  EXPECT_TRUE(contains(logged[0],
                       "it claimed rank 1 (host forger, pid 4242) but never confirmed the claim; "
                       "the rendezvous completed without it"))
      << logged[0];
}

TEST(Init, OpenRootNamesRefusedAndUnconfirmedClaimsWhenARankIsMissing) {
  vigilRootInfo info = hostOpenRoot(3);
  RootInfo root = RootInfo::decode(info);
  Forger silent(root, 1, 3);  // claims rank 1 and never confirms
  ASSERT_TRUE(RendezvousReply::isConfirmRequest(silent.next().payload));
  Forger skewed(root, 2, 3, static_cast<uint16_t>(kWireVersion + 1));  // refused: another wire version
  ASSERT_EQ(skewed.next().status, IoStatus::Done);
  auto out = initAll(info, {{0, 3}}, {testConfig(60000, 1500)});
  EXPECT_EQ(out[0].rc, vigilTimeout) << out[0].text;
  EXPECT_TRUE(contains(out[0].text, "VG-BOOT-003")) << out[0].text;
  EXPECT_TRUE(contains(out[0].text, "; missing: 1, 2; the root refused 1 claim(s): a claim from 127.0.0.1:"))
      << out[0].text;
  EXPECT_TRUE(contains(out[0].text, cat("with wire version ", kWireVersion + 1))) << out[0].text;
  EXPECT_TRUE(contains(out[0].text, "; claims not (yet) confirmed: rank 1 (host forger, pid 4242) from 127.0.0.1:"))
      << out[0].text;
}

}  // namespace
}  // namespace vigil::test
