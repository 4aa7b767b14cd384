// Symmetric memory with real processes: a ring of put-signals between rank
// processes that share the host's heap segment. A rank killed with kill -9
// or frozen with SIGSTOP while the others wait on its signal: the waiters
// end with its error (or a timeout naming it), and no segment is left in
// /dev/shm.
#include <gtest/gtest.h>
#include <signal.h>

#include <iostream>
#include <string>
#include <vector>

#include "fault/rank_job.hpp"

namespace vigil::fault {
namespace {

[[maybe_unused]] const bool kProcessSetup = [] {
  ::setenv("VIGIL_SOCKET_IFNAME", "lo", /*overwrite=*/0);
  ::signal(SIGPIPE, SIG_IGN);
  return true;
}();

// The heap segments of a job: named after the process of its host's lowest rank.
std::vector<std::string> heapSegmentsOf(const RankJob& job) {
  const std::string prefix = "vigil-symm-" + std::to_string(job.pid(0)) + "-";
  std::vector<std::string> out;
  if (DIR* d = ::opendir("/dev/shm")) {
    while (dirent* e = ::readdir(d)) {
      if (std::string(e->d_name).starts_with(prefix)) out.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  return out;
}

const Env kEnv = {{"VIGIL_TIMEOUT_MS", "60000"}, {"VIGIL_CONNECT_TIMEOUT_MS", "60000"}, {"VIGIL_SYMMETRIC_HEAP", "64M"}};

// Real processes, 1 to 8: a ring of put-signals, then get and the symmetric
// allreduce, each checked against the data or vigilAllReduce.
class SymmetricProcessCounts : public ::testing::TestWithParam<int> {};

TEST_P(SymmetricProcessCounts, RingGetAndAllReduceAreExact) {
  const int n = GetParam();
  RankJob job(n, {"symm", "--iters", "50", "--count", "100000"}, kEnv);
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(job.exitCode(r), 0) << "rank " << r;
    EXPECT_EQ(job.lines(r).back(), "DONE");
  }
  EXPECT_EQ(heapSegmentsOf(job), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(Processes, SymmetricProcessCounts, ::testing::Values(1, 2, 3, 5, 8));

// kill -9 of rank 1 while rank 2 waits for its signal: rank 2's wait ends with
// rank 1's death (VG-PEER-001) within 2 s; rank 0, waiting on rank 2, hears
// that rank 2 left because of it.
TEST(SymmetricProcesses, KillDuringAWaitEndsItWithThePeersDeath) {
  constexpr int kRanks = 3, kVictim = 1, kIter = 5;
  RankJob job(kRanks,
              {"symm", "--iters", "100", "--count", "4096", "--leave-rank", std::to_string(kVictim), "--leave-iter",
               std::to_string(kIter), "--how", "kill"},
              kEnv);
  ASSERT_TRUE(job.waitLine(kVictim, "LEAVING iter=5 how=kill")) << job.dump();
  const long long killNs = monoNs();  // the victim raises SIGKILL right after this line
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());
  EXPECT_EQ(job.termSignal(kVictim), SIGKILL);
  FailLine f = expectFailed(job, 2);
  EXPECT_EQ(f.iter, kIter);
  EXPECT_EQ(f.rc, vigilRemoteError);
  EXPECT_TRUE(contains(f.text, "VG-PEER-001")) << f.text;
  EXPECT_TRUE(contains(f.text, "vigilSignalWaitUntil")) << f.text;
  EXPECT_TRUE(contains(f.text, "rank 1 (host ")) << f.text;
  EXPECT_TRUE(contains(f.text, kDiedText)) << f.text;
  EXPECT_LT(f.monoNs - killNs, 2000000000LL);
  std::cout << "kill -9 of rank 1 during rank 2's signal wait -> reported after "
            << static_cast<double>(f.monoNs - killNs) / 1e6 << " ms: " << f.text << "\n";
  FailLine g = expectFailed(job, 0);
  EXPECT_EQ(g.rc, vigilRemoteError);
  EXPECT_TRUE(contains(g.text, "rank 1")) << g.text;  // rank 2 left because of rank 1; or rank 1 itself
  EXPECT_EQ(heapSegmentsOf(job), std::vector<std::string>{});
}

// A frozen rank: the waits time out and name it and what it was doing.
TEST(SymmetricProcesses, StoppedRankIsNamedByTheTimeout) {
  constexpr int kRanks = 3, kStopped = 0, kIter = 3;
  Env env = kEnv;
  env[0].second = "1500";  // VIGIL_TIMEOUT_MS
  RankJob job(kRanks,
              {"symm", "--iters", "10", "--count", "64", "--leave-rank", std::to_string(kStopped), "--leave-iter",
               std::to_string(kIter), "--how", "stop"},
              env);
  ASSERT_TRUE(job.waitLine(1, [](const std::string& l) { return isFail(l); })) << job.dump();
  job.killRank(kStopped);
  ASSERT_TRUE(job.waitExit()) << job.dump();
  SCOPED_TRACE(job.dump());
  FailLine f = expectFailed(job, 1);
  EXPECT_EQ(f.iter, kIter);
  EXPECT_EQ(f.rc, vigilTimeout);
  EXPECT_TRUE(contains(f.text, "VG-SYM-005")) << f.text;
  EXPECT_TRUE(contains(f.text, "the rank expected to signal is 0")) << f.text;
  EXPECT_TRUE(contains(f.text, "rank 0 (pid " + std::to_string(job.pid(0)))) << f.text;
  EXPECT_TRUE(contains(f.text, "is in no one-sided call; its last one (number ")) << f.text;
  std::cout << "SIGSTOP'd rank 0 -> rank 1: " << f.text << "\n";
}

}  // namespace
}  // namespace vigil::fault
