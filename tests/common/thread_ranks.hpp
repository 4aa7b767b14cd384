#pragma once
// Threads as ranks: n threads of this process, each with its own
// communicator over real loopback sockets. The fastest way to run a real
// multi-rank job in a test.

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "api/handles.hpp"
#include "comm/communicator.hpp"
#include "vigil/vigil.h"

namespace vigil::test {

// Ranks talk over loopback only: a test binary's communicators bind to lo
// unless its environment names an interface. Set before main(), while this
// process has one thread (CMake cannot give a discovered test two variables:
// gtest_discover_tests splits a property's list, so the transport variants
// set VIGIL_TRANSPORT alone).
inline const bool kLoopbackOnly = ::setenv("VIGIL_SOCKET_IFNAME", "lo", /*overwrite=*/0) == 0;

inline vigilRootInfo newRootInfo() {
  vigilRootInfo info{};
  EXPECT_EQ(vigilGetRootInfo(&info), vigilSuccess) << vigilGetLastError(nullptr);
  return info;
}

inline vigilConfig testConfig(int timeoutMs = 60000, int connectTimeoutMs = 60000) {
  vigilConfig cfg = VIGIL_CONFIG_INIT;
  cfg.timeoutMs = timeoutMs;
  cfg.connectTimeoutMs = connectTimeoutMs;
  return cfg;
}

// A suite run once per transport (VIGIL_TRANSPORT in its environment) runs
// on that transport, or fails: a variant never passes on another one.
inline void expectAskedTransport(int n, vigilComm_t comm) {
  const char* asked = std::getenv("VIGIL_TRANSPORT");
  if (n < 2 || asked == nullptr || std::string(asked).empty() || std::string(asked) == "auto") return;
  EXPECT_EQ(std::string(vigil::api::acquire(comm)->transportName()), asked);
}

// Runs body(rank, comm) on n thread-ranks; each thread creates and destroys
// its communicator (unless the body set it to NULL: it aborted it). Init
// failures fail the test with the error text.
inline void runRanks(int n, const std::function<void(int, vigilComm_t&)>& body,
                     const vigilConfig& config = testConfig()) {
  vigilRootInfo info = newRootInfo();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      vigilComm_t comm = nullptr;
      vigilResult_t rc = vigilCommInitRootInfoConfig(n, &info, r, &config, &comm);
      ASSERT_EQ(rc, vigilSuccess) << "rank " << r << ": " << vigilGetLastError(nullptr);
      expectAskedTransport(n, comm);
      body(r, comm);
      if (comm != nullptr) {
        EXPECT_EQ(vigilCommDestroy(comm), vigilSuccess) << vigilGetLastError(comm);
      }
    });
  }
  for (auto& t : threads) t.join();
}

// The result and last-error text of one rank's call.
struct Outcome {
  vigilResult_t rc = vigilSuccess;
  std::string text;
};

// Starts `ranks` (rank -> declared nranks), each with its own config, and
// collects every init outcome. Successful communicators are destroyed.
inline std::vector<Outcome> initAll(const vigilRootInfo& info, const std::vector<std::pair<int, int>>& ranks,
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

}  // namespace vigil::test
