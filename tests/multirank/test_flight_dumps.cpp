// The flight recorder end to end: a hang (rank 1 never enters seq 3) times
// out on rank 0, which writes its dump to VIGIL_DUMP_DIR by itself; rank 1's
// is written on demand; vigil-doctor merges them and names the rank behind.
// SIGUSR1 makes the process write every live communicator's recorder.

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <latch>
#include <set>
#include <sstream>

#include "comm/dump_on_signal.hpp"
#include "common/thread_ranks.hpp"

namespace vigil::test {
namespace {

// VIGIL_DUMP_DIR is read once per process: set it before anything runs.
const std::string kDumpDir = [] {
  char dir[] = "/tmp/vigil-dumps-XXXXXX";
  std::string path = mkdtemp(dir);
  setenv("VIGIL_DUMP_DIR", path.c_str(), 1);
  return path;
}();

std::string runCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  std::array<char, 4096> buf{};
  while (fgets(buf.data(), buf.size(), pipe) != nullptr) out += buf.data();
  pclose(pipe);
  return out;
}

TEST(FlightDumps, AHangIsDumpedAndExplainedByTheDoctor) {
  std::promise<void> timedOut;
  std::shared_future<void> done = timedOut.get_future().share();
  vigilConfig cfg = testConfig(500);
  cfg.commName = "hang";
  runRanks(
      2,
      [&](int rank, vigilComm_t comm) {
        int x = rank;
        for (int i = 0; i < 2; ++i) {
          EXPECT_EQ(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr), vigilSuccess);
        }
        if (rank == 1) {
          done.wait();  // rank 1 "is busy elsewhere" and never enters seq 3
          EXPECT_EQ(vigilCommDumpFlightRecorder(comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
          return;
        }
        EXPECT_EQ(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr), vigilTimeout);
        timedOut.set_value();
      },
      cfg);
  const std::string dump0 = kDumpDir + "/vigil-hang-rank0.json";
  const std::string dump1 = kDumpDir + "/vigil-hang-rank1.json";
  ASSERT_TRUE(std::filesystem::exists(dump0)) << "the timeout must write rank 0's dump by itself";
  ASSERT_TRUE(std::filesystem::exists(dump1));
  std::stringstream json;
  json << std::ifstream(dump0).rdbuf();
  EXPECT_NE(json.str().find("\"reason\":\"timeout\""), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("\"state\":\"failed\""), std::string::npos) << json.str();
  EXPECT_NE(json.str().find("VG-OP-001"), std::string::npos) << json.str();

  const std::string report = runCommand(std::string(VIGIL_DOCTOR) + " dumps " + dump0 + " " + dump1 + " 2>&1");
  std::cout << report;
  EXPECT_NE(report.find("verdict: "), std::string::npos) << report;
  const std::string verdict = report.substr(report.find("verdict: "));
  EXPECT_NE(verdict.find("rank 1"), std::string::npos) << verdict;
  EXPECT_NE(verdict.find("seq 3"), std::string::npos) << verdict;

  const std::string trace = kDumpDir + "/trace.json";
  runCommand(std::string(VIGIL_DOCTOR) + " trace " + dump0 + " " + dump1 + " -o " + trace);
  std::stringstream traceText;
  traceText << std::ifstream(trace).rdbuf();
  EXPECT_NE(traceText.str().find("\"traceEvents\""), std::string::npos);
  EXPECT_NE(traceText.str().find("allreduce seq 3"), std::string::npos);
  std::filesystem::remove_all(kDumpDir);
}

TEST(FlightDumps, AnUnwritableDumpPathIsReported) {
  runRanks(1, [](int, vigilComm_t comm) {
    EXPECT_EQ(vigilCommDumpFlightRecorder(comm, "/nonexistent-dir/dump.json"), vigilSystemError);
    std::string text = vigilGetLastError(comm);
    EXPECT_NE(text.find("VG-COMM-005"), std::string::npos) << text;
    EXPECT_NE(text.find("/nonexistent-dir/dump.json"), std::string::npos) << text;
  });
}

TEST(FlightDumps, SigusrOneWritesTheRecorderOfEveryLiveCommunicator) {
  // The notice pipe vigil-run passes its ranks; read once, at the first init.
  int notices[2];
  ASSERT_EQ(pipe2(notices, O_CLOEXEC), 0);
  setenv("VIGIL_DUMP_NOTIFY_FD", std::to_string(notices[1]).c_str(), 1);
  auto nextNotice = [&] {
    DumpNotice notice{-2, 0, -2};
    pollfd p{notices[0], POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 30000), 1) << "no dump notice within 30 s";
    EXPECT_EQ(read(notices[0], &notice, sizeof notice), static_cast<ssize_t>(sizeof notice));
    return notice;
  };
  std::latch initialised(3), dumped(3);
  runRanks(3, [&](int rank, vigilComm_t comm) {
    int x = rank;
    EXPECT_EQ(vigilAllReduce(&x, &x, 1, vigilInt32, vigilSum, comm, nullptr), vigilSuccess);
    initialised.arrive_and_wait();
    if (rank == 0) {
      DumpNotice installed = nextNotice();
      EXPECT_EQ(installed.dumpsWritten, DumpNotice::kHandlerInstalled);
      EXPECT_EQ(installed.pid, getpid());
      EXPECT_EQ(installed.launcherRank, -1);  // no VIGIL_RANK: not under a launcher
      ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
      DumpNotice round = nextNotice();
      EXPECT_EQ(round.dumpsWritten, 3) << "one dump per live communicator";
      EXPECT_EQ(round.pid, getpid());
    }
    dumped.arrive_and_wait();  // nobody destroys its communicator before the dumps are written
  });
  close(notices[0]);
  close(notices[1]);
  std::set<int> ranks;
  for (const auto& entry : std::filesystem::directory_iterator(kDumpDir)) {
    std::ifstream in(entry.path());
    std::stringstream json;
    json << in.rdbuf();
    EXPECT_NE(json.str().find("\"reason\":\"signal\""), std::string::npos) << entry.path();
    EXPECT_NE(json.str().find("\"last_completed_seq\":"), std::string::npos) << entry.path();
    for (int r = 0; r < 3; ++r) {
      if (entry.path().filename().string().ends_with("-rank" + std::to_string(r) + ".json")) ranks.insert(r);
    }
  }
  EXPECT_EQ(ranks, (std::set<int>{0, 1, 2}));
}

}  // namespace
}  // namespace vigil::test
