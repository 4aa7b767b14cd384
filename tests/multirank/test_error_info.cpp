// vigilGetLastErrorInfo: the fields of the last error, for a refused
// argument and for a failure that another rank caused, and its own misuse.
// The text it returns is vigilGetLastError's, and both agree with the fields.

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <thread>

#include "common/thread_ranks.hpp"
#include "vigil/vigil.h"

namespace vigil::test {
namespace {

#define EXPECT_OK(call, comm) EXPECT_EQ((call), vigilSuccess) << vigilGetLastError(comm)

vigilErrorInfo lastInfo(vigilComm_t comm) {
  vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;
  EXPECT_EQ(vigilGetLastErrorInfo(comm, &info), vigilSuccess);
  return info;
}

vigilConfig namedConfig(const char* name) {
  vigilConfig cfg = testConfig();
  cfg.commName = name;
  return cfg;
}

TEST(ErrorInfo, RefusedArgumentHasEveryField) {
  const vigilConfig cfg = namedConfig("info-args");
  runRanks(
      2,
      [&](int rank, vigilComm_t& comm) {
        float x = 1;
        ASSERT_EQ(vigilBroadcast(&x, &x, 1, vigilFloat32, 5, comm, nullptr), vigilInvalidArgument);
        const vigilErrorInfo info = lastInfo(comm);
        EXPECT_EQ(info.result, vigilInvalidArgument);
        EXPECT_STREQ(info.id, "VG-API-004");
        EXPECT_EQ(info.rank, rank);
        EXPECT_EQ(info.nranks, 2);
        EXPECT_STREQ(info.commName, "info-args");
        EXPECT_STREQ(info.op, "broadcast");
        EXPECT_EQ(info.seq, -1);  // refused before it got a sequence number
        EXPECT_EQ(info.peer, -1);
        EXPECT_STREQ(info.cause, "root 5 is outside [0, 2).");
        EXPECT_STREQ(info.remedy, "pass a root between 0 and the communicator size - 1, the same on every rank.");
        const std::string expected = "VG-API-004: rank " + std::to_string(rank) +
                                     "/2 (comm 'info-args'): broadcast: root 5 is outside [0, 2). Remedy: pass a "
                                     "root between 0 and the communicator size - 1, the same on every rank.";
        EXPECT_EQ(std::string(info.text), expected);
        EXPECT_STREQ(info.text, vigilGetLastError(comm));
        // The same error is the thread's last error.
        const vigilErrorInfo threads = lastInfo(nullptr);
        EXPECT_STREQ(threads.text, info.text);
        EXPECT_STREQ(threads.id, "VG-API-004");
        EXPECT_EQ(threads.rank, rank);
      },
      cfg);
}

// Rank 1 leaves; rank 0's allreduce needs it: the error is rank 0's, about
// rank 1, in the op that needed it.
TEST(ErrorInfo, PeerThatLeftNamesRankOpAndPeer) {
  const vigilConfig cfg = namedConfig("info-peer");
  runRanks(
      2,
      [&](int rank, vigilComm_t& comm) {
        float x = 1;
        ASSERT_EQ(vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr), vigilSuccess);
        if (rank == 1) {
          EXPECT_OK(vigilCommDestroy(comm), comm);
          comm = nullptr;
          return;
        }
        ASSERT_EQ(vigilAllReduce(&x, &x, 1, vigilFloat32, vigilSum, comm, nullptr), vigilRemoteError);
        const vigilErrorInfo info = lastInfo(comm);
        EXPECT_EQ(info.result, vigilRemoteError);
        EXPECT_STREQ(info.id, "VG-PEER-002");
        EXPECT_EQ(info.rank, 0);
        EXPECT_EQ(info.nranks, 2);
        EXPECT_STREQ(info.commName, "info-peer");
        EXPECT_STREQ(info.op, "allreduce");
        EXPECT_EQ(info.seq, 2);
        EXPECT_EQ(info.peer, 1);
        const std::string cause = info.cause;
        EXPECT_EQ(cause.rfind("rank 1 (host ", 0), 0u) << cause;
        EXPECT_NE(cause.find("left the communicator (vigilCommDestroy) after completing collective seq 1"),
                  std::string::npos)
            << cause;
        EXPECT_GT(std::string(info.remedy).size(), 10u);
        EXPECT_EQ(std::string(info.text),
                  "VG-PEER-002: rank 0/2 (comm 'info-peer'): allreduce seq 2: " + cause + " Remedy: " + info.remedy);
        EXPECT_STREQ(info.text, vigilGetLastError(comm));
        EXPECT_STREQ(info.text, vigilGetLastError(nullptr));
      },
      cfg);
}

TEST(ErrorInfo, StringsStayValidUntilTheNextErrorOfThatComm) {
  runRanks(1, [&](int, vigilComm_t& comm) {
    float x = 1;
    ASSERT_EQ(vigilAllReduce(&x, &x, 1, static_cast<vigilDataType_t>(99), vigilSum, comm, nullptr),
              vigilInvalidArgument);
    const vigilErrorInfo info = lastInfo(comm);
    const std::string text = info.text;
    EXPECT_STREQ(info.id, "VG-API-002");
    // Successful calls, and failures on no communicator, leave comm's error alone.
    int count = 0;
    EXPECT_OK(vigilCommCount(comm, &count), comm);
    EXPECT_EQ(vigilGetVersion(nullptr), vigilInvalidArgument);
    EXPECT_EQ(std::string(info.text), text);
    EXPECT_STREQ(info.id, "VG-API-002");
    EXPECT_STREQ(lastInfo(comm).text, info.text);
    EXPECT_STREQ(lastInfo(nullptr).id, "VG-API-001");  // the thread's last error is the newer one
  });
}

TEST(ErrorInfo, NoErrorYet) {
  std::thread fresh([] {
    vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;
    ASSERT_EQ(vigilGetLastErrorInfo(nullptr, &info), vigilSuccess);
    EXPECT_EQ(info.result, vigilSuccess);
    for (const char* s : {info.id, info.commName, info.op, info.cause, info.remedy, info.text}) {
      ASSERT_NE(s, nullptr);
      EXPECT_STREQ(s, "");
    }
    EXPECT_EQ(info.rank, -1);
    EXPECT_EQ(info.nranks, -1);
    EXPECT_EQ(info.seq, -1);
    EXPECT_EQ(info.peer, -1);
    EXPECT_STREQ(vigilGetLastError(nullptr), "");
  });
  fresh.join();
}

TEST(ErrorInfo, MisuseIsRefusedAndBecomesTheLastError) {
  std::thread caller([] {
    EXPECT_EQ(vigilGetLastErrorInfo(nullptr, nullptr), vigilInvalidArgument);
    vigilErrorInfo info = lastInfo(nullptr);
    EXPECT_STREQ(info.id, "VG-API-001");
    EXPECT_STREQ(info.op, "vigilGetLastErrorInfo");
    EXPECT_STREQ(info.cause, "info is NULL.");
    EXPECT_EQ(info.rank, -1);

    vigilErrorInfo small = VIGIL_ERROR_INFO_INIT;
    small.structSize = offsetof(vigilErrorInfo, text);  // a struct without the last field
    EXPECT_EQ(vigilGetLastErrorInfo(nullptr, &small), vigilInvalidArgument);
    EXPECT_EQ(small.id, nullptr);  // nothing filled
    info = lastInfo(nullptr);
    EXPECT_EQ(info.result, vigilInvalidArgument);
    EXPECT_STREQ(info.id, "VG-API-019");
    EXPECT_STREQ(info.op, "vigilGetLastErrorInfo");
    EXPECT_NE(std::string(info.cause).find("structSize is " + std::to_string(offsetof(vigilErrorInfo, text))),
              std::string::npos)
        << info.cause;
    EXPECT_STREQ(info.text, vigilGetLastError(nullptr));
  });
  caller.join();
}

}  // namespace
}  // namespace vigil::test
