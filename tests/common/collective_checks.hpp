#pragma once
// The collective checks, shared by the thread-rank tests (gtest) and the
// process-rank suite program: each runs on one rank, calls the C API and
// reports every wrong value or failed call through a Report.

#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "algo/algo.hpp"
#include "common/typed_values.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"
#include "transport/shm_layout.hpp"
#include "vigil/vigil.h"

namespace vigil::test {

struct Report {
  std::function<void(const std::string&)> fail;
  int checks = 0;
  template <class A, class B>
  void equal(const A& got, const B& want, const std::string& what) {
    ++checks;
    if (!(got == want)) fail(what + ": wrong values");
  }
  void ok(vigilResult_t rc, vigilComm_t comm, const std::string& what) {
    ++checks;
    if (rc != vigilSuccess) fail(what + ": " + vigilGetLastError(comm));
  }
};

template <class... Parts>
std::string describe(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

inline  // The reduction of every rank's input, folded in rank order; exact inputs
        // make this equal to any other order.
    std::vector<uint8_t>
    reference(vigilDataType_t t, vigilRedOp_t op, int n, size_t count, size_t offset = 0) {
  std::vector<uint8_t> acc = bytesOf(t, count), next = bytesOf(t, count);
  for (size_t i = 0; i < count; ++i) storeValue(t, acc.data(), i, inputValue(op, 0, offset + i));
  for (int r = 1; r < n; ++r) {
    for (size_t i = 0; i < count; ++i) storeValue(t, next.data(), i, inputValue(op, r, offset + i));
    reduce::reduceInPlace(acc.data(), next.data(), count, t, op);
  }
  if (op == vigilAvg) reduce::divideInPlace(acc.data(), count, t, n);
  return acc;
}

inline std::vector<uint8_t> input(vigilDataType_t t, vigilRedOp_t op, int rank, size_t count, size_t offset = 0) {
  std::vector<uint8_t> v = bytesOf(t, count);
  for (size_t i = 0; i < count; ++i) storeValue(t, v.data(), i, inputValue(op, rank, offset + i));
  return v;
}

// A byte pattern unique to (rank, index), for data-movement collectives.
inline std::vector<uint8_t> pattern(int rank, size_t bytes, size_t salt = 0) {
  std::vector<uint8_t> v(bytes);
  for (size_t i = 0; i < bytes; ++i)
    v[i] = static_cast<uint8_t>((static_cast<size_t>(rank) * 131 + i * 7 + salt) % 251);
  return v;
}

inline std::vector<size_t> sizesFor(int n) {
  return {0, 1, 5, static_cast<size_t>(3 * n + 2), 1000};
}

inline void checkAllReduceEveryTypeOpAndSize(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
  for (vigilDataType_t t : kAllTypes) {
    for (vigilRedOp_t op : kAllOps) {
      for (size_t count : sizesFor(n)) {
        std::vector<uint8_t> in = input(t, op, rank, count), out = bytesOf(t, count);
        report.ok(vigilAllReduce(in.data(), out.data(), count, t, op, comm, nullptr), comm,
                  "AllReduceEveryTypeOpAndSize");
        report.equal(out, reference(t, op, n, count),
                     describe("AllReduceEveryTypeOpAndSize ", dtypeName(t), " ", redOpName(op), " count ", count));
        // In place.
        report.ok(vigilAllReduce(in.data(), in.data(), count, t, op, comm, nullptr), comm,
                  "AllReduceEveryTypeOpAndSize");
        report.equal(
            in, out,
            describe("AllReduceEveryTypeOpAndSize ", "in-place ", dtypeName(t), " ", redOpName(op), " count ", count));
      }
    }
  }
}

inline void checkReduceToEveryRoot(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
  for (int root = 0; root < n; ++root) {
    for (vigilDataType_t t : {vigilFloat32, vigilInt64, vigilBfloat16, vigilUint8}) {
      for (vigilRedOp_t op : kAllOps) {
        const size_t count = 2 * static_cast<size_t>(n) + 3;
        std::vector<uint8_t> in = input(t, op, rank, count), out = bytesOf(t, count);
        std::vector<uint8_t> before = in;
        report.ok(vigilReduce(in.data(), rank == root ? out.data() : nullptr, count, t, op, root, comm, nullptr), comm,
                  "ReduceToEveryRoot");
        report.equal(in, before, describe("ReduceToEveryRoot ", "the send buffer must not change"));
        if (rank == root) {
          report.equal(out, reference(t, op, n, count), describe("ReduceToEveryRoot ", dtypeName(t), " root ", root));
        }
        // In place at the root.
        report.ok(vigilReduce(in.data(), rank == root ? in.data() : nullptr, count, t, op, root, comm, nullptr), comm,
                  "ReduceToEveryRoot");
        if (rank == root) {
          report.equal(in, reference(t, op, n, count), describe("ReduceToEveryRoot ", "in-place root ", root));
        }
      }
    }
  }
}

inline void checkReduceScatterEveryTypeAndOp(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
  for (vigilDataType_t t : kAllTypes) {
    for (vigilRedOp_t op : kAllOps) {
      for (size_t recvcount : {size_t{0}, size_t{1}, size_t{5}, size_t{333}}) {
        const size_t total = recvcount * static_cast<size_t>(n);
        std::vector<uint8_t> in = input(t, op, rank, total), out = bytesOf(t, recvcount);
        const std::vector<uint8_t> want = reference(t, op, n, recvcount, recvcount * static_cast<size_t>(rank));
        report.ok(vigilReduceScatter(in.data(), out.data(), recvcount, t, op, comm, nullptr), comm,
                  "ReduceScatterEveryTypeAndOp");
        report.equal(
            out, want,
            describe("ReduceScatterEveryTypeAndOp ", dtypeName(t), " ", redOpName(op), " recvcount ", recvcount));
        // In place: recvbuff = sendbuff + rank * recvcount.
        uint8_t* mine = in.data() + static_cast<size_t>(rank) * recvcount * dtypeSize(t);
        report.ok(vigilReduceScatter(in.data(), mine, recvcount, t, op, comm, nullptr), comm,
                  "ReduceScatterEveryTypeAndOp");
        report.equal(std::vector<uint8_t>(mine, mine + recvcount * dtypeSize(t)), want,
                     describe("ReduceScatterEveryTypeAndOp ", "in-place"));
      }
    }
  }
}

inline void checkBroadcastFromEveryRoot(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
  for (int root = 0; root < n; ++root) {
    for (size_t bytes : {size_t{0}, size_t{1}, size_t{17}, size_t{100003}}) {
      std::vector<uint8_t> data = rank == root ? pattern(root, bytes) : std::vector<uint8_t>(bytes, 0xA5);
      std::vector<uint8_t> out(bytes, 0xA5);
      report.ok(
          vigilBroadcast(rank == root ? data.data() : nullptr, out.data(), bytes, vigilUint8, root, comm, nullptr),
          comm, "BroadcastFromEveryRoot");
      report.equal(out, pattern(root, bytes), describe("BroadcastFromEveryRoot ", "root ", root, " bytes ", bytes));
      report.ok(vigilBroadcast(data.data(), data.data(), bytes, vigilUint8, root, comm, nullptr), comm,
                "BroadcastFromEveryRoot");
      report.equal(data, pattern(root, bytes), describe("BroadcastFromEveryRoot ", "in-place root ", root));
    }
  }
}

inline void checkAllGatherInAndOutOfPlace(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
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
      report.ok(vigilAllGather(mine.data(), out.data(), count, t, comm, nullptr), comm, "AllGatherInAndOutOfPlace");
      report.equal(out, want, describe("AllGatherInAndOutOfPlace ", dtypeName(t), " count ", count));
      std::vector<uint8_t> inPlace(block * static_cast<size_t>(n), 0xA5);
      if (block) std::memcpy(inPlace.data() + static_cast<size_t>(rank) * block, mine.data(), block);
      report.ok(
          vigilAllGather(inPlace.data() + static_cast<size_t>(rank) * block, inPlace.data(), count, t, comm, nullptr),
          comm, "AllGatherInAndOutOfPlace");
      report.equal(inPlace, want, describe("AllGatherInAndOutOfPlace ", "in-place"));
    }
  }
}

inline void checkAllToAll(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
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
    report.ok(vigilAllToAll(in.data(), out.data(), count, vigilFloat32, comm, nullptr), comm, "AllToAll");
    report.equal(out, want, describe("AllToAll ", "count ", count));
  }
}

inline void checkAllToAllVUnevenCounts(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
  const auto N = static_cast<size_t>(n);
  // Rank s sends (s + d) % 3 * 5 elements to rank d (some of them zero).
  auto countFor = [](size_t s, size_t d) { return (s + d) % 3 * 5; };
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
  report.ok(
      vigilAllToAllV(in.data(), sc.data(), sd.data(), out.data(), rc.data(), rd.data(), vigilInt64, comm, nullptr),
      comm, "AllToAllVUnevenCounts");
  report.equal(out, want, "AllToAllVUnevenCounts");
}

inline void checkGatherAndScatterEveryRoot(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
  const auto N = static_cast<size_t>(n);
  for (int root = 0; root < n; ++root) {
    for (size_t bytes : {size_t{0}, size_t{3}, size_t{4096}}) {
      std::vector<uint8_t> all;
      for (int r = 0; r < n; ++r) {
        auto p = pattern(r, bytes, 9);
        all.insert(all.end(), p.begin(), p.end());
      }
      std::vector<uint8_t> mine = pattern(rank, bytes, 9), gathered(bytes * N, 0xA5);
      report.ok(
          vigilGather(mine.data(), rank == root ? gathered.data() : nullptr, bytes, vigilUint8, root, comm, nullptr),
          comm, "GatherAndScatterEveryRoot");
      if (rank == root) {
        report.equal(gathered, all, describe("GatherAndScatterEveryRoot ", "gather root ", root));
      }
      std::vector<uint8_t> piece(bytes, 0xA5);
      report.ok(vigilScatter(rank == root ? all.data() : nullptr, piece.data(), bytes, vigilUint8, root, comm, nullptr),
                comm, "GatherAndScatterEveryRoot");
      report.equal(piece, mine, describe("GatherAndScatterEveryRoot ", "scatter root ", root));
    }
  }
}

inline void checkBarrierAndLargeAllReduce(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
  const size_t count = 4u << 20;  // 16 MiB of float32
  report.ok(vigilBarrier(comm, nullptr), comm, "BarrierAndLargeAllReduce");
  std::vector<float> data(count);
  for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>((rank + 1) * static_cast<int>(i % 1000));
  report.ok(vigilAllReduce(data.data(), data.data(), count, vigilFloat32, vigilSum, comm, nullptr), comm,
            "BarrierAndLargeAllReduce");
  const float ranksSum = static_cast<float>(n * (n + 1) / 2);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += data[i] != ranksSum * static_cast<float>(i % 1000);
  report.equal(wrong, 0u, "BarrierAndLargeAllReduce");
  report.ok(vigilBarrier(comm, nullptr), comm, "BarrierAndLargeAllReduce");
}

inline void checkPointToPointRingAndGroupedBatch(int rank, int n, vigilComm_t comm, Report& report) {
  (void)rank;
  if (n == 1) {  // there is no peer: a send to oneself outside a group has no receive to meet
    int x = 0;
    report.equal(vigilSend(&x, 1, vigilInt32, 0, comm, nullptr), vigilInvalidArgument,
                 "PointToPointRingAndGroupedBatch");
    report.equal(std::string(vigilGetLastError(comm)).find("VG-API-021") != std::string::npos, true,
                 "PointToPointRingAndGroupedBatch error id");
    return;
  }
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  // Four distinct buffers each way in one group: all must arrive exact.
  std::vector<std::vector<int32_t>> out(4), in(4);
  for (size_t b = 0; b < 4; ++b) {
    out[b].assign(1000 + b * 37, rank * 100 + static_cast<int32_t>(b));
    in[b].assign(1000 + b * 37, -1);
  }
  report.ok(vigilGroupStart(), comm, "PointToPointRingAndGroupedBatch");
  for (size_t b = 0; b < 4; ++b) {
    report.ok(vigilSend(out[b].data(), out[b].size(), vigilInt32, right, comm, nullptr), comm,
              "PointToPointRingAndGroupedBatch");
    report.ok(vigilRecv(in[b].data(), in[b].size(), vigilInt32, left, comm, nullptr), comm,
              "PointToPointRingAndGroupedBatch");
  }
  report.ok(vigilGroupEnd(), comm, "PointToPointRingAndGroupedBatch");
  for (size_t b = 0; b < 4; ++b) {
    report.equal(in[b], std::vector<int32_t>(1000 + b * 37, left * 100 + static_cast<int32_t>(b)),
                 describe("PointToPointRingAndGroupedBatch ", "buffer ", b));
  }
  // Blocking pairs: even ranks send first.
  double value = rank, got = -1;
  if (n % 2 == 0) {
    if (rank % 2 == 0) {
      report.ok(vigilSend(&value, 1, vigilFloat64, right, comm, nullptr), comm, "PointToPointRingAndGroupedBatch");
      report.ok(vigilRecv(&got, 1, vigilFloat64, left, comm, nullptr), comm, "PointToPointRingAndGroupedBatch");
    } else {
      report.ok(vigilRecv(&got, 1, vigilFloat64, left, comm, nullptr), comm, "PointToPointRingAndGroupedBatch");
      report.ok(vigilSend(&value, 1, vigilFloat64, right, comm, nullptr), comm, "PointToPointRingAndGroupedBatch");
    }
    report.equal(got, left, "PointToPointRingAndGroupedBatch");
  }
}

// Sizes on both sides of every chunk boundary of the shared-memory
// algorithms (and odd sizes the ring splits unevenly), float32 sum.
inline void checkChunkBoundaries(int rank, int n, vigilComm_t comm, Report& report) {
  const vigilDataType_t t = vigilFloat32;
  const size_t staged = shm::kStagingBytes / 4, perBlock = staged / static_cast<size_t>(n);
  const size_t small = algo::kSmallAllReduceBytes / 4, chunk = perBlock * static_cast<size_t>(n);
  for (size_t count : {small - 1, small, small + 1, chunk - 1, chunk + 1, 2 * chunk + 5}) {
    std::vector<uint8_t> in = input(t, vigilSum, rank, count), out = bytesOf(t, count);
    report.ok(vigilAllReduce(in.data(), out.data(), count, t, vigilSum, comm, nullptr), comm,
              describe("ChunkBoundaries allreduce count ", count));
    report.equal(out, reference(t, vigilSum, n, count), describe("ChunkBoundaries allreduce count ", count));
    report.ok(vigilAllReduce(in.data(), in.data(), count, t, vigilSum, comm, nullptr), comm,
              describe("ChunkBoundaries in-place allreduce count ", count));
    report.equal(in, out, describe("ChunkBoundaries in-place allreduce count ", count));
  }
  for (size_t count : {perBlock - 1, perBlock, perBlock + 1, 2 * perBlock + 3}) {
    // Reduce-scatter: block r of the input is rank r's result.
    const size_t total = count * static_cast<size_t>(n);
    std::vector<uint8_t> in = input(t, vigilSum, rank, total), out = bytesOf(t, count);
    report.ok(vigilReduceScatter(in.data(), out.data(), count, t, vigilSum, comm, nullptr), comm,
              describe("ChunkBoundaries reduce_scatter count ", count));
    report.equal(out, reference(t, vigilSum, n, count, static_cast<size_t>(rank) * count),
                 describe("ChunkBoundaries reduce_scatter count ", count));
    // All-to-all: block q of rank r's output is block r of rank q's input.
    const size_t bytes = count * 4;
    std::vector<uint8_t> send = pattern(rank, bytes * static_cast<size_t>(n)), recv(bytes * static_cast<size_t>(n));
    report.ok(vigilAllToAll(send.data(), recv.data(), count, t, comm, nullptr), comm,
              describe("ChunkBoundaries alltoall count ", count));
    bool same = true;
    for (int q = 0; q < n; ++q) {
      std::vector<uint8_t> theirs = pattern(q, bytes * static_cast<size_t>(n));
      same &= std::memcmp(recv.data() + static_cast<size_t>(q) * bytes,
                          theirs.data() + static_cast<size_t>(rank) * bytes, bytes) == 0;
    }
    report.equal(same, true, describe("ChunkBoundaries alltoall count ", count));
  }
  for (size_t count : {staged - 1, staged + 1, 2 * staged + 7}) {
    const size_t bytes = count * 4;
    std::vector<uint8_t> mine = pattern(rank, bytes, 3), all(bytes * static_cast<size_t>(n));
    report.ok(vigilAllGather(mine.data(), all.data(), count, t, comm, nullptr), comm,
              describe("ChunkBoundaries allgather count ", count));
    bool same = true;
    for (int q = 0; q < n; ++q) {
      same &= std::memcmp(all.data() + static_cast<size_t>(q) * bytes, pattern(q, bytes, 3).data(), bytes) == 0;
    }
    report.equal(same, true, describe("ChunkBoundaries allgather count ", count));
    const int root = n - 1;
    std::vector<uint8_t> data = rank == root ? pattern(root, bytes, 5) : std::vector<uint8_t>(bytes);
    report.ok(vigilBroadcast(data.data(), data.data(), count, t, root, comm, nullptr), comm,
              describe("ChunkBoundaries broadcast count ", count));
    report.equal(data, pattern(root, bytes, 5), describe("ChunkBoundaries broadcast count ", count));
  }
}

// Every check, in the same order on every rank.
inline void checkAll(int rank, int n, vigilComm_t comm, Report& report) {
  checkAllReduceEveryTypeOpAndSize(rank, n, comm, report);
  checkReduceToEveryRoot(rank, n, comm, report);
  checkReduceScatterEveryTypeAndOp(rank, n, comm, report);
  checkBroadcastFromEveryRoot(rank, n, comm, report);
  checkAllGatherInAndOutOfPlace(rank, n, comm, report);
  checkAllToAll(rank, n, comm, report);
  checkAllToAllVUnevenCounts(rank, n, comm, report);
  checkGatherAndScatterEveryRoot(rank, n, comm, report);
  checkBarrierAndLargeAllReduce(rank, n, comm, report);
  checkPointToPointRingAndGroupedBatch(rank, n, comm, report);
  checkChunkBoundaries(rank, n, comm, report);
}

}  // namespace vigil::test
