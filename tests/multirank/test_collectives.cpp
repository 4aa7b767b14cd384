// Every collective against a reference, on thread-ranks over real sockets:
// rank counts 1, 2, 3, 4, 7, 8; sizes 0, 1, odd, several blocks, and one
// large; all data types and reductions; in-place and out-of-place.

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "common/thread_ranks.hpp"
#include "common/typed_values.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::test {
namespace {

class Collectives : public ::testing::TestWithParam<int> {};

// The reduction of every rank's input, folded in rank order; exact inputs
// make this equal to any other order.
std::vector<uint8_t> reference(vigilDataType_t t, vigilRedOp_t op, int n, size_t count, size_t offset = 0) {
  std::vector<uint8_t> acc = bytesOf(t, count), next = bytesOf(t, count);
  for (size_t i = 0; i < count; ++i) storeValue(t, acc.data(), i, inputValue(op, 0, offset + i));
  for (int r = 1; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) storeValue(t, next.data(), i, inputValue(op, r, offset + i));
    reduce::reduceInPlace(acc.data(), next.data(), count, t, op);
  }
  if (op == vigilAvg) reduce::divideInPlace(acc.data(), count, t, n);
  return acc;
}

std::vector<uint8_t> input(vigilDataType_t t, vigilRedOp_t op, int rank, size_t count, size_t offset = 0) {
  std::vector<uint8_t> v = bytesOf(t, count);
  for (size_t i = 0; i < count; ++i) storeValue(t, v.data(), i, inputValue(op, rank, offset + i));
  return v;
}

// A byte pattern unique to (rank, index), for data-movement collectives.
std::vector<uint8_t> pattern(int rank, size_t bytes, size_t salt = 0) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i) v[i] = static_cast<uint8_t>((static_cast<size_t>(rank) * 131 + i * 7 + salt) % 251);
  return v;
}

std::vector<size_t> sizesFor(int n) { return {0, 1, 5, static_cast<size_t>(3 * n + 2), 1000}; }

#define EXPECT_OK(call, comm) EXPECT_EQ((call), vigilSuccess) << vigilGetLastError(comm)

TEST_P(Collectives, AllReduceEveryTypeOpAndSize) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t comm) {
    for (vigilDataType_t t : kAllTypes) {
      for (vigilRedOp_t op : kAllOps) {
        for (size_t count : sizesFor(n)) {
          std::vector<uint8_t> in = input(t, op, rank, count), out = bytesOf(t, count);
          EXPECT_OK(vigilAllReduce(in.data(), out.data(), count, t, op, comm, nullptr), comm);
          EXPECT_EQ(out, reference(t, op, n, count)) << dtypeName(t) << " " << redOpName(op) << " count " << count;
          // In place.
          EXPECT_OK(vigilAllReduce(in.data(), in.data(), count, t, op, comm, nullptr), comm);
          EXPECT_EQ(in, out) << "in-place " << dtypeName(t) << " " << redOpName(op) << " count " << count;
        }
      }
    }
  });
}

TEST_P(Collectives, ReduceToEveryRoot) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t comm) {
    for (int root = 0; root < n; ++root) {
      for (vigilDataType_t t : {vigilFloat32, vigilInt64, vigilBfloat16, vigilUint8}) {
        for (vigilRedOp_t op : kAllOps) {
          const size_t count = 2 * static_cast<size_t>(n) + 3;
          std::vector<uint8_t> in = input(t, op, rank, count), out = bytesOf(t, count);
          std::vector<uint8_t> before = in;
          EXPECT_OK(vigilReduce(in.data(), rank == root ? out.data() : nullptr, count, t, op, root, comm, nullptr),
                    comm);
          EXPECT_EQ(in, before) << "the send buffer must not change";
          if (rank == root) {
          EXPECT_EQ(out, reference(t, op, n, count)) << dtypeName(t) << " root " << root;
        }
          // In place at the root.
          EXPECT_OK(vigilReduce(in.data(), rank == root ? in.data() : nullptr, count, t, op, root, comm, nullptr), comm);
          if (rank == root) {
          EXPECT_EQ(in, reference(t, op, n, count)) << "in-place root " << root;
        }
        }
      }
    }
  });
}

TEST_P(Collectives, ReduceScatterEveryTypeAndOp) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t comm) {
    for (vigilDataType_t t : kAllTypes) {
      for (vigilRedOp_t op : kAllOps) {
        for (size_t recvcount : {size_t{0}, size_t{1}, size_t{5}, size_t{333}}) {
          const size_t total = recvcount * static_cast<size_t>(n);
          std::vector<uint8_t> in = input(t, op, rank, total), out = bytesOf(t, recvcount);
          const std::vector<uint8_t> want = reference(t, op, n, recvcount, recvcount * static_cast<size_t>(rank));
          EXPECT_OK(vigilReduceScatter(in.data(), out.data(), recvcount, t, op, comm, nullptr), comm);
          EXPECT_EQ(out, want) << dtypeName(t) << " " << redOpName(op) << " recvcount " << recvcount;
          // In place: recvbuff = sendbuff + rank * recvcount.
          uint8_t* mine = in.data() + static_cast<size_t>(rank) * recvcount * dtypeSize(t);
          EXPECT_OK(vigilReduceScatter(in.data(), mine, recvcount, t, op, comm, nullptr), comm);
          EXPECT_EQ(std::vector<uint8_t>(mine, mine + recvcount * dtypeSize(t)), want) << "in-place";
        }
      }
    }
  });
}

TEST_P(Collectives, BroadcastFromEveryRoot) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t comm) {
    for (int root = 0; root < n; ++root) {
      for (size_t bytes : {size_t{0}, size_t{1}, size_t{17}, size_t{100003}}) {
        std::vector<uint8_t> data = rank == root ? pattern(root, bytes) : std::vector<uint8_t>(bytes, 0xA5);
        std::vector<uint8_t> out(bytes, 0xA5);
        EXPECT_OK(vigilBroadcast(rank == root ? data.data() : nullptr, out.data(), bytes, vigilUint8, root, comm, nullptr),
                  comm);
        EXPECT_EQ(out, pattern(root, bytes)) << "root " << root << " bytes " << bytes;
        EXPECT_OK(vigilBroadcast(data.data(), data.data(), bytes, vigilUint8, root, comm, nullptr), comm);
        EXPECT_EQ(data, pattern(root, bytes)) << "in-place root " << root;
      }
    }
  });
}

TEST_P(Collectives, AllGatherInAndOutOfPlace) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t comm) {
    for (vigilDataType_t t : {vigilUint8, vigilFloat16, vigilInt32, vigilFloat64}) {
      for (size_t count : sizesFor(n)) {
        const size_t block = count * dtypeSize(t);
        std::vector<uint8_t> want;
        for (int r = 0; r < n; ++r) {
          auto p = pattern(r, block);
          want.insert(want.end(), p.begin(), p.end());
        }
        std::vector<uint8_t> out(block * static_cast<size_t>(n), 0xA5);
        std::vector<uint8_t> mine = pattern(rank, block);
        EXPECT_OK(vigilAllGather(mine.data(), out.data(), count, t, comm, nullptr), comm);
        EXPECT_EQ(out, want) << dtypeName(t) << " count " << count;
        std::vector<uint8_t> inPlace(block * static_cast<size_t>(n), 0xA5);
        if (block) std::memcpy(inPlace.data() + static_cast<size_t>(rank) * block, mine.data(), block);
        EXPECT_OK(vigilAllGather(inPlace.data() + static_cast<size_t>(rank) * block, inPlace.data(), count, t, comm,
                                 nullptr),
                  comm);
        EXPECT_EQ(inPlace, want) << "in-place";
      }
    }
  });
}

TEST_P(Collectives, AllToAll) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t comm) {
    for (size_t count : sizesFor(n)) {
      const size_t block = count * 4;
      std::vector<uint8_t> in, want, out(block * static_cast<size_t>(n), 0xA5);
      for (int to = 0; to < n; ++to) {
        auto p = pattern(rank, block, static_cast<size_t>(to) * 1000);
        in.insert(in.end(), p.begin(), p.end());
      }
      for (int from = 0; from < n; ++from) {
        auto p = pattern(from, block, static_cast<size_t>(rank) * 1000);
        want.insert(want.end(), p.begin(), p.end());
      }
      EXPECT_OK(vigilAllToAll(in.data(), out.data(), count, vigilFloat32, comm, nullptr), comm);
      EXPECT_EQ(out, want) << "count " << count;
    }
  });
}

TEST_P(Collectives, AllToAllVUnevenCounts) {
  const int n = GetParam();
  const auto N = static_cast<size_t>(n);
  // Rank s sends (s + d) % 3 * 5 elements to rank d (some of them zero).
  auto countFor = [](size_t s, size_t d) { return (s + d) % 3 * 5; };
  runRanks(n, [&](int rank, vigilComm_t comm) {
    const auto me = static_cast<size_t>(rank);
    std::vector<size_t> sc(N), sd(N), rc(N), rd(N);
    size_t sTotal = 0, rTotal = 0;
    for (size_t p = 0; p < N; ++p) {
      sc[p] = countFor(me, p);
      sd[p] = sTotal + 1;  // gaps between blocks must stay untouched
      sTotal += sc[p] + 1;
      rc[p] = countFor(p, me);
      rd[p] = rTotal + 2;
      rTotal += rc[p] + 2;
    }
    std::vector<int64_t> in(sTotal, -1), out(rTotal, -7), want(rTotal, -7);
    for (size_t p = 0; p < N; ++p) {
      for (size_t i = 0; i < sc[p]; ++i) in[sd[p] + i] = static_cast<int64_t>(me * 1000000 + p * 1000 + i);
      for (size_t i = 0; i < rc[p]; ++i) want[rd[p] + i] = static_cast<int64_t>(p * 1000000 + me * 1000 + i);
    }
    EXPECT_OK(vigilAllToAllV(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), vigilInt64, comm,
                             nullptr),
              comm);
    EXPECT_EQ(out, want);
  });
}

TEST_P(Collectives, GatherAndScatterEveryRoot) {
  const int n = GetParam();
  const auto N = static_cast<size_t>(n);
  runRanks(n, [&](int rank, vigilComm_t comm) {
    for (int root = 0; root < n; ++root) {
      for (size_t bytes : {size_t{0}, size_t{3}, size_t{4096}}) {
        std::vector<uint8_t> all;
        for (int r = 0; r < n; ++r) {
          auto p = pattern(r, bytes, 9);
          all.insert(all.end(), p.begin(), p.end());
        }
        std::vector<uint8_t> mine = pattern(rank, bytes, 9), gathered(bytes * N, 0xA5);
        EXPECT_OK(vigilGather(mine.data(), rank == root ? gathered.data() : nullptr, bytes, vigilUint8, root, comm,
                              nullptr),
                  comm);
        if (rank == root) {
          EXPECT_EQ(gathered, all) << "gather root " << root;
        }
        std::vector<uint8_t> piece(bytes, 0xA5);
        EXPECT_OK(vigilScatter(rank == root ? all.data() : nullptr, piece.data(), bytes, vigilUint8, root, comm, nullptr),
                  comm);
        EXPECT_EQ(piece, mine) << "scatter root " << root;
      }
    }
  });
}

TEST_P(Collectives, BarrierAndLargeAllReduce) {
  const int n = GetParam();
  const size_t count = 4u << 20;  // 16 MiB of float32
  runRanks(n, [&](int rank, vigilComm_t comm) {
    EXPECT_OK(vigilBarrier(comm, nullptr), comm);
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 1000));
    EXPECT_OK(vigilAllReduce(data.data(), data.data(), count, vigilFloat32, vigilSum, comm, nullptr), comm);
    const float ranksSum = static_cast<float>(n * (n + 1) / 2);
    size_t wrong = 0;
    for (size_t i = 0; i < count; ++i) wrong += data[i] != ranksSum * static_cast<float>(i % 1000);
    EXPECT_EQ(wrong, 0u);
    EXPECT_OK(vigilBarrier(comm, nullptr), comm);
  });
}

TEST_P(Collectives, PointToPointRingAndGroupedBatch) {
  const int n = GetParam();
  runRanks(n, [&](int rank, vigilComm_t comm) {
    if (n == 1) {  // there is no peer: sending to oneself is refused with an id
      int x = 0;
      EXPECT_EQ(vigilSend(&x, 1, vigilInt32, 0, comm, nullptr), vigilInvalidArgument);
      EXPECT_NE(std::string(vigilGetLastError(comm)).find("VG-API-005"), std::string::npos);
      return;
    }
    const int right = (rank + 1) % n, left = (rank + n - 1) % n;
    // Four distinct buffers each way in one group: all must arrive exact.
    std::vector<std::vector<int32_t>> out(4), in(4);
    for (size_t b = 0; b < 4; ++b) {
      out[b].assign(1000 + b * 37, rank * 100 + static_cast<int32_t>(b));
      in[b].assign(1000 + b * 37, -1);
    }
    EXPECT_OK(vigilGroupStart(), comm);
    for (size_t b = 0; b < 4; ++b) {
      EXPECT_OK(vigilSend(out[b].data(), out[b].size(), vigilInt32, right, comm, nullptr), comm);
      EXPECT_OK(vigilRecv(in[b].data(), in[b].size(), vigilInt32, left, comm, nullptr), comm);
    }
    EXPECT_OK(vigilGroupEnd(), comm);
    for (size_t b = 0; b < 4; ++b) {
      EXPECT_EQ(in[b], std::vector<int32_t>(1000 + b * 37, left * 100 + static_cast<int32_t>(b))) << "buffer " << b;
    }
    // Blocking pairs: even ranks send first.
    double value = rank, got = -1;
    if (n % 2 == 0) {
      if (rank % 2 == 0) {
        EXPECT_OK(vigilSend(&value, 1, vigilFloat64, right, comm, nullptr), comm);
        EXPECT_OK(vigilRecv(&got, 1, vigilFloat64, left, comm, nullptr), comm);
      } else {
        EXPECT_OK(vigilRecv(&got, 1, vigilFloat64, left, comm, nullptr), comm);
        EXPECT_OK(vigilSend(&value, 1, vigilFloat64, right, comm, nullptr), comm);
      }
      EXPECT_EQ(got, left);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(RankCounts, Collectives, ::testing::Values(1, 2, 3, 4, 7, 8),
                         [](const auto& info) { return std::to_string(info.param) + "ranks"; });

}  // namespace
}  // namespace vigil::test
