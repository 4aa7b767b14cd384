// Non-blocking tagged point-to-point on thread-ranks: vigilIsendTag,
// vigilIrecvTag, vigilWait, vigilWaitAny, vigilTest. Both ranks receiving
// and sending messages larger than every buffer at once, receives from any
// source completed in any order, MPI's posting-order matching, a post from
// another thread that a blocked wait takes in, and the errors: a bad
// request, requests of two communicators in one wait, a request left at
// finalize, a message too large for its receive (on both ranks).
// Run over shared memory (default), sockets (tcp/) and UCX (ucx/).

#include <gtest/gtest.h>

#include <latch>
#include <set>
#include <string>
#include <thread>
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

class RequestRanks : public ::testing::TestWithParam<int> {};

// Every rank posts its receive from the left, then its send to the right, of
// messages larger than any socket or ring, and waits for both: each wait
// drains the incoming message while its own goes out, so none deadlocks.
TEST_P(RequestRanks, IrecvThenIsendLargerThanTheBuffers) {
  const int n = GetParam();
  constexpr size_t kCount = 2u << 20;  // 8 MiB
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    const std::vector<int32_t> out = pattern(kCount, rank);
    std::vector<int32_t> in(kCount, -1);
    vigilRequest_t reqs[2];
    ASSERT_EQ(vigilIrecvTag(in.data(), kCount, vigilInt32, left, 7, comm, &reqs[0]), vigilSuccess)
        << vigilGetLastError(comm);
    ASSERT_EQ(vigilIsendTag(out.data(), kCount, vigilInt32, right, 7, comm, &reqs[1]), vigilSuccess)
        << vigilGetLastError(comm);
    vigilStatus st{};
    ASSERT_EQ(vigilWait(&reqs[1], nullptr), vigilSuccess) << vigilGetLastError(comm);
    ASSERT_EQ(vigilWait(&reqs[0], &st), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(reqs[0], VIGIL_REQUEST_NULL);
    EXPECT_EQ(reqs[1], VIGIL_REQUEST_NULL);
    EXPECT_EQ(st.source, left);
    EXPECT_EQ(st.tag, 7);
    EXPECT_EQ(st.count, kCount);
    EXPECT_EQ(in, pattern(kCount, left));
  });
}

// MPI's most common pattern: irecv, then a blocking send, then wait. The
// blocking send progresses the pending receive, so the 8 MiB messages that
// every rank of the ring sends at once do not deadlock.
TEST_P(RequestRanks, IrecvThenBlockingSendLargerThanTheBuffers) {
  const int n = GetParam();
  constexpr size_t kCount = 2u << 20;
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    const std::vector<int32_t> out = pattern(kCount, rank);
    std::vector<int32_t> in(kCount, -1);
    vigilRequest_t req;
    ASSERT_EQ(vigilIrecvTag(in.data(), kCount, vigilInt32, left, 1, comm, &req), vigilSuccess);
    ASSERT_EQ(vigilSendTag(out.data(), kCount, vigilInt32, right, 1, comm, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    ASSERT_EQ(vigilWait(&req, nullptr), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(in, pattern(kCount, left));
    // A blocking receive beside a pending one: posting order still decides.
    int32_t first = -1, second = -1;
    ASSERT_EQ(vigilIrecvTag(&first, 1, vigilInt32, left, 2, comm, &req), vigilSuccess);
    const int32_t values[2] = {rank * 10, rank * 10 + 1};
    for (const int32_t& v : values) ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, right, 2, comm, nullptr), vigilSuccess);
    ASSERT_EQ(vigilRecvTag(&second, 1, vigilInt32, left, 2, comm, nullptr, nullptr), vigilSuccess)
        << vigilGetLastError(comm);
    ASSERT_EQ(vigilWait(&req, nullptr), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(first, left * 10);
    EXPECT_EQ(second, left * 10 + 1);
  });
}

// Rank 0 posts one receive from any source per peer and completes them with
// vigilWaitAny; each status names its sender, whose data it holds.
TEST_P(RequestRanks, AnySourceWithWaitAny) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    if (rank != 0) {
      const std::vector<int32_t> data = pattern(static_cast<size_t>(rank) * 100, rank);
      vigilRequest_t req;
      ASSERT_EQ(vigilIsendTag(data.data(), data.size(), vigilInt32, 0, rank, comm, &req), vigilSuccess);
      ASSERT_EQ(vigilWait(&req, nullptr), vigilSuccess) << vigilGetLastError(comm);
      return;
    }
    std::vector<std::vector<int32_t>> got(n, std::vector<int32_t>(1000, -1));
    std::vector<vigilRequest_t> reqs(n - 1);
    for (int i = 0; i < n - 1; ++i) {
      ASSERT_EQ(vigilIrecvTag(got[i].data(), 1000, vigilInt32, VIGIL_ANY_SOURCE, VIGIL_ANY_TAG, comm, &reqs[i]),
                vigilSuccess);
    }
    std::set<int> sources, completed;
    for (int done = 0; done < n - 1;) {
      int index = -2;
      vigilStatus st{};
      ASSERT_EQ(vigilWaitAny(n - 1, reqs.data(), &index, &st), vigilSuccess) << vigilGetLastError(comm);
      if (index < 0) continue;  // woken: nothing was posted here, but a wait may say so once
      ++done;
      EXPECT_TRUE(completed.insert(index).second) << "request " << index << " completed twice";
      EXPECT_EQ(reqs[index], VIGIL_REQUEST_NULL);
      ASSERT_GE(st.source, 1);
      EXPECT_EQ(st.tag, st.source);
      EXPECT_EQ(st.count, static_cast<size_t>(st.source) * 100);
      const std::vector<int32_t> want = pattern(st.count, st.source);
      EXPECT_TRUE(std::equal(want.begin(), want.end(), got[index].begin())) << "from " << st.source;
      sources.insert(st.source);
    }
    EXPECT_EQ(sources.size(), static_cast<size_t>(n - 1));
    int index = -2;
    ASSERT_EQ(vigilWaitAny(n - 1, reqs.data(), &index, nullptr), vigilSuccess);  // all NULL: none active
    EXPECT_EQ(index, -1);
  });
}

// vigilSendRecv from any source (its send and receive as two requests): a
// ring of 1 MiB messages where every rank sends first, blocking and on a stream.
TEST_P(RequestRanks, SendRecvFromAnySource) {
  const int n = GetParam();
  constexpr size_t kCount = 1u << 18;
  runRanks(n, [&](int rank, vigilComm_t& comm) {
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    const std::vector<int32_t> out = pattern(kCount, rank);
    std::vector<int32_t> in(kCount, -1);
    vigilStatus st{};
    ASSERT_EQ(vigilSendRecv(out.data(), kCount, vigilInt32, right, rank, in.data(), kCount, vigilInt32,
                            VIGIL_ANY_SOURCE, VIGIL_ANY_TAG, comm, &st, nullptr),
              vigilSuccess)
        << vigilGetLastError(comm);
    EXPECT_EQ(st.source, left);
    EXPECT_EQ(st.tag, left);
    EXPECT_EQ(in, pattern(kCount, left));
    vigilStream_t stream = nullptr;
    ASSERT_EQ(vigilStreamCreate(&stream), vigilSuccess);
    std::vector<int32_t> again(kCount, -1);
    vigilStatus st2{};
    ASSERT_EQ(vigilSendRecv(out.data(), kCount, vigilInt32, right, 3, again.data(), kCount, vigilInt32,
                            VIGIL_ANY_SOURCE, 3, comm, &st2, stream),
              vigilSuccess)
        << vigilGetLastError(comm);
    ASSERT_EQ(vigilStreamSynchronize(stream), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(st2.source, left);
    EXPECT_EQ(again, pattern(kCount, left));
    ASSERT_EQ(vigilStreamDestroy(stream), vigilSuccess);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, RequestRanks, ::testing::Values(2, 3, 5));

// MPI's rule: a message goes to the first posted receive that matches it,
// receives posted by source, by any source, by tag and by any tag alike.
TEST(Requests, MessagesMatchReceivesInPostingOrder) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    if (rank == 1) {
      ASSERT_EQ(vigilBarrier(comm, nullptr), vigilSuccess);  // rank 0 posted everything
      for (int32_t v = 0; v < 4; ++v) ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 0, 2, comm, nullptr), vigilSuccess);
      const int32_t three = 30, five = 50;
      ASSERT_EQ(vigilSendTag(&three, 1, vigilInt32, 0, 3, comm, nullptr), vigilSuccess);
      ASSERT_EQ(vigilSendTag(&five, 1, vigilInt32, 0, 5, comm, nullptr), vigilSuccess);
      return;
    }
    int32_t got[6] = {-1, -1, -1, -1, -1, -1};
    vigilRequest_t reqs[6];
    // Tag 2 from any source, from rank 1, any source, rank 1: the four tag-2
    // messages fill them in posting order.
    const int sources[4] = {VIGIL_ANY_SOURCE, 1, VIGIL_ANY_SOURCE, 1};
    for (int i = 0; i < 4; ++i)
      ASSERT_EQ(vigilIrecvTag(&got[i], 1, vigilInt32, sources[i], 2, comm, &reqs[i]), vigilSuccess);
    // Tag 5, then any tag: the tag-3 message skips the first, which the tag-5 one fills.
    ASSERT_EQ(vigilIrecvTag(&got[4], 1, vigilInt32, VIGIL_ANY_SOURCE, 5, comm, &reqs[4]), vigilSuccess);
    ASSERT_EQ(vigilIrecvTag(&got[5], 1, vigilInt32, 1, VIGIL_ANY_TAG, comm, &reqs[5]), vigilSuccess);
    ASSERT_EQ(vigilBarrier(comm, nullptr), vigilSuccess);
    vigilStatus st[6]{};
    for (int i = 5; i >= 0; --i) ASSERT_EQ(vigilWait(&reqs[i], &st[i]), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(got[0], 0);
    EXPECT_EQ(got[1], 1);
    EXPECT_EQ(got[2], 2);
    EXPECT_EQ(got[3], 3);
    EXPECT_EQ(got[4], 50);
    EXPECT_EQ(got[5], 30);
    EXPECT_EQ(st[5].tag, 3);
    EXPECT_EQ(st[4].tag, 5);
    for (const vigilStatus& s : st) EXPECT_EQ(s.source, 1);
  });
}

// Rank 0 waits for a reply that rank 1 sends only after rank 0's message,
// which another thread of rank 0 posts while the wait is blocked: the post
// wakes the wait, which sends the message and then takes the reply.
TEST(Requests, PostFromAnotherThreadWakesABlockedWait) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    int32_t v = -1;
    if (rank == 1) {
      ASSERT_EQ(vigilRecvTag(&v, 1, vigilInt32, 0, 1, comm, nullptr, nullptr), vigilSuccess) << vigilGetLastError(comm);
      ++v;
      ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 0, 2, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
      return;
    }
    int32_t reply = -1;
    vigilRequest_t recv;
    ASSERT_EQ(vigilIrecvTag(&reply, 1, vigilInt32, 1, 2, comm, &recv), vigilSuccess);
    std::latch waiting(1);
    int32_t message = 41;
    vigilRequest_t send = VIGIL_REQUEST_NULL;
    std::thread poster([&] {
      waiting.wait();
      EXPECT_EQ(vigilIsendTag(&message, 1, vigilInt32, 1, 1, comm, &send), vigilSuccess) << vigilGetLastError(comm);
    });
    waiting.count_down();
    int index = -1;
    while (recv != VIGIL_REQUEST_NULL) {
      ASSERT_EQ(vigilWaitAny(1, &recv, &index, nullptr), vigilSuccess) << vigilGetLastError(comm);
    }
    poster.join();
    EXPECT_EQ(index, 0);
    EXPECT_EQ(reply, 42);
    ASSERT_EQ(vigilWait(&send, nullptr), vigilSuccess) << vigilGetLastError(comm);
  });
}

// vigilTest takes what is there and never waits for a message.
TEST(Requests, TestDoesNotWait) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    int32_t v = rank == 0 ? 5 : -1;
    vigilRequest_t req;
    if (rank == 1) {
      ASSERT_EQ(vigilIrecvTag(&v, 1, vigilInt32, 0, 3, comm, &req), vigilSuccess);
      int flag = -1;
      ASSERT_EQ(vigilTest(&req, &flag, nullptr), vigilSuccess) << vigilGetLastError(comm);
      EXPECT_EQ(flag, 0);  // rank 0 sends only after the barrier
      EXPECT_NE(req, VIGIL_REQUEST_NULL);
    }
    ASSERT_EQ(vigilBarrier(comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
    if (rank == 0) {
      ASSERT_EQ(vigilIsendTag(&v, 1, vigilInt32, 1, 3, comm, &req), vigilSuccess);
    }
    ASSERT_EQ(vigilWait(&req, nullptr), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(v, 5);
  });
}

// A request to the rank itself completes from the message kept at the post.
TEST(Requests, ToItself) {
  runRanks(1, [&](int, vigilComm_t& comm) {
    const int32_t out[3] = {1, 2, 3};
    int32_t in[3] = {};
    vigilRequest_t reqs[2];
    ASSERT_EQ(vigilIrecvTag(in, 3, vigilInt32, 0, 9, comm, &reqs[0]), vigilSuccess);
    ASSERT_EQ(vigilIsendTag(out, 3, vigilInt32, 0, 9, comm, &reqs[1]), vigilSuccess);
    vigilStatus st{};
    ASSERT_EQ(vigilWait(&reqs[0], &st), vigilSuccess) << vigilGetLastError(comm);
    ASSERT_EQ(vigilWait(&reqs[1], nullptr), vigilSuccess) << vigilGetLastError(comm);
    EXPECT_EQ(st.source, 0);
    EXPECT_EQ(in[2], 3);
  });
}

TEST(Requests, BadRequestsAreRefused) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    vigilRequest_t none = VIGIL_REQUEST_NULL;
    EXPECT_EQ(vigilWait(&none, nullptr), vigilInvalidArgument);
    std::string text = vigilGetLastError(nullptr);
    EXPECT_NE(text.find("VG-API-024"), std::string::npos) << text;
    EXPECT_NE(text.find("VIGIL_REQUEST_NULL"), std::string::npos) << text;
    EXPECT_EQ(vigilWait(nullptr, nullptr), vigilInvalidArgument);
    // Requests of two communicators in one vigilWaitAny.
    vigilComm_t other = nullptr;
    ASSERT_EQ(vigilCommSplit(comm, 0, rank, &other), vigilSuccess) << vigilGetLastError(comm);
    int32_t a = -1, b = -1;
    vigilRequest_t reqs[2];
    ASSERT_EQ(vigilIrecvTag(&a, 1, vigilInt32, 1 - rank, 1, comm, &reqs[0]), vigilSuccess);
    ASSERT_EQ(vigilIrecvTag(&b, 1, vigilInt32, 1 - rank, 1, other, &reqs[1]), vigilSuccess);
    int index = -2;
    EXPECT_EQ(vigilWaitAny(2, reqs, &index, nullptr), vigilInvalidArgument);
    text = vigilGetLastError(nullptr);
    EXPECT_NE(text.find("VG-API-024"), std::string::npos) << text;
    EXPECT_NE(text.find("requests[1] belongs to another communicator than requests[0]"), std::string::npos) << text;
    // Nothing was lost: both complete.
    const int32_t v = rank;
    ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 1 - rank, 1, comm, nullptr), vigilSuccess);
    ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 1 - rank, 1, other, nullptr), vigilSuccess);
    ASSERT_EQ(vigilWait(&reqs[0], nullptr), vigilSuccess) << vigilGetLastError(comm);
    ASSERT_EQ(vigilWait(&reqs[1], nullptr), vigilSuccess) << vigilGetLastError(other);
    EXPECT_EQ(a, 1 - rank);
    EXPECT_EQ(b, 1 - rank);
    EXPECT_EQ(vigilCommDestroy(other), vigilSuccess);
  });
}

// A message larger than its receive fails on both ranks, naming both sides.
TEST(Requests, TooLargeFailsOnBothRanks) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    int32_t data[8] = {};
    vigilRequest_t req;
    if (rank == 0) {
      ASSERT_EQ(vigilIsendTag(data, 8, vigilInt32, 1, 4, comm, &req), vigilSuccess);
    } else {
      ASSERT_EQ(vigilIrecvTag(data, 4, vigilInt32, 0, 4, comm, &req), vigilSuccess);
    }
    const vigilResult_t r = vigilWait(&req, nullptr);
    const std::string text = vigilGetLastError(comm);
    EXPECT_EQ(req, VIGIL_REQUEST_NULL);  // it can never complete: freed
    if (rank == 1) {
      EXPECT_EQ(r, vigilMismatch);
      EXPECT_NE(text.find("VG-OP-003"), std::string::npos) << text;
      EXPECT_NE(text.find("holds 32 bytes, more than this rank's tagged receive from rank 0 (tag 4, up to 4 x int32)"),
                std::string::npos)
          << text;
    } else {
      // The sender's send may have left before the receiver judged it: then
      // its next call hears of the failure.
      if (r == vigilSuccess) {
        EXPECT_NE(vigilBarrier(comm, nullptr), vigilSuccess);
      }
      const std::string later = vigilGetLastError(comm);
      EXPECT_NE(later.find("VG-OP-003"), std::string::npos) << later;
    }
  });
}

// Finalize with a request not complete names it, and its peer hears of it.
TEST(Requests, PendingAtFinalizeIsNamed) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    if (rank == 0) {
      EXPECT_NE(vigilCommFinalize(comm), vigilSuccess);
      const std::string text = vigilGetLastError(comm);
      EXPECT_NE(text.find("VG-OP-006"), std::string::npos) << text;
      return;
    }
    int32_t v = -1;
    vigilRequest_t req;
    ASSERT_EQ(vigilIrecvTag(&v, 1, vigilInt32, 0, 6, comm, &req), vigilSuccess);
    EXPECT_EQ(vigilCommFinalize(comm), vigilInvalidUsage);
    const std::string text = vigilGetLastError(comm);
    EXPECT_NE(text.find("VG-OP-006"), std::string::npos) << text;
    EXPECT_NE(text.find("1 request(s) of this rank were not complete at vigilCommFinalize, the first a vigilIrecvTag: "
                        "a tagged receive from rank 0 (tag 6, up to 1 x int32): its buffer was never filled"),
              std::string::npos)
        << text;
    EXPECT_EQ(vigilRequestFree(&req), vigilSuccess);  // it can never complete now: only the handle goes
    EXPECT_EQ(req, VIGIL_REQUEST_NULL);
    EXPECT_EQ(vigilRequestFree(&req), vigilInvalidArgument);
  });
}

// A request freed while pending still completes (in a later wait on its communicator).
TEST(Requests, FreedWhilePendingStillCompletes) {
  runRanks(2, [&](int rank, vigilComm_t& comm) {
    int32_t v = rank == 0 ? 77 : -1;
    if (rank == 0) {
      vigilRequest_t req;
      ASSERT_EQ(vigilIsendTag(&v, 1, vigilInt32, 1, 8, comm, &req), vigilSuccess);
      ASSERT_EQ(vigilRequestFree(&req), vigilSuccess);
      EXPECT_EQ(req, VIGIL_REQUEST_NULL);
      // A wait on another request progresses the freed send too.
      int32_t reply = -1;
      ASSERT_EQ(vigilIrecvTag(&reply, 1, vigilInt32, 1, 9, comm, &req), vigilSuccess);
      ASSERT_EQ(vigilWait(&req, nullptr), vigilSuccess) << vigilGetLastError(comm);
      EXPECT_EQ(reply, 78);
    } else {
      ASSERT_EQ(vigilRecvTag(&v, 1, vigilInt32, 0, 8, comm, nullptr, nullptr), vigilSuccess) << vigilGetLastError(comm);
      ++v;
      ASSERT_EQ(vigilSendTag(&v, 1, vigilInt32, 0, 9, comm, nullptr), vigilSuccess) << vigilGetLastError(comm);
    }
  });
}

}  // namespace
