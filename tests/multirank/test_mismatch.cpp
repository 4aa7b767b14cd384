// S3, the mismatch matrix: for every pair of different collectives, rank 0
// runs one and the other ranks the other. Every rank learns of the mismatch
// within 2 s — also when the two collectives exchange no message that the
// other would read (different roots, gather vs scatter): then the control
// plane's fingerprint exchange tells them. A rank whose own part of the op
// completed with verified data (a leaf that only sent) may return success
// from this call; its very next call returns vigilMismatch.

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <thread>

#include "common/thread_ranks.hpp"
#include "core/config.hpp"
#include "core/log.hpp"
#include "core/strcat.hpp"

namespace vigil::test {
namespace {

constexpr size_t kCount = 4;

struct Collective {
  const char* name;
  std::function<vigilResult_t(vigilComm_t, std::vector<float>&, std::vector<float>&)> call;
};

std::vector<Collective> collectives(int root) {
  return {
      {"allreduce",
       [](vigilComm_t c, auto& in, auto& out) {
         return vigilAllReduce(in.data(), out.data(), kCount, vigilFloat32, vigilSum, c, nullptr);
       }},
      {"broadcast",
       [root](vigilComm_t c, auto& in, auto& out) {
         return vigilBroadcast(in.data(), out.data(), kCount, vigilFloat32, root, c, nullptr);
       }},
      {"reduce",
       [root](vigilComm_t c, auto& in, auto& out) {
         return vigilReduce(in.data(), out.data(), kCount, vigilFloat32, vigilSum, root, c, nullptr);
       }},
      {"allgather", [](vigilComm_t c, auto& in,
                       auto& out) { return vigilAllGather(in.data(), out.data(), kCount, vigilFloat32, c, nullptr); }},
      {"reduce_scatter",
       [](vigilComm_t c, auto& in, auto& out) {
         return vigilReduceScatter(in.data(), out.data(), kCount, vigilFloat32, vigilSum, c, nullptr);
       }},
      {"alltoall", [](vigilComm_t c, auto& in,
                      auto& out) { return vigilAllToAll(in.data(), out.data(), kCount, vigilFloat32, c, nullptr); }},
      {"gather",
       [root](vigilComm_t c, auto& in, auto& out) {
         return vigilGather(in.data(), out.data(), kCount, vigilFloat32, root, c, nullptr);
       }},
      {"scatter",
       [root](vigilComm_t c, auto& in, auto& out) {
         return vigilScatter(in.data(), out.data(), kCount, vigilFloat32, root, c, nullptr);
       }},
      {"barrier", [](vigilComm_t c, auto&, auto&) { return vigilBarrier(c, nullptr); }},
  };
}

void expectAllMismatch(
    int n, const std::function<vigilResult_t(int, vigilComm_t, std::vector<float>&, std::vector<float>&)>& call,
    const std::string& what) {
  runRanks(n, [&](int rank, vigilComm_t comm) {
    std::vector<float> in(kCount * 8, 1.0f), out(kCount * 8, 0.0f);
    auto start = std::chrono::steady_clock::now();
    vigilResult_t rc = call(rank, comm, in, out);
    if (rc == vigilSuccess) rc = vigilBarrier(comm, nullptr);  // the next call must know
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::string text = vigilGetLastError(comm);
    EXPECT_EQ(rc, vigilMismatch) << what << ", rank " << rank << ": " << text;
    EXPECT_NE(text.find("VG-OP-002"), std::string::npos) << what << ", rank " << rank << ": " << text;
    EXPECT_LT(ms, 2000.0) << what << ", rank " << rank;
  });
}

class MismatchMatrix : public ::testing::TestWithParam<int> {};

TEST_P(MismatchMatrix, EveryPairOfDifferentCollectives) {
  const int n = GetParam();
  auto all = collectives(0);
  for (size_t a = 0; a < all.size(); ++a) {
    for (size_t b = 0; b < all.size(); ++b) {
      if (a == b) continue;
      const std::string what = std::string(all[a].name) + " on rank 0 vs " + all[b].name + " elsewhere";
      expectAllMismatch(
          n,
          [&](int rank, vigilComm_t c, auto& in, auto& out) { return (rank == 0 ? all[a] : all[b]).call(c, in, out); },
          what);
    }
  }
}

TEST_P(MismatchMatrix, DifferentRootsOfTheSameCollective) {
  const int n = GetParam();
  for (size_t i = 0; i < collectives(0).size(); ++i) {
    const std::string name = collectives(0)[i].name;
    if (name != "broadcast" && name != "reduce" && name != "gather" && name != "scatter") continue;
    expectAllMismatch(
        n,
        [&](int rank, vigilComm_t c, auto& in, auto& out) {
          return collectives(rank == 0 ? 0 : 1)[i].call(c, in, out);  // each side names another root
        },
        name + " with roots 0 vs 1");
  }
}

// A recursive-doubling allreduce checks every rank's fingerprint on its data
// path (each step combines what it received, its header checked, before it
// sends the next): no rank waits for its left neighbour's fingerprint over
// the control plane, as a broadcast's root does, and one rank that reduces
// differently still fails every rank (the tcp/ variant of the matrix above
// runs it too, on 3 ranks).
std::vector<std::string> controlPlaneWaits(int n, OpKind kind) {
  const std::string path = cat(::testing::TempDir(), "vigil-confirm-log-", getpid(), ".txt");
  std::remove(path.c_str());
  processConfig();  // configures the logger once; the capture must come after
  Logger::instance().configure(LogLevel::Trace, path);
  const RootInfo root = RootInfo::decode(newRootInfo());
  CommConfig config = CommConfig::resolve(nullptr, processConfig());
  config.timeoutMs = 60000;
  config.transport = TransportKind::Tcp;
  config.algoText = kind == OpKind::AllReduce ? "allreduce=recursive_doubling" : "broadcast=binomial";
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      std::shared_ptr<Communicator> comm = Communicator::create(n, root, r, config);
      std::vector<float> in(kCount, float(r + 1)), out(kCount, 0.0f);
      OpDesc op;
      op.kind = kind;
      op.count = kCount;
      op.dtype = vigilFloat32;
      op.redop = vigilSum;
      op.root = 0;
      op.send = in.data();
      op.recv = out.data();
      for (int i = 0; i < 3; ++i) {
        comm->run(op);
        EXPECT_EQ(out[0], kind == OpKind::AllReduce ? float(n * (n + 1) / 2) : 1.0f) << "rank " << r;
      }
      comm->destroy();
    });
  }
  for (auto& t : ranks) t.join();
  Logger::instance().configure(LogLevel::Warn, "");
  std::ifstream in(path);
  std::vector<std::string> waits;
  for (std::string line; std::getline(in, line);) {
    if (line.find("fingerprint (control plane)") != std::string::npos) waits.push_back(line);
  }
  std::remove(path.c_str());
  return waits;
}

TEST(DataPathFingerprints, RecursiveDoublingAllReduceWaitsForNoControlMessage) {
  for (int n : {3, 4, 5, 8}) {
    const std::vector<std::string> waits = controlPlaneWaits(n, OpKind::AllReduce);
    EXPECT_TRUE(waits.empty()) << n << " ranks: " << waits.size() << " wait(s), the first: " << waits.front();
  }
  // The log shows such waits where they happen: the root of a broadcast received nothing.
  const std::vector<std::string> waits = controlPlaneWaits(4, OpKind::Broadcast);
  EXPECT_EQ(std::count_if(waits.begin(), waits.end(),
                          [](const std::string& line) { return line.find("waits for rank 3's") != std::string::npos; }),
            3);
}

TEST(DataPathFingerprints, ARankThatReducesDifferentlyFailsEveryRank) {
  for (int n : {4, 5}) {
    for (int odd = 0; odd < n; ++odd) {
      expectAllMismatch(
          n,
          [&](int rank, vigilComm_t c, auto& in, auto& out) {
            return vigilAllReduce(in.data(), out.data(), kCount, vigilFloat32, rank == odd ? vigilMax : vigilSum, c,
                                  nullptr);
          },
          cat("allreduce max on rank ", odd, " of ", n, ", sum elsewhere"));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RankCounts, MismatchMatrix, ::testing::Values(2, 3),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace vigil::test
