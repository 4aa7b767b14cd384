// NCCL's names and forms that a port from NCCL uses unchanged: the type aliases,
// vigilBcast (the legacy in-place broadcast), vigilCommInitAll (n ranks of one
// process, driven from one thread through streams as NCCL's single-process examples do),
// and NCCL's all-to-all loop, which sends to and receives from the rank itself.

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "vigil/vigil.h"

namespace {

struct Comms {
  std::vector<vigilComm_t> comms;
  std::vector<vigilStream_t> streams;
  explicit Comms(int n) : comms(static_cast<size_t>(n), nullptr), streams(static_cast<size_t>(n), nullptr) {}
  ~Comms() {
    for (vigilStream_t s : streams)
      if (s != nullptr) vigilStreamDestroy(s);
    for (vigilComm_t c : comms)
      if (c != nullptr) vigilCommDestroy(c);
  }
};

TEST(NcclNames, TypeAliasesAreTheSameTypes) {
  EXPECT_EQ(vigilChar, vigilInt8);
  EXPECT_EQ(vigilInt, vigilInt32);
  EXPECT_EQ(vigilHalf, vigilFloat16);
  EXPECT_EQ(vigilFloat, vigilFloat32);
  EXPECT_EQ(vigilDouble, vigilFloat64);
}

class InitAll : public ::testing::TestWithParam<int> {};

// One thread: init n ranks, then an allreduce and an in-place broadcast on every rank's
// stream before any synchronize, as the NCCL examples do with one process and n devices.
TEST_P(InitAll, OneThreadDrivesEveryRank) {
  const int n = GetParam();
  Comms job(n);
  ASSERT_EQ(vigilCommInitAll(job.comms.data(), n), vigilSuccess) << vigilGetLastError(nullptr);
  for (int r = 0; r < n; ++r) {
    int rank = -1, count = -1;
    ASSERT_EQ(vigilCommUserRank(job.comms[r], &rank), vigilSuccess);
    ASSERT_EQ(vigilCommCount(job.comms[r], &count), vigilSuccess);
    EXPECT_EQ(rank, r);
    EXPECT_EQ(count, n);
    ASSERT_EQ(vigilStreamCreate(&job.streams[r]), vigilSuccess);
  }
  constexpr size_t kCount = 1000;
  std::vector<std::vector<float>> sum(n, std::vector<float>(kCount));
  std::vector<std::vector<double>> bcast(n, std::vector<double>(kCount, -1.0));
  const int root = n - 1;
  for (int r = 0; r < n; ++r) {
    for (size_t i = 0; i < kCount; ++i) sum[r][i] = static_cast<float>(r + 1) * static_cast<float>(i % 7);
    if (r == root)
      for (size_t i = 0; i < kCount; ++i) bcast[r][i] = 0.5 * static_cast<double>(i);
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(vigilAllReduce(sum[r].data(), sum[r].data(), kCount, vigilFloat, vigilSum, job.comms[r], job.streams[r]),
              vigilSuccess)
        << vigilGetLastError(job.comms[r]);
    ASSERT_EQ(vigilBcast(bcast[r].data(), kCount, vigilDouble, root, job.comms[r], job.streams[r]), vigilSuccess)
        << vigilGetLastError(job.comms[r]);
  }
  for (int r = 0; r < n; ++r)
    ASSERT_EQ(vigilStreamSynchronize(job.streams[r]), vigilSuccess) << vigilGetLastError(job.comms[r]);
  const float ranksSum = static_cast<float>(n * (n + 1) / 2);
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(sum[r][i], ranksSum * static_cast<float>(i % 7)) << "rank " << r << " element " << i;
      ASSERT_EQ(bcast[r][i], 0.5 * static_cast<double>(i)) << "rank " << r << " element " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(Ranks, InitAll, ::testing::Values(1, 3, 4));

TEST(NcclNames, InitAllRefusesBadArgumentsAndLeavesNothing) {
  vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;
  EXPECT_EQ(vigilCommInitAll(nullptr, 2), vigilInvalidArgument);
  ASSERT_EQ(vigilGetLastErrorInfo(nullptr, &info), vigilSuccess);
  EXPECT_STREQ(info.id, "VG-API-001");
  EXPECT_STREQ(info.op, "vigilCommInitAll");

  vigilComm_t comms[2] = {reinterpret_cast<vigilComm_t>(0x1), reinterpret_cast<vigilComm_t>(0x2)};
  EXPECT_EQ(vigilCommInitAll(comms, 0), vigilInvalidArgument);
  ASSERT_EQ(vigilGetLastErrorInfo(nullptr, &info), vigilSuccess);
  EXPECT_STREQ(info.id, "VG-API-010");
  EXPECT_NE(std::string(info.cause).find("n is 0"), std::string::npos) << info.text;
}

// NCCL's all-to-all: for every peer p, itself included, send(p) then recv(p), in one group.
// Blocking and on a stream; ctest runs it again over sockets (tcp/ prefix).
class AllToAllLoop : public ::testing::TestWithParam<std::tuple<int, bool>> {};

TEST_P(AllToAllLoop, SendsToAndReceivesFromEveryRankItselfIncluded) {
  const auto [n, onStream] = GetParam();
  Comms job(n);
  ASSERT_EQ(vigilCommInitAll(job.comms.data(), n), vigilSuccess) << vigilGetLastError(nullptr);
  constexpr size_t kCount = 257;
  std::vector<std::vector<int64_t>> out(n), in(n);
  std::vector<std::string> failures(n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      vigilComm_t comm = job.comms[r];
      vigilStream_t stream = nullptr;
      if (onStream && vigilStreamCreate(&stream) != vigilSuccess) return void(failures[r] = "stream");
      out[r].resize(kCount * n);
      in[r].assign(kCount * n, -1);
      for (int p = 0; p < n; ++p)
        for (size_t i = 0; i < kCount; ++i) out[r][p * kCount + i] = r * 1'000'000 + p * 1000 + int64_t(i);
      bool ok = vigilGroupStart() == vigilSuccess;
      for (int p = 0; p < n && ok; ++p) {
        ok = vigilSend(&out[r][p * kCount], kCount, vigilInt64, p, comm, stream) == vigilSuccess &&
             vigilRecv(&in[r][p * kCount], kCount, vigilInt64, p, comm, stream) == vigilSuccess;
      }
      ok = vigilGroupEnd() == vigilSuccess && ok;
      if (ok && stream != nullptr) ok = vigilStreamSynchronize(stream) == vigilSuccess;
      if (!ok) failures[r] = vigilGetLastError(comm);
      if (stream != nullptr) vigilStreamDestroy(stream);
    });
  }
  for (std::thread& t : ranks) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(failures[r], "") << "rank " << r;
    for (int p = 0; p < n; ++p)
      for (size_t i = 0; i < kCount; ++i)
        ASSERT_EQ(in[r][p * kCount + i], p * 1'000'000 + r * 1000 + int64_t(i)) << "rank " << r << " from " << p;
  }
}

INSTANTIATE_TEST_SUITE_P(Ranks, AllToAllLoop, ::testing::Combine(::testing::Values(1, 3, 4), ::testing::Bool()));

// A send to itself without its receive, or a pair of different sizes, is refused before
// anything moves; the communicator stays usable.
TEST(NcclNames, SelfSendWithoutItsReceiveIsRefused) {
  vigilComm_t comm = nullptr;
  ASSERT_EQ(vigilCommInitAll(&comm, 1), vigilSuccess) << vigilGetLastError(nullptr);
  int32_t x[4] = {1, 2, 3, 4}, y[4] = {0, 0, 0, 0};
  vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;

  EXPECT_EQ(vigilRecv(y, 4, vigilInt32, 0, comm, nullptr), vigilInvalidArgument);
  ASSERT_EQ(vigilGetLastErrorInfo(comm, &info), vigilSuccess);
  EXPECT_STREQ(info.id, "VG-API-021");
  EXPECT_NE(std::string(info.cause).find("a receive from this rank itself (0) outside a group"), std::string::npos)
      << info.text;

  ASSERT_EQ(vigilGroupStart(), vigilSuccess);
  ASSERT_EQ(vigilSend(x, 4, vigilInt32, 0, comm, nullptr), vigilSuccess);
  ASSERT_EQ(vigilSend(x, 4, vigilInt32, 0, comm, nullptr), vigilSuccess);
  ASSERT_EQ(vigilRecv(y, 4, vigilInt32, 0, comm, nullptr), vigilSuccess);
  EXPECT_EQ(vigilGroupEnd(), vigilInvalidArgument);
  ASSERT_EQ(vigilGetLastErrorInfo(comm, &info), vigilSuccess);
  EXPECT_STREQ(info.id, "VG-API-021");
  EXPECT_NE(std::string(info.cause).find("2 send(s) to this rank itself (0) and 1 receive(s)"), std::string::npos)
      << info.text;
  EXPECT_EQ(y[0], 0) << "nothing moves";

  ASSERT_EQ(vigilGroupStart(), vigilSuccess);
  ASSERT_EQ(vigilSend(x, 4, vigilInt32, 0, comm, nullptr), vigilSuccess);
  ASSERT_EQ(vigilRecv(y, 2, vigilInt32, 0, comm, nullptr), vigilSuccess);
  EXPECT_EQ(vigilGroupEnd(), vigilInvalidArgument);
  ASSERT_EQ(vigilGetLastErrorInfo(comm, &info), vigilSuccess);
  EXPECT_STREQ(info.id, "VG-API-021");
  EXPECT_NE(std::string(info.cause).find("send #0 to this rank itself is 4 x int32, its receive #0 is 2 x int32"),
            std::string::npos)
      << info.text;

  // Still usable: the pair done right.
  ASSERT_EQ(vigilGroupStart(), vigilSuccess);
  ASSERT_EQ(vigilSend(x, 4, vigilInt32, 0, comm, nullptr), vigilSuccess);
  ASSERT_EQ(vigilRecv(y, 4, vigilInt32, 0, comm, nullptr), vigilSuccess);
  ASSERT_EQ(vigilGroupEnd(), vigilSuccess) << vigilGetLastError(comm);
  EXPECT_EQ(std::memcmp(x, y, sizeof x), 0);
  vigilCommDestroy(comm);
}

}  // namespace
