// Every algorithm of the selection table, forced on each transport, on 1 to
// 8 thread-ranks: it must be the one that runs (the fingerprint carries it)
// and its results must match the reference. The process suite runs the full
// check list under the same forcing (tests/multirank/CMakeLists.txt).

#include <gtest/gtest.h>

#include <barrier>
#include <chrono>
#include <thread>

#include "algo/select.hpp"
#include "bootstrap/root_info.hpp"
#include "comm/communicator.hpp"
#include "common/collective_checks.hpp"
#include "common/thread_ranks.hpp"

namespace vigil::test {
namespace {

struct Case {
  const algo::AlgoRow* row;
  TransportKind transport;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << opName(c.row->kind) << " " << c.row->name << " over " << toString(c.transport);
}

std::string caseName(const ::testing::TestParamInfo<Case>& info) {
  return std::string(opName(info.param.row->kind)) + "_" + info.param.row->name + "_" + toString(info.param.transport);
}

class ForcedAlgorithm : public ::testing::TestWithParam<Case> {};

// Runs `kind` at a few sizes on rank `rank` and checks the values.
void runAndCheck(Communicator& comm, OpKind kind, int rank, int n, Report& report) {
  const vigilDataType_t t = vigilFloat32;
  for (size_t count : {size_t{1}, size_t{3}, size_t{1000}, size_t{70001}, size_t{140001}}) {
#ifdef VIGIL_SANITIZED_BUILD
    // The largest size (blocks of more than one pipeline piece) on up to 3 ranks only.
    if (count > 70001 && n > 3) break;
#endif
    OpDesc op;
    op.kind = kind;
    op.count = count;
    op.dtype = t;
    op.redop = vigilSum;
    op.root = n - 1;
    const size_t nn = static_cast<size_t>(n), bytes = count * 4;
    std::vector<uint8_t> in, out, want;
    // The v-variants: rank p's block is count + p elements, blocks in rank order.
    std::vector<size_t> counts(nn), displs(nn);
    size_t total = 0;
    for (size_t p = 0; p < nn; ++p) {
      counts[p] = count + p;
      displs[p] = total;
      total += counts[p];
    }
    const auto me = static_cast<size_t>(rank);
    auto allBlocks = [&] {
      std::vector<uint8_t> all;
      for (int q = 0; q < n; ++q) {
        std::vector<uint8_t> p = pattern(q, counts[static_cast<size_t>(q)] * 4);
        all.insert(all.end(), p.begin(), p.end());
      }
      return all;
    };
    switch (kind) {
      case OpKind::AllGatherV:
      case OpKind::GatherV:
        op.count = counts[me];
        op.recvcounts = counts.data();
        op.rdispls = displs.data();
        in = pattern(rank, counts[me] * 4);
        if (kind == OpKind::AllGatherV || rank == n - 1) want = allBlocks();
        out.resize(want.size());
        break;
      case OpKind::ScatterV:
        op.count = counts[me];
        op.sendcounts = counts.data();
        op.sdispls = displs.data();
        if (rank == n - 1) in = allBlocks();
        want = allBlocks();
        want = std::vector<uint8_t>(want.begin() + static_cast<long>(displs[me] * 4),
                                    want.begin() + static_cast<long>((displs[me] + counts[me]) * 4));
        out.resize(want.size());
        break;
      case OpKind::ReduceScatterV:
        op.recvcounts = counts.data();
        in = input(t, vigilSum, rank, total), out = bytesOf(t, counts[me]);
        want = reference(t, vigilSum, n, counts[me], displs[me]);
        break;
      case OpKind::Scan:
        in = input(t, vigilSum, rank, count), out = bytesOf(t, count), want = reference(t, vigilSum, rank + 1, count);
        break;
      case OpKind::Exscan:
        in = input(t, vigilSum, rank, count), out = bytesOf(t, count);
        want = rank == 0 ? bytesOf(t, count) : reference(t, vigilSum, rank, count);  // rank 0: the identity, 0
        break;
      case OpKind::AllReduce:
        in = input(t, vigilSum, rank, count), out = bytesOf(t, count), want = reference(t, vigilSum, n, count);
        break;
      case OpKind::ReduceScatter:
        in = input(t, vigilSum, rank, count * nn), out = bytesOf(t, count);
        want = reference(t, vigilSum, n, count, static_cast<size_t>(rank) * count);
        break;
      case OpKind::Reduce:
        in = input(t, vigilSum, rank, count), out = bytesOf(t, count);
        want = rank == n - 1 ? reference(t, vigilSum, n, count) : out;
        break;
      case OpKind::Broadcast:
        in = rank == n - 1 ? pattern(n - 1, bytes) : std::vector<uint8_t>(bytes), out.resize(bytes);
        want = pattern(n - 1, bytes);
        break;
      case OpKind::AllGather:
        in = pattern(rank, bytes), out.resize(bytes * nn);
        for (int q = 0; q < n; ++q) {
          std::vector<uint8_t> p = pattern(q, bytes);
          want.insert(want.end(), p.begin(), p.end());
        }
        break;
      case OpKind::AllToAll:
        in = pattern(rank, bytes * nn), out.resize(bytes * nn);
        for (int q = 0; q < n; ++q) {
          std::vector<uint8_t> p = pattern(q, bytes * nn);
          want.insert(want.end(), p.begin() + static_cast<long>(static_cast<size_t>(rank) * bytes),
                      p.begin() + static_cast<long>(static_cast<size_t>(rank + 1) * bytes));
        }
        break;
      case OpKind::Gather:
        in = pattern(rank, bytes), out.resize(rank == n - 1 ? bytes * nn : 0);
        if (rank == n - 1) {
          for (int q = 0; q < n; ++q) {
            std::vector<uint8_t> p = pattern(q, bytes);
            want.insert(want.end(), p.begin(), p.end());
          }
        }
        break;
      case OpKind::Scatter:
        in = rank == n - 1 ? pattern(n - 1, bytes * nn) : std::vector<uint8_t>{}, out.resize(bytes);
        want = pattern(n - 1, bytes * nn);
        want = std::vector<uint8_t>(want.begin() + static_cast<long>(static_cast<size_t>(rank) * bytes),
                                    want.begin() + static_cast<long>(static_cast<size_t>(rank + 1) * bytes));
        break;
      case OpKind::Barrier: break;
      default: FAIL() << "no check for " << opName(kind);
    }
    op.send = in.data();
    op.recv = out.data();
    try {
      comm.run(op);
    } catch (const Error& e) {
      report.fail(e.text());
      return;
    }
    report.equal(out, want, describe(opName(kind), " count ", count));
    if (kind == OpKind::Barrier) break;
  }
}

// Every rank count from 1 to 8; sanitized builds (10-20x slower) take 1, 2,
// 3 and 8 (more ranks than cores), and the normal build covers the rest.
#ifdef VIGIL_SANITIZED_BUILD
constexpr int kRankCounts[] = {1, 2, 3, 8};
#else
constexpr int kRankCounts[] = {1, 2, 3, 4, 5, 6, 7, 8};
#endif

TEST_P(ForcedAlgorithm, RunsAndIsExact) {
  const Case c = GetParam();
  for (int n : kRankCounts) {
    vigilRootInfo info = newRootInfo();
    const RootInfo root = RootInfo::decode(info);
    CommConfig config = CommConfig::resolve(nullptr, processConfig());
    config.timeoutMs = 60000;
    config.transport = c.transport;
    config.algoText = std::string(opName(c.row->kind)) + "=" + c.row->name;
    std::vector<std::thread> ranks;
    for (int r = 0; r < n; ++r) {
      ranks.emplace_back([&, r] {
        Report report{[&](const std::string& what) { ADD_FAILURE() << n << " ranks, rank " << r << ": " << what; }};
        std::shared_ptr<Communicator> comm = Communicator::create(n, root, r, config);
        runAndCheck(*comm, c.row->kind, r, n, report);
        if (n > 1) {  // a single rank has nothing to choose: it copies
          EXPECT_EQ(std::string(algo::algoName(comm->lastAlgo())), c.row->name) << n << " ranks, rank " << r;
          EXPECT_EQ(std::string(comm->transportName()), c.transport == TransportKind::Shm ? "shm" : "tcp");
        }
        comm->destroy();
      });
    }
    for (auto& t : ranks) t.join();
  }
}

// Every row of the table on each transport it applies to on one host
// (all-to-all-v has its own checks in the collective suite).
std::vector<Case> allCases() {
  std::vector<Case> out;
  for (TransportKind tr : {TransportKind::Tcp, TransportKind::Shm}) {
    for (const algo::AlgoRow& row : algo::algorithmTable()) {
      if (row.kind == OpKind::AllToAllV) continue;
      if (row.applies(algo::Topology{.nranks = 2, .loadStore = tr == TransportKind::Shm})) out.push_back({&row, tr});
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Table, ForcedAlgorithm, ::testing::ValuesIn(allCases()), caseName);

// Ranks on several hosts (host identities given at init): the table picks the
// hierarchical algorithms for allreduce, broadcast and barrier, the flat ones
// for the rest, and every result is exact. Hosts are consecutive blocks,
// uneven blocks and interleaved ranks (so a root's host rank differs from its
// rank); `forceFlat` pins allreduce to the ring to show the override wins.
void runOnHosts(const std::vector<int>& hostOf, bool forceFlat) {
  const int n = static_cast<int>(hostOf.size());
  vigilRootInfo info = newRootInfo();
  const RootInfo root = RootInfo::decode(info);
  CommConfig config = CommConfig::resolve(nullptr, processConfig());
  config.timeoutMs = 60000;
  if (forceFlat) config.algoText = "allreduce=ring";
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      Report report{[&](const std::string& what) { ADD_FAILURE() << n << " ranks, rank " << r << ": " << what; }};
      InitOverrides overrides;
      overrides.hostId = "host-" + std::to_string(hostOf[static_cast<size_t>(r)]);
      std::shared_ptr<Communicator> comm = Communicator::create(n, root, r, config, overrides);
      EXPECT_EQ(std::string(comm->transportName()), "tcp");
      for (OpKind k : {OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce, OpKind::AllGather, OpKind::ReduceScatter,
                       OpKind::AllToAll, OpKind::Gather, OpKind::Scatter, OpKind::Barrier}) {
        runAndCheck(*comm, k, r, n, report);
        const bool hier = (k == OpKind::AllReduce && !forceFlat) || k == OpKind::Broadcast || k == OpKind::Barrier;
        EXPECT_EQ(std::string(algo::algoName(comm->lastAlgo())) == "hierarchical", hier)
            << opName(k) << " ran " << algo::algoName(comm->lastAlgo());
      }
      // The average is divided once, by the world size, after the sum across hosts.
      std::vector<float> v(5, static_cast<float>(r));
      OpDesc avg{OpKind::AllReduce, v.data(), v.data(), v.size(), vigilFloat32, vigilAvg};
      comm->run(avg);
      EXPECT_EQ(v, std::vector<float>(5, static_cast<float>(n - 1) / 2)) << "rank " << r;
      comm->destroy();
    });
  }
  for (auto& t : ranks) t.join();
}

TEST(Hierarchical, FourHostsOfTwo) {
  runOnHosts({0, 0, 1, 1, 2, 2, 3, 3}, false);
}

TEST(Hierarchical, UnevenAndInterleavedHosts) {
  runOnHosts({0, 0, 0, 1, 1}, false);
  runOnHosts({0, 1, 2, 0, 1, 2, 0}, false);
}

TEST(Hierarchical, AForcedFlatAlgorithmWins) {
  runOnHosts({0, 1, 0, 1}, true);
}

// A rank of the second host aborts while the others run a hierarchical
// allreduce: the failure crosses both levels and every other rank returns
// an error that names rank 3, instead of waiting in a step.
TEST(Hierarchical, AnAbortOnOneHostReachesEveryRankOnTheOther) {
  const int n = 4;
  vigilRootInfo info = newRootInfo();
  const RootInfo root = RootInfo::decode(info);
  CommConfig config = CommConfig::resolve(nullptr, processConfig());
  config.timeoutMs = 60000;
  std::barrier ready(n);  // rank 3 aborts after every rank's init
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      InitOverrides overrides;
      overrides.hostId = r < 2 ? "host-a" : "host-b";
      std::shared_ptr<Communicator> comm = Communicator::create(n, root, r, config, overrides);
      ready.arrive_and_wait();
      if (r == 3) {
        comm->abort();
        return;
      }
      std::vector<float> v(1000, 1.0f);
      const auto started = std::chrono::steady_clock::now();
      try {
        comm->run(OpDesc{OpKind::AllReduce, v.data(), v.data(), v.size(), vigilFloat32, vigilSum});
        ADD_FAILURE() << "rank " << r << ": the allreduce succeeded without rank 3";
      } catch (const Error& e) {
        EXPECT_EQ(e.result(), vigilRemoteError) << e.text();
        EXPECT_NE(e.text().find("VG-PEER-003"), std::string::npos) << e.text();
        EXPECT_NE(e.text().find("rank 3 aborted"), std::string::npos) << e.text();
      }
      EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10)) << "rank " << r;
      comm->destroy();
    });
  }
  for (auto& t : ranks) t.join();
}

TEST(Hierarchical, OneRankPerHostStaysFlat) {
  const int n = 3;
  vigilRootInfo info = newRootInfo();
  const RootInfo root = RootInfo::decode(info);
  CommConfig config = CommConfig::resolve(nullptr, processConfig());
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      InitOverrides overrides;
      overrides.hostId = "host-" + std::to_string(r);
      std::shared_ptr<Communicator> comm = Communicator::create(n, root, r, config, overrides);
      float x = 1;
      comm->run(OpDesc{OpKind::AllReduce, &x, &x, 1, vigilFloat32, vigilSum});
      EXPECT_EQ(x, 3.0f);
      EXPECT_STREQ(algo::algoName(comm->lastAlgo()), "recursive_doubling");
      comm->destroy();
    });
  }
  for (auto& t : ranks) t.join();
}

}  // namespace
}  // namespace vigil::test
