// Fault scenarios with real processes as ranks (S6, S7, S10 of
// shared/scenarios.md, plus kill -9 from outside): every rank is a
// vigil-test-rank process (tests/fault/rank_program.cpp) linked against
// libvigil.so; this test process hosts the rendezvous root
// (vigilGetRootInfo) and spawns the ranks itself, so that survivors can
// report after one of them dies (vigil-run would stop them all).
//
// Synchronisation is by the ranks' output lines and exits, waited for with
// poll() and deadlines; never by sleeping. Every spawned process is killed
// (SIGKILL) and reaped when its RankJob goes out of scope, also when an
// assertion fails half-way.

#include <gtest/gtest.h>

#include "fault/rank_job.hpp"

namespace {

using namespace vigil::fault;

// Ranks talk over loopback (ctest sets this too; a direct run may not). A
// write to the stdin of a rank that is gone must fail, not kill the test.
[[maybe_unused]] const bool kProcessSetup = [] {
  ::setenv("VIGIL_SOCKET_IFNAME", "lo", /*overwrite=*/0);
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

// ---- S7: a rank leaves the loop early; the survivors get a prompt error ----

class ProcessEarlyExit : public ::testing::TestWithParam<std::string> {};

TEST_P(ProcessEarlyExit, SurvivorsFailPromptlyNamingTheRankThatLeft) {
  const std::string how = GetParam();
  constexpr int kRanks = 4, kLeaver = 2, kLeaveIter = 5;
  // destroy and exit say goodbye with their last completed seq, so a survivor
  // still finishing seq 5 completes it whatever the timing. abort and kill are
  // "stop now" signals: the leaver is held at a gate until every survivor has
  // finished iter 4 (printed "iter 5"), so the failure lands on iter 5 alone.
  const bool gated = how == "abort" || how == "kill";
  std::vector<std::string> args{"loop",
                                "--iters",
                                "8",
                                "--count",
                                "1024",
                                "--leave-rank",
                                std::to_string(kLeaver),
                                "--leave-iter",
                                std::to_string(kLeaveIter),
                                "--how",
                                how};
  if (gated) args.push_back("--leave-gate");
  RankJob job(kRanks, args, {{"VIGIL_TIMEOUT_MS", "60000"}, {"VIGIL_CONNECT_TIMEOUT_MS", "60000"}});
  if (gated) {
    for (int r = 0; r < kRanks; ++r) {
      ASSERT_TRUE(job.waitLine(r, r == kLeaver ? "GATE" : "iter 5")) << job.dump();
    }
    ASSERT_TRUE(job.writeStdin(kLeaver, "go\n"));
  }
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());

  // The leaver: iter 0..5, LEAVING (and GATE), then gone the way it was told.
  std::vector<std::string> leaverLines = iterLines(0, kLeaveIter + 1);
  leaverLines.push_back("LEAVING iter=5 how=" + how);
  if (gated) leaverLines.push_back("GATE");
  EXPECT_EQ(job.lines(kLeaver), leaverLines);
  if (how == "kill") {
    EXPECT_EQ(job.termSignal(kLeaver), SIGKILL);
  } else {
    EXPECT_EQ(job.exitCode(kLeaver), 0);
  }

  // What a survivor must say about rank 2 itself (seq 6, after it completed seq 5).
  const RootCheck rootCheck = [&how](const PeerError& e) {
    const std::string stillNeeded = "after completing collective seq 5; this rank still needs it. Remedy: ";
    if (how == "destroy")
      return expectPeerError(e, "VG-PEER-002", "left the communicator (vigilCommDestroy) " + stillNeeded);
    if (how == "exit") {
      // The exit handler says goodbye for the process; had it died first, the EOF would say so.
      if (e.id == "VG-PEER-001") return expectPeerError(e, "VG-PEER-001", kDiedText);
      return expectPeerError(e, "VG-PEER-002",
                             "left the communicator (process exit without vigilCommDestroy) " + stillNeeded);
    }
    if (how == "abort") {
      return expectPeerError(e, "VG-PEER-003",
                             "stopped the communicator and reported: VG-PEER-003: rank 2/4 (comm '" + e.comm +
                                 "'): rank 2 aborted the communicator (vigilCommAbort). Remedy: ");
    }
    return expectPeerError(e, "VG-PEER-001", kDiedText);  // kill
  };
  for (int r = 0; r < kRanks; ++r) {
    if (r == kLeaver) continue;
    SCOPED_TRACE("survivor rank " + std::to_string(r));
    FailLine f = expectFailed(job, r);
    EXPECT_EQ(f.iter, kLeaveIter);
    EXPECT_EQ(f.rc, vigilRemoteError);
    EXPECT_LT(f.callMs, 2000.0);
    EXPECT_GE(f.callMs, 0.0);
    std::vector<int> chain;
    EXPECT_TRUE(checkPeerReport(f.text, r, kLeaveIter + 1, kLeaver, job, rootCheck, chain)) << f.text;
    std::cout << "[ how=" << how << " ] rank " << r << ": allreduce failed after " << f.callMs << " ms"
              << describeChain(chain) << ": " << f.text << "\n";
  }
}

INSTANTIATE_TEST_SUITE_P(Hows, ProcessEarlyExit, ::testing::Values("destroy", "exit", "abort", "kill"),
                         [](const auto& info) { return info.param; });

// ---- kill -9 from outside while a 16 MiB allreduce runs ----

std::set<std::string> listDir(const char* path) {
  std::set<std::string> out;
  if (DIR* d = ::opendir(path)) {
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") out.insert(name);
    }
    ::closedir(d);
  }
  return out;
}

// The shared-memory segments of a job: their names end with rank 0's pid.
std::vector<std::string> segmentsOf(const RankJob& job) {
  const std::string suffix = "-" + std::to_string(job.pid(0));
  std::vector<std::string> out;
  for (const std::string& name : listDir("/dev/shm")) {
    if (name.starts_with("vigil-") && name.ends_with(suffix)) out.push_back(name);
  }
  return out;
}

// A test parameter's environment: VIGIL_TRANSPORT, and for "ucx_sm" UCX's
// shared-memory transports only (UCX_TLS=sm).
Env withTransport(const std::string& param, Env env) {
  env.push_back({"VIGIL_TRANSPORT", param == "ucx_sm" ? "ucx" : param});
  if (param == "ucx_sm") env.push_back({"UCX_TLS", "sm"});
  return env;
}

// Test parameters: `base`, then the ucx transport on its own and over
// shared memory only, where built.
std::vector<std::string> withUcx(std::vector<std::string> base) {
#if VIGIL_TEST_UCX
  base.insert(base.end(), {"ucx", "ucx_sm"});
#endif
  return base;
}

class ProcessKillDuringAllReduce : public ::testing::TestWithParam<std::string> {};

TEST_P(ProcessKillDuringAllReduce, SurvivorsReportTheKilledRankWithinTwoSecondsAndNoSegmentSurvives) {
  constexpr int kRanks = 3, kVictim = 1;
  RankJob job(kRanks, {"loop", "--iters", "1000", "--count", "4194304"},
              withTransport(GetParam(), {{"VIGIL_TIMEOUT_MS", "60000"}, {"VIGIL_CONNECT_TIMEOUT_MS", "60000"}}));
  ASSERT_TRUE(job.waitLine(kVictim, "iter 2")) << job.dump();
  const long long killNs = monoNs();
  job.killRank(kVictim);
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());

  EXPECT_EQ(job.termSignal(kVictim), SIGKILL);
  const RootCheck rootCheck = [](const PeerError& e) { return expectPeerError(e, "VG-PEER-001", kDiedText); };
  for (int r : {0, 2}) {
    SCOPED_TRACE("survivor rank " + std::to_string(r));
    FailLine f = expectFailed(job, r);
    const double latencyMs = static_cast<double>(f.monoNs - killNs) / 1e6;
    std::vector<int> chain;
    EXPECT_TRUE(checkPeerReport(f.text, r, f.iter + 1, kVictim, job, rootCheck, chain)) << f.text;
    std::cout << "kill -9 of rank 1 -> rank " << r << " reported at iter " << f.iter << " after " << latencyMs
              << " ms (its allreduce call: " << f.callMs << " ms)" << describeChain(chain) << ": " << f.text << "\n";
    EXPECT_GT(f.monoNs, killNs);
    EXPECT_LT(f.monoNs - killNs, 2000000000LL);
    // Rank 1 had finished iter 1 when it printed "iter 2"; it cannot have finished iter 3.
    EXPECT_GE(f.iter, 1);
    EXPECT_LE(f.iter, 3);
    EXPECT_EQ(f.rc, vigilRemoteError);
  }
  // The segment's name was unlinked at init: a kill -9 cannot leave it behind.
  EXPECT_EQ(segmentsOf(job), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Transports, ProcessKillDuringAllReduce, ::testing::ValuesIn(withUcx({"shm", "tcp"})),
                         [](const auto& info) { return info.param; });

// ---- A rank that is alive but frozen (SIGSTOP): the timeout report names it ----

class ProcessStoppedRank : public ::testing::TestWithParam<std::string> {};

TEST_P(ProcessStoppedRank, TheTimeoutReportNamesTheStoppedRankAsUnresponsive) {
  constexpr int kRanks = 3, kStopped = 2, kStopIter = 3;
  RankJob job(kRanks,
              {"loop", "--iters", "8", "--count", "1024", "--leave-rank", std::to_string(kStopped), "--leave-iter",
               std::to_string(kStopIter), "--how", "stop"},
              withTransport(GetParam(), {{"VIGIL_TIMEOUT_MS", "1500"}, {"VIGIL_CONNECT_TIMEOUT_MS", "60000"}}));
  for (int r : {0, 1}) {
    ASSERT_TRUE(job.waitLine(r, [](const std::string& l) { return isFail(l); })) << job.dump();
  }
  job.killRank(kStopped);  // a stopped process still dies to SIGKILL
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());
  EXPECT_EQ(job.termSignal(kStopped), SIGKILL);
  for (int r : {0, 1}) {
    FailLine f = expectFailed(job, r);
    EXPECT_EQ(f.iter, kStopIter);
    // Either this rank timed out itself, or it quotes the rank that did.
    EXPECT_TRUE(f.rc == vigilTimeout || f.rc == vigilRemoteError) << f.text;
    EXPECT_TRUE(contains(f.text, "VG-OP-001")) << f.text;
    EXPECT_TRUE(contains(f.text, "Rank 2 is unresponsive: no answer within 1 s")) << f.text;
    EXPECT_TRUE(contains(f.text, "allreduce seq 4")) << f.text;
    std::cout << "SIGSTOP'd rank 2 -> rank " << r << ": " << f.text << "\n";
  }
}

// Over every transport: a rank stopped right after an op must not fail that
// op on its neighbours (they confirm it from the fingerprint it pushed).
INSTANTIATE_TEST_SUITE_P(Transports, ProcessStoppedRank, ::testing::ValuesIn(withUcx({"auto", "tcp"})),
                         [](const auto& info) { return info.param; });

// ---- S6: returning from main without vigilCommDestroy is a clean exit ----

TEST(ProcessExitWithoutDestroy, EveryRankExitsCleanlyAndLeavesNoShm) {
  RankJob job(4, {"loop", "--iters", "3", "--count", "1000", "--no-destroy"},
              {{"VIGIL_LOG", "warn"}, {"VIGIL_TIMEOUT_MS", "60000"}, {"VIGIL_CONNECT_TIMEOUT_MS", "60000"}});
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());
  for (int r = 0; r < 4; ++r) {
    expectDone(job, r, 3);
    EXPECT_EQ(job.stderrText(r), "") << "rank " << r;
  }
  EXPECT_EQ(segmentsOf(job), std::vector<std::string>{});
}

// ---- S10: VIGIL_PORT_RANGE ----

// True when nothing listens on or holds 127.0.0.1:port (nor the wildcard address).
bool portFree(int port) {
  for (in_addr_t host : {htonl(INADDR_LOOPBACK), htonl(INADDR_ANY)}) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = host;
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    if (!ok) return false;
  }
  return true;
}

// The first of `count` consecutive free ports. Searched below the kernel's
// ephemeral range (outgoing connections take ports from there), starting at
// a pid-dependent point so that concurrent test processes rarely meet.
int findFreePorts(int count) {
  int ephLo = 32768, ephHi = 60999;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephLo >> ephHi;
  int lo = 20000, hi = ephLo - 1;  // usually 20000..32767
  if (hi - lo < 1000) lo = ephHi + 1, hi = 65535;
  const int span = hi - lo + 1 - count;
  const int start = lo + static_cast<int>(::getpid() * 16 % span);
  for (int i = 0; i < span; ++i) {
    const int p = lo + (start - lo + i) % span;
    bool ok = true;
    for (int q = p; ok && q < p + count; ++q) ok = portFree(q);
    if (ok) return p;
  }
  return -1;
}

std::string rangeText(int lo, int hi) {
  return std::to_string(lo) + "-" + std::to_string(hi);
}

TEST(ProcessPortRange, TwoConcurrentJobsShareAnEightPortRange) {
  const int p = findFreePorts(8);
  ASSERT_GT(p, 0) << "no 8 consecutive free ports";
  const std::string range = rangeText(p, p + 7);
  std::cout << "VIGIL_PORT_RANGE=" << range << "\n";
  const Env env{{"VIGIL_PORT_RANGE", range}, {"VIGIL_TIMEOUT_MS", "60000"}, {"VIGIL_CONNECT_TIMEOUT_MS", "60000"}};
  RankJob a(2, {"loop", "--iters", "3", "--count", "100"}, env);
  RankJob b(2, {"loop", "--iters", "3", "--count", "100"}, env);
  ASSERT_TRUE(a.waitExit()) << a.dump();
  ASSERT_TRUE(b.waitExit()) << b.dump();
  for (const RankJob* job : {&a, &b}) {
    SCOPED_TRACE(job->dump());
    for (int r = 0; r < 2; ++r) expectDone(*job, r, 3);
  }
}

TEST(ProcessPortRange, ExhaustedRangeFailsInitNamingTheRangeAndPortsTried) {
  const int p = findFreePorts(3);
  ASSERT_GT(p, 0) << "no 3 consecutive free ports";
  std::vector<int> held;
  struct CloseAll {
    std::vector<int>& fds;
    ~CloseAll() {
      for (int fd : fds) ::close(fd);
    }
  } closeHeld{held};
  for (int port = p; port < p + 3; ++port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(fd, 0) << std::strerror(errno);
    held.push_back(fd);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0)
        << "port " << port << ": " << std::strerror(errno);
    ASSERT_EQ(::listen(fd, 4), 0) << std::strerror(errno);
  }
  const std::string range = rangeText(p, p + 2);
  RankJob job(1, {"init-only"},
              {{"VIGIL_PORT_RANGE", range}, {"VIGIL_TIMEOUT_MS", "60000"}, {"VIGIL_CONNECT_TIMEOUT_MS", "60000"}});
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());
  EXPECT_EQ(job.exitCode(0), 5);
  ASSERT_EQ(job.lines(0).size(), 1u);
  const std::string& line = job.lines(0)[0];
  std::cout << line << "\n";
  const std::string prefix = "INITFAIL rc=" + std::to_string(vigilSystemError) + " text=VG-NET-001: ";
  EXPECT_TRUE(startsWith(line, prefix)) << line;
  EXPECT_TRUE(contains(line, "VIGIL_PORT_RANGE=" + range)) << line;
  EXPECT_TRUE(contains(line, "tried ports " + range)) << line;
  EXPECT_TRUE(contains(line, "Address already in use")) << line;
}

// ---- The happy path over real processes ----

TEST(ProcessRanks, TwentyAllReducesOfOneHundredThousandFloatsAreExact) {
  RankJob job(4, {"loop", "--iters", "20", "--count", "100000"},
              {{"VIGIL_TIMEOUT_MS", "60000"}, {"VIGIL_CONNECT_TIMEOUT_MS", "60000"}});
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());
  for (int r = 0; r < 4; ++r) {
    expectDone(job, r, 20);
    for (const std::string& l : job.lines(r)) EXPECT_FALSE(startsWith(l, "WRONG")) << l;
  }
}

}  // namespace
