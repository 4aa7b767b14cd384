// Tagged point-to-point on thread-ranks: vigilSendTag/vigilRecvTag with MPI's
// matching rules (by source and tag, non-overtaking), receives from any
// source, probes, vigilSendRecv, groups, streams, sends to the rank itself,
// and the errors: a message too large or of another type for its receive
// (on both ranks), a tagged receive meeting an untagged message, bad tags.
// Run over shared memory (default), sockets (tcp/) and UCX (ucx/).

#include <gtest/gtest.h>

#include <algorithm>
#include <latch>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "common/thread_ranks.hpp"

namespace {

using vigil::test::runRanks;
using vigil::test::testConfig;

std::vector<int32_t> pattern(size_t count, int seed) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i) v[i] = static_cast<int32_t>(seed * 1000003 + static_cast<int>(i));
  return v;
}

// 500 tags, received in the reverse order of their sends: every message
// before the last sent one waits at the receiver until its receive comes.
TEST(TaggedP2p, FiveHundredTagsInReverseOrder) {
  constexpr int kTags = 500;
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    if (rank == 0) {
      for (int tag = 0; tag < kTags; ++tag) {
        const std::vector<int32_t> data = pattern(16 + tag % 7, tag);
        ASSERT_EQ(vigilSendTag(data.data(), data.size(), vigilInt32, 1, tag, comm, nullptr), vigilSuccess)
            << vigilGetLastError(comm);
      }
    } else {
      for (int tag = kTags - 1; tag >= 0; --tag) {
        std::vector<int32_t> got(64, -1);
        vigilStatus st{};
        ASSERT_EQ(vigilRecvTag(got.data(), got.size(), vigilInt32, 0, tag, comm, &st, nullptr), vigilSuccess)
            << vigilGetLastError(comm);
        const std::vector<int32_t> want = pattern(16 + tag % 7, tag);
        EXPECT_EQ(st.source, 0);
        EXPECT_EQ(st.tag, tag);
        EXPECT_EQ(st.count, want.size());
        EXPECT_EQ(st.bytes, want.size() * sizeof(int32_t));
        EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin())) << "tag " << tag;
        EXPECT_EQ(got[want.size()], -1) << "written past the message, tag " << tag;
      }
    }
    ASSERT_EQ(vigilBarrier(comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
  });
}

// Messages larger than any socket or ring buffer, received out of order: the
// sender's first send completes only because the receiver takes it aside.
TEST(TaggedP2p, LargeMessagesOutOfOrder) {
  constexpr size_t kCount = 2u << 20;  // 8 MiB of int32
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    if (rank == 0) {
      for (int tag : {1, 2}) {
        const std::vector<int32_t> data = pattern(kCount, tag);
        ASSERT_EQ(vigilSendTag(data.data(), kCount, vigilInt32, 1, tag, comm, nullptr), vigilSuccess)
            << vigilGetLastError(comm);
      }
    } else {
      for (int tag : {2, 1}) {
        std::vector<int32_t> got(kCount);
        ASSERT_EQ(vigilRecvTag(got.data(), kCount, vigilInt32, 0, tag, comm, nullptr, nullptr), vigilSuccess)
            << vigilGetLastError(comm);
        EXPECT_EQ(got, pattern(kCount, tag)) << "tag " << tag;
      }
    }
  });
}

// Same source and tag: received in the order sent; VIGIL_ANY_TAG takes the
// next message whatever its tag.
TEST(TaggedP2p, NonOvertakingAndAnyTag) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    const int tags[] = {5, 5, 9, 5, 9};
    if (rank == 0) {
      for (int i = 0; i < 5; ++i) {
        const int32_t v = 100 + i;
        ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 1, tags[i], comm, nullptr), vigilSuccess);
      }
    } else {
      std::vector<int32_t> fives, nines;
      for (int i = 0; i < 3; ++i) {
        int32_t v = -1;
        ASSERT_EQ(vigilRecvTag(&v, 1, vigilInt32, 0, 5, comm, nullptr, nullptr), vigilSuccess);
        fives.push_back(v);
      }
      for (int i = 0; i < 2; ++i) {
        int32_t v = -1;
        vigilStatus st{};
        ASSERT_EQ(vigilRecvTag(&v, 1, vigilInt32, 0, VIGIL_ANY_TAG, comm, &st, nullptr), vigilSuccess);
        EXPECT_EQ(st.tag, 9);
        nines.push_back(v);
      }
      EXPECT_EQ(fives, (std::vector<int32_t>{100, 101, 103}));
      EXPECT_EQ(nines, (std::vector<int32_t>{102, 104}));
    }
  });
}

class TaggedRanks : public ::testing::TestWithParam<int> {};

// Every other rank sends to rank 0; rank 0 receives from any source and
// learns who sent what from the status.
TEST_P(TaggedRanks, AnySource) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    if (rank != 0) {
      const std::vector<int32_t> data = pattern(static_cast<size_t>(rank) * 10, rank);
      ASSERT_EQ(vigilSendTag(data.data(), data.size(), vigilInt32, 0, 40 + rank, comm, nullptr), vigilSuccess)
          << vigilGetLastError(comm);
      return;
    }
    std::set<int> sources;
    for (int i = 1; i < n; ++i) {
      std::vector<int32_t> got(100, -1);
      vigilStatus st{};
      ASSERT_EQ(vigilRecvTag(got.data(), got.size(), vigilInt32, VIGIL_ANY_SOURCE, VIGIL_ANY_TAG, comm, &st, nullptr),
                vigilSuccess)
          << vigilGetLastError(comm);
      ASSERT_GE(st.source, 1);
      ASSERT_LT(st.source, n);
      EXPECT_EQ(st.tag, 40 + st.source);
      EXPECT_EQ(st.count, static_cast<size_t>(st.source) * 10);
      const std::vector<int32_t> want = pattern(st.count, st.source);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got.begin()));
      sources.insert(st.source);
    }
    EXPECT_EQ(sources.size(), static_cast<size_t>(n - 1));
  });
}

// A ring of vigilSendRecv with messages larger than the buffers: every rank
// sends first, and none deadlocks.
TEST_P(TaggedRanks, SendRecvRing) {
  const int n = GetParam();
  constexpr size_t kCount = 1u << 18;  // 1 MiB
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    const std::vector<int32_t> out = pattern(kCount, rank);
    std::vector<int32_t> in(kCount);
    vigilStatus st{};
    ASSERT_EQ(vigilSendRecv(out.data(), kCount, vigilInt32, right, rank, in.data(), kCount, vigilInt32, left, left,
                            comm, &st, nullptr),
              vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(st.source, left);
    EXPECT_EQ(st.tag, left);
    EXPECT_EQ(in, pattern(kCount, left));
  });
}

// An all-to-all of tagged messages in one group, the rank itself included,
// every message tagged by its destination; the receives are issued in the
// reverse order of the sends.
TEST_P(TaggedRanks, GroupAllToAllWithSelf) {
  const int n = GetParam();
  constexpr size_t kCount = 1000;
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    std::vector<std::vector<int32_t>> out(n), in(n, std::vector<int32_t>(kCount, -1));
    std::vector<vigilStatus> st(n);
    ASSERT_EQ(vigilGroupStart(), vigilSuccess);
    for (int p = 0; p < n; ++p) {
      out[p] = pattern(kCount, rank * 100 + p);
      ASSERT_EQ(vigilSendTag(out[p].data(), kCount, vigilInt32, p, p, comm, nullptr), vigilSuccess);
    }
    for (int p = n - 1; p >= 0; --p)
      ASSERT_EQ(vigilRecvTag(in[p].data(), kCount, vigilInt32, p, rank, comm, &st[p], nullptr), vigilSuccess);
    ASSERT_EQ(vigilGroupEnd(), vigilSuccess) << vigilGetLastError(comm);
    for (int p = 0; p < n; ++p) {
      EXPECT_EQ(in[p], pattern(kCount, p * 100 + rank)) << "from " << p;
      EXPECT_EQ(st[p].source, p);
      EXPECT_EQ(st[p].tag, rank);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, TaggedRanks, ::testing::Values(2, 3, 5));

// vigilIprobe sees nothing before the send, vigilProbe then gives the size,
// and the receive sized from it takes the message.
TEST(TaggedP2p, ProbeThenReceive) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    if (rank == 0) {
      int flag = -1;
      vigilStatus st{};
      ASSERT_EQ(vigilIprobe(VIGIL_ANY_SOURCE, 7, comm, &flag, &st), vigilSuccess) << vigilGetLastError(comm);
      EXPECT_EQ(flag, 0);
      ASSERT_EQ(vigilBarrier(comm, nullptr), vigilSuccess);  // rank 1 sends after this
      ASSERT_EQ(vigilProbe(VIGIL_ANY_SOURCE, 7, comm, &st), vigilSuccess) << vigilGetLastError(comm);
      EXPECT_EQ(st.source, 1);
      EXPECT_EQ(st.tag, 7);
      EXPECT_EQ(st.count, 777u);
      // The message with tag 3 came first and was set aside by the probe.
      ASSERT_EQ(vigilIprobe(1, 3, comm, &flag, &st), vigilSuccess);
      EXPECT_EQ(flag, 1);
      EXPECT_EQ(st.count, 33u);
      std::vector<double> big(777);
      ASSERT_EQ(vigilRecvTag(big.data(), 777, vigilFloat64, 1, 7, comm, nullptr, nullptr), vigilSuccess);
      EXPECT_EQ(big[776], 776.5);
      std::vector<double> small(33);
      ASSERT_EQ(vigilRecvTag(small.data(), 33, vigilFloat64, 1, 3, comm, nullptr, nullptr), vigilSuccess);
      EXPECT_EQ(small[32], -32.0);
      ASSERT_EQ(vigilIprobe(VIGIL_ANY_SOURCE, VIGIL_ANY_TAG, comm, &flag, &st), vigilSuccess);
      EXPECT_EQ(flag, 0);
    } else {
      ASSERT_EQ(vigilBarrier(comm, nullptr), vigilSuccess);
      std::vector<double> small(33), big(777);
      for (size_t i = 0; i < small.size(); ++i) small[i] = -static_cast<double>(i);
      for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<double>(i) + 0.5;
      ASSERT_EQ(vigilSendTag(small.data(), 33, vigilFloat64, 0, 3, comm, nullptr), vigilSuccess);
      ASSERT_EQ(vigilSendTag(big.data(), 777, vigilFloat64, 0, 7, comm, nullptr), vigilSuccess);
    }
  });
}

// On streams: the receive's status is written when the stream has run it.
TEST(TaggedP2p, OnStreams) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    vigilStream_t stream = nullptr;
    ASSERT_EQ(vigilStreamCreate(&stream), vigilSuccess);
    std::vector<int32_t> a = pattern(100, 1), b = pattern(50, 2), x(100, -1), y(100, -1);
    vigilStatus sx{}, sy{};
    if (rank == 0) {
      ASSERT_EQ(vigilSendTag(a.data(), a.size(), vigilInt32, 1, 11, comm, stream), vigilSuccess);
      ASSERT_EQ(vigilSendTag(b.data(), b.size(), vigilInt32, 1, 22, comm, stream), vigilSuccess);
    } else {
      ASSERT_EQ(vigilRecvTag(y.data(), y.size(), vigilInt32, 0, 22, comm, &sy, stream), vigilSuccess);
      ASSERT_EQ(vigilRecvTag(x.data(), x.size(), vigilInt32, VIGIL_ANY_SOURCE, 11, comm, &sx, stream), vigilSuccess);
    }
    ASSERT_EQ(vigilStreamSynchronize(stream), vigilSuccess) << vigilGetLastError(comm);
    if (rank == 1) {
      EXPECT_EQ(sy.count, 50u);
      EXPECT_EQ(sx.count, 100u);
      EXPECT_EQ(sx.source, 0);
      EXPECT_TRUE(std::equal(b.begin(), b.end(), y.begin()));
      EXPECT_EQ(x, a);
    }
    ASSERT_EQ(vigilStreamDestroy(stream), vigilSuccess);
  });
}

// A tagged send to the rank itself is kept until its receive, in or out of a group.
TEST(TaggedP2p, ToItself) {
  runRanks(1, [&](int, vigilComm_t& comm) {
    const std::vector<int32_t> a = pattern(10, 3);
    std::vector<int32_t> got(10, -1);
    ASSERT_EQ(vigilSendTag(a.data(), 10, vigilInt32, 0, 4, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
    int flag = 0;
    vigilStatus st{};
    ASSERT_EQ(vigilIprobe(0, 4, comm, &flag, &st), vigilSuccess);
    EXPECT_EQ(flag, 1);
    ASSERT_EQ(vigilRecvTag(got.data(), 10, vigilInt32, VIGIL_ANY_SOURCE, 4, comm, &st, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(got, a);
    EXPECT_EQ(st.source, 0);
    // Nothing waits now: the receive could never complete, and says so at once.
    EXPECT_EQ(vigilRecvTag(got.data(), 10, vigilInt32, 0, 4, comm, nullptr, nullptr), vigilInvalidArgument);
    EXPECT_NE(std::string(vigilGetLastError(comm)).find("VG-API-022"), std::string::npos) << vigilGetLastError(comm);
    EXPECT_EQ(vigilRecvTag(got.data(), 10, vigilInt32, VIGIL_ANY_SOURCE, 4, comm, nullptr, nullptr),
              vigilInvalidArgument);
    EXPECT_EQ(vigilBarrier(comm, nullptr), vigilSuccess) << "still usable";
  });
}

// Bad tags and sources: refused at the call with VG-API-022; the communicator stays usable.
TEST(TaggedP2p, BadTagsAndSourcesAreRefused) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    int32_t v = 1;
    EXPECT_EQ(vigilSendTag(&v, 1, vigilInt32, 1 - rank, -1, comm, nullptr), vigilInvalidArgument);
    EXPECT_NE(std::string(vigilGetLastError(comm)).find("VG-API-022"), std::string::npos) << vigilGetLastError(comm);
    EXPECT_EQ(vigilRecvTag(&v, 1, vigilInt32, 1 - rank, -7, comm, nullptr, nullptr), vigilInvalidArgument);
    EXPECT_NE(std::string(vigilGetLastError(comm)).find("VG-API-022"), std::string::npos);
    EXPECT_EQ(vigilRecvTag(&v, 1, vigilInt32, 2, 0, comm, nullptr, nullptr), vigilInvalidArgument);
    EXPECT_NE(std::string(vigilGetLastError(comm)).find("VG-API-005"), std::string::npos) << vigilGetLastError(comm);
    ASSERT_EQ(vigilGroupStart(), vigilSuccess);
    EXPECT_EQ(vigilRecvTag(&v, 1, vigilInt32, VIGIL_ANY_SOURCE, 0, comm, nullptr, nullptr), vigilInvalidArgument);
    EXPECT_NE(std::string(vigilGetLastError(comm)).find("VG-API-022"), std::string::npos);
    EXPECT_EQ(
        vigilSendRecv(&v, 1, vigilInt32, 1 - rank, 0, &v, 1, vigilInt32, VIGIL_ANY_SOURCE, 0, comm, nullptr, nullptr),
        vigilInvalidArgument);
    EXPECT_NE(std::string(vigilGetLastError(comm)).find("VG-API-022: rank"), std::string::npos);
    EXPECT_NE(std::string(vigilGetLastError(comm)).find("source VIGIL_ANY_SOURCE inside a group"), std::string::npos)
        << vigilGetLastError(comm);
    ASSERT_EQ(vigilGroupEnd(), vigilSuccess);
    ASSERT_EQ(vigilBarrier(comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
  });
}

// A message larger than its receive, or of another data type: the receiver
// gets VG-OP-003 naming the sender, the tag and both sizes; the sender hears
// of it at its next call.
TEST(TaggedP2p, TooLargeOrOtherTypeFailsOnBothRanks) {
  for (const bool otherType : {false, true}) {
    runRanks(2, [&](int rank, vigilComm_t& comm) {
      std::vector<float> data(100, 1.0f);
      if (rank == 0) {
        ASSERT_EQ(vigilSendTag(data.data(), 100, vigilFloat32, 1, 3, comm, nullptr), vigilSuccess);
        EXPECT_NE(vigilBarrier(comm, nullptr), vigilSuccess);
        const std::string text = vigilGetLastError(comm);
        EXPECT_NE(text.find("VG-OP-003"), std::string::npos) << text;
        EXPECT_NE(text.find("tag 3"), std::string::npos) << text;
      } else {
        std::vector<float> got(200, -1.0f);
        const vigilResult_t rc = otherType ? vigilRecvTag(got.data(), 100, vigilInt32, 0, 3, comm, nullptr, nullptr)
                                           : vigilRecvTag(got.data(), 50, vigilFloat32, 0, 3, comm, nullptr, nullptr);
        EXPECT_EQ(rc, vigilMismatch);
        const std::string text = vigilGetLastError(comm);
        EXPECT_NE(text.find("VG-OP-003"), std::string::npos) << text;
        EXPECT_NE(text.find("rank 0's tagged message #0 (tag 3, 100 x float32)"), std::string::npos) << text;
        EXPECT_NE(text.find(otherType ? "data types differ" : "400 bytes, more than"), std::string::npos) << text;
        EXPECT_EQ(got[0], -1.0f) << "nothing written";
      }
    });
  }
}

// Between two ranks, a tagged receive that meets an untagged message is a
// mismatch that names both.
TEST(TaggedP2p, TaggedReceiveMeetsUntaggedSend) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    int32_t v = 5;
    if (rank == 0) {
      ASSERT_EQ(vigilSend(&v, 1, vigilInt32, 1, comm, nullptr), vigilSuccess);
      EXPECT_NE(vigilBarrier(comm, nullptr), vigilSuccess);
    } else {
      EXPECT_EQ(vigilRecvTag(&v, 1, vigilInt32, 0, 0, comm, nullptr, nullptr), vigilMismatch);
      const std::string text = vigilGetLastError(comm);
      EXPECT_NE(text.find("VG-OP-002"), std::string::npos) << text;
      EXPECT_NE(text.find("untagged message (vigilSend #0, 1 x int32)"), std::string::npos) << text;
    }
  });
}

// A sender that left the communicator after its message is out of a receive
// from any source; the receive waits for the others.
TEST(TaggedP2p, AnySourceOutlivesASenderThatLeft) {
  std::latch rank1Left(1);
  runRanks(3, [&](int rank, vigilComm_t& comm) {
    int32_t v = 10 + rank;
    if (rank == 1) {
      ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 0, 0, comm, nullptr), vigilSuccess);
      EXPECT_EQ(vigilCommDestroy(comm), vigilSuccess);
      comm = nullptr;
      rank1Left.count_down();
    } else if (rank == 2) {
      rank1Left.wait();
      ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 0, 0, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
    } else {
      std::set<int32_t> got;
      for (int i = 0; i < 2; ++i) {
        ASSERT_EQ(vigilRecvTag(&v, 1, vigilInt32, VIGIL_ANY_SOURCE, 0, comm, nullptr, nullptr), vigilSuccess)
            << vigilGetLastError(comm);
        got.insert(v);
      }
      EXPECT_EQ(got, (std::set<int32_t>{11, 12}));
    }
  });
}

// A tagged message that came and that no receive took is named at finalize.
TEST(TaggedP2p, KeptMessageNeverReceivedIsNamedAtFinalize) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    int32_t v = 3;
    if (rank == 0) {
      ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 1, 1, comm, nullptr), vigilSuccess);
      ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 1, 2, comm, nullptr), vigilSuccess);
      vigilCommFinalize(comm);  // may hear of rank 1's failure: either way rank 1 tells the story
    } else {
      ASSERT_EQ(vigilRecvTag(&v, 1, vigilInt32, 0, 2, comm, nullptr, nullptr), vigilSuccess);  // tag 1 is kept
      EXPECT_EQ(vigilCommFinalize(comm), vigilMismatch);
      const std::string text = vigilGetLastError(comm);
      EXPECT_NE(text.find("VG-OP-005"), std::string::npos) << text;
      EXPECT_NE(text.find("tagged send #0 (tag 1)"), std::string::npos) << text;
    }
  });
}

// A receive from any source that nobody answers times out with the ranks it waited for.
TEST(TaggedP2p, AnySourceTimesOutNamingThePeers) {
  std::latch timedOut(1);  // the silent ranks stay until rank 0 is done
  runRanks(
      3,
      [&](int rank, vigilComm_t& comm) {
        if (rank != 0) {
          timedOut.wait();
          return;
        }
        struct Done {
          std::latch& latch;
          ~Done() { latch.count_down(); }
        } done{timedOut};
        int32_t v = 0;
        EXPECT_EQ(vigilRecvTag(&v, 1, vigilInt32, VIGIL_ANY_SOURCE, 1, comm, nullptr, nullptr), vigilTimeout);
        const std::string text = vigilGetLastError(comm);
        EXPECT_NE(text.find("VG-OP-001"), std::string::npos) << text;
        EXPECT_NE(text.find("receiving from rank 1"), std::string::npos) << text;
        EXPECT_NE(text.find("receiving from rank 2"), std::string::npos) << text;
      },
      testConfig(1500));
}

}  // namespace
