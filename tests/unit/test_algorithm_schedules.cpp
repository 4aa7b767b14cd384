// Every step algorithm of the table, without a transport: ranks are threads
// of this process and a step's messages move through memory (InMemoryRunner),
// so a schedule is checked on its own, on 1 to 9 ranks, for counts of 0, 1,
// odd and more than one pipeline piece, in place and out of place, for every
// data type and reduction. Values are exact (common/typed_values.hpp).

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "algo/table.hpp"
#include "common/collective_checks.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::test {
namespace {

// The messages in flight between the ranks of one test: one FIFO per
// (from, to) pair, as the data plane keeps messages to one peer in order.
// Sends are buffered, so a step never waits for its peer's receive.
class InMemoryFabric {
 public:
  void post(int from, int to, const void* data, size_t bytes) {
    const auto* p = static_cast<const uint8_t*>(data);
    std::lock_guard lock(mutex_);
    lanes_[{from, to}].emplace_back(p, p + bytes);
    arrived_.notify_all();
  }

  // The next message from `from` to `to`; throws when it does not come (a
  // schedule whose ends disagree) or when another rank failed.
  std::vector<uint8_t> take(int from, int to) {
    std::unique_lock lock(mutex_);
    std::deque<std::vector<uint8_t>>& lane = lanes_[{from, to}];
    const bool ready = arrived_.wait_for(lock, std::chrono::seconds(30), [&] { return !lane.empty() || broken_; });
    if (broken_) throw std::runtime_error("another rank failed");
    if (!ready) {
      broken_ = true;
      arrived_.notify_all();
      throw std::runtime_error("rank " + std::to_string(to) + " waited 30 s for a message from rank " +
                               std::to_string(from));
    }
    std::vector<uint8_t> message = std::move(lane.front());
    lane.pop_front();
    return message;
  }

  void breakDown() {
    std::lock_guard lock(mutex_);
    broken_ = true;
    arrived_.notify_all();
  }

  // Messages sent and never received: a schedule that sends more than its peer takes.
  size_t unread() {
    std::lock_guard lock(mutex_);
    size_t total = 0;
    for (const auto& [pair, lane] : lanes_) total += lane.size();
    return total;
  }

 private:
  std::mutex mutex_;
  std::condition_variable arrived_;
  std::map<std::pair<int, int>, std::deque<std::vector<uint8_t>>> lanes_;
  bool broken_ = false;
};

class InMemoryRunner final : public algo::StepRunner {
 public:
  InMemoryRunner(InMemoryFabric& fabric, int rank, int nranks) : fabric_(fabric), rank_(rank), nranks_(nranks) {}
  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }

  // Work runs only until every send is ready: the rest is left to the
  // caller, as a transport may leave it when the messages move fast.
  void exchange(std::span<const Transfer> transfers, ExchangeWork* work) override {
    auto waiting = [&] {
      return std::any_of(transfers.begin(), transfers.end(), [](const Transfer& t) { return t.waiting(); });
    };
    while (waiting() && work != nullptr && work->pending()) work->runOne();
    if (waiting()) throw std::runtime_error("rank " + std::to_string(rank_) + ": a send never became ready");
    for (const Transfer& t : transfers) {
      if (t.isSend) fabric_.post(rank_, t.peer, t.sendData, t.bytes);
    }
    for (const Transfer& t : transfers) {
      if (t.isSend) continue;
      std::vector<uint8_t> message = fabric_.take(t.peer, rank_);
      if (message.size() != t.bytes) {
        throw std::runtime_error("rank " + std::to_string(rank_) + " expected " + std::to_string(t.bytes) +
                                 " bytes from rank " + std::to_string(t.peer) + ", got " +
                                 std::to_string(message.size()));
      }
      if (t.bytes > 0) std::memcpy(t.recvData, message.data(), t.bytes);
    }
  }

  // Scratch holds garbage, as the communicator's may: a schedule must not
  // rely on what an earlier op left there.
  uint8_t* scratch(size_t bytes) override {
    if (scratch_.size() < bytes) scratch_.resize(bytes);
    std::fill(scratch_.begin(), scratch_.end(), uint8_t{0xA5});
    return scratch_.data();
  }

 private:
  InMemoryFabric& fabric_;
  const int rank_, nranks_;
  std::vector<uint8_t> scratch_;
};

// The in-place forms: the output inside the input (allreduce, broadcast:
// the same buffer; reduce-scatter: this rank's block of it), or the input
// inside the output (allgather: this rank's block of it).
enum class Alias { None, RecvInSend, SendInRecv };

// One op on one rank: its buffers and the output it must produce.
struct RankCase {
  std::vector<uint8_t> send, recv, want;
  Alias alias = Alias::None;
  size_t aliasOffset = 0;                                        // bytes into the outer buffer
  std::vector<size_t> sendcounts, sdispls, recvcounts, rdispls;  // the v-variants
  std::optional<size_t> count;                                   // this rank's own count, where it has one

  const void* sendBuffer() const {
    return alias == Alias::SendInRecv ? recv.data() + aliasOffset : static_cast<const void*>(send.data());
  }
  void* recvBuffer() { return alias == Alias::RecvInSend ? send.data() + aliasOffset : recv.data(); }
  // What the op left where its output is.
  std::vector<uint8_t> output() const {
    if (alias != Alias::RecvInSend) return recv;
    const auto begin = send.begin() + static_cast<long>(aliasOffset);
    return std::vector<uint8_t>(begin, begin + static_cast<long>(want.size()));
  }
};

struct Shape {
  vigilDataType_t dtype;
  vigilRedOp_t redop;
  size_t count;
  int root;
  bool inPlace;
};

// All-to-all-v: rank a sends rank b this many elements (uneven, some zero).
size_t pairCount(size_t count, int a, int b) {
  return count == 0 ? static_cast<size_t>((a + b) % 2) : count + static_cast<size_t>((a + 2 * b) % 3);
}

std::vector<uint8_t> concatPatterns(int n, size_t bytes) {
  std::vector<uint8_t> out;
  for (int q = 0; q < n; ++q) {
    std::vector<uint8_t> p = pattern(q, bytes);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

void buildAllToAllV(RankCase& c, const Shape& s, int rank, int n) {
  const size_t elem = dtypeSize(s.dtype);
  size_t sendTotal = 0, recvTotal = 0;
  for (int p = 0; p < n; ++p) {
    c.sendcounts.push_back(pairCount(s.count, rank, p));
    c.sdispls.push_back(sendTotal);
    sendTotal += c.sendcounts.back();
    c.recvcounts.push_back(pairCount(s.count, p, rank));
    c.rdispls.push_back(recvTotal);
    recvTotal += c.recvcounts.back();
  }
  for (int p = 0; p < n; ++p) {
    std::vector<uint8_t> toP = pattern(rank, c.sendcounts[static_cast<size_t>(p)] * elem, static_cast<size_t>(p));
    c.send.insert(c.send.end(), toP.begin(), toP.end());
    std::vector<uint8_t> fromP = pattern(p, c.recvcounts[static_cast<size_t>(p)] * elem, static_cast<size_t>(rank));
    c.want.insert(c.want.end(), fromP.begin(), fromP.end());
  }
  c.recv.assign(recvTotal * elem, 0xEE);
}

// The v-variants: rank p's block (uneven, some empty), one element of gap
// before each block in the many-block buffer.
size_t blockCount(size_t count, int p) {
  return count == 0 ? static_cast<size_t>(p % 2) : count + static_cast<size_t>(p % 3);
}

void buildVariable(RankCase& c, OpKind kind, const Shape& s, int rank, int n) {
  const size_t elem = dtypeSize(s.dtype), me = static_cast<size_t>(rank);
  std::vector<size_t> counts, displs;
  size_t total = 0, packed = 0;
  for (int p = 0; p < n; ++p) {
    counts.push_back(blockCount(s.count, p));
    total += 1;
    displs.push_back(total);
    total += counts.back();
    packed += counts.back();
  }
  if (kind == OpKind::ReduceScatterV) {
    size_t offset = 0;
    for (size_t p = 0; p < me; ++p) offset += counts[p];
    c.recvcounts = counts;
    c.send = input(s.dtype, s.redop, rank, packed);
    c.want = reference(s.dtype, s.redop, n, counts[me], offset);
    if (s.inPlace) {
      c.alias = Alias::RecvInSend;
      c.aliasOffset = offset * elem;
    } else {
      c.recv.assign(counts[me] * elem, 0xEE);
    }
    return;
  }
  // Every block in its place, gaps unwritten.
  std::vector<uint8_t> all(total * elem, 0xEE);
  for (int p = 0; p < n; ++p) {
    const std::vector<uint8_t> block = pattern(p, counts[static_cast<size_t>(p)] * elem);
    std::copy(block.begin(), block.end(), all.begin() + static_cast<long>(displs[static_cast<size_t>(p)] * elem));
  }
  const bool isRoot = rank == s.root;
  const std::vector<uint8_t> mine = pattern(rank, counts[me] * elem);
  c.count = counts[me];
  switch (kind) {
    case OpKind::AllGatherV:
      c.recvcounts = counts, c.rdispls = displs;
      c.want = all;
      c.recv.assign(total * elem, 0xEE);
      if (s.inPlace) {
        std::copy(mine.begin(), mine.end(), c.recv.begin() + static_cast<long>(displs[me] * elem));
        c.alias = Alias::SendInRecv;
        c.aliasOffset = displs[me] * elem;
      } else {
        c.send = mine;
      }
      break;
    case OpKind::GatherV:
      if (isRoot) c.recvcounts = counts, c.rdispls = displs;
      c.send = mine;
      c.recv.assign(isRoot ? total * elem : 0, 0xEE);
      c.want = isRoot ? all : c.recv;
      break;
    default:  // ScatterV
      if (isRoot) c.sendcounts = counts, c.sdispls = displs, c.send = all;
      c.recv.assign(counts[me] * elem, 0xEE);
      c.want = mine;
      break;
  }
}

// The reductions: inputs whose every reduction is exact, so any order gives the reference's bits.
void buildReduction(RankCase& c, OpKind kind, const Shape& s, int rank, int n) {
  const size_t nn = static_cast<size_t>(n), elem = dtypeSize(s.dtype);
  switch (kind) {
    case OpKind::AllReduce:
      c.send = input(s.dtype, s.redop, rank, s.count);
      c.recv = bytesOf(s.dtype, s.count);
      c.want = reference(s.dtype, s.redop, n, s.count);
      if (s.inPlace) c.alias = Alias::RecvInSend;
      break;
    case OpKind::Reduce:
      c.send = input(s.dtype, s.redop, rank, s.count);
      c.recv.assign(s.count * elem, 0xEE);
      c.want = rank == s.root ? reference(s.dtype, s.redop, n, s.count) : c.recv;
      break;
    case OpKind::ReduceScatter:
      c.send = input(s.dtype, s.redop, rank, s.count * nn);
      c.want = reference(s.dtype, s.redop, n, s.count, static_cast<size_t>(rank) * s.count);
      if (s.inPlace) {
        c.alias = Alias::RecvInSend;
        c.aliasOffset = static_cast<size_t>(rank) * s.count * elem;
      } else {
        c.recv = bytesOf(s.dtype, s.count);
      }
      break;
    case OpKind::Scan:
    case OpKind::Exscan:
      c.send = input(s.dtype, s.redop, rank, s.count);
      c.recv.assign(s.count * elem, 0xEE);
      if (kind == OpKind::Scan || rank > 0) {
        c.want = reference(s.dtype, s.redop, kind == OpKind::Scan ? rank + 1 : rank, s.count);
      } else {  // the reduction over no rank (test_v_collectives checks the values)
        c.want = bytesOf(s.dtype, s.count);
        reduce::fillIdentity(c.want.data(), s.count, s.dtype, s.redop == vigilAvg ? vigilSum : s.redop);
      }
      if (s.inPlace) c.alias = Alias::RecvInSend;
      break;
    default: break;
  }
}

RankCase buildCase(OpKind kind, const Shape& s, int rank, int n) {
  RankCase c;
  const size_t nn = static_cast<size_t>(n), bytes = s.count * dtypeSize(s.dtype);
  const auto self = static_cast<size_t>(rank) * bytes;
  switch (kind) {
    case OpKind::AllReduce:
    case OpKind::Reduce:
    case OpKind::ReduceScatter:
    case OpKind::Scan:
    case OpKind::Exscan: buildReduction(c, kind, s, rank, n); break;
    case OpKind::AllGatherV:
    case OpKind::GatherV:
    case OpKind::ScatterV:
    case OpKind::ReduceScatterV: buildVariable(c, kind, s, rank, n); break;
    case OpKind::Broadcast:
      c.send = rank == s.root ? pattern(s.root, bytes) : std::vector<uint8_t>(bytes, 0xEE);
      c.recv.assign(bytes, 0xEE);
      c.want = pattern(s.root, bytes);
      if (s.inPlace) c.alias = Alias::RecvInSend;
      break;
    case OpKind::AllGather:
      c.want = concatPatterns(n, bytes);
      c.recv.assign(bytes * nn, 0xEE);
      if (s.inPlace) {  // this rank's block is already in the output
        std::copy_n(c.want.begin() + static_cast<long>(self), bytes, c.recv.begin() + static_cast<long>(self));
        c.alias = Alias::SendInRecv;
        c.aliasOffset = self;
      } else {
        c.send = pattern(rank, bytes);
      }
      break;
    case OpKind::AllToAll:
      c.send = pattern(rank, bytes * nn);
      c.recv.assign(bytes * nn, 0xEE);
      for (int q = 0; q < n; ++q) {
        std::vector<uint8_t> theirs = pattern(q, bytes * nn);
        c.want.insert(c.want.end(), theirs.begin() + static_cast<long>(self),
                      theirs.begin() + static_cast<long>(self + bytes));
      }
      break;
    case OpKind::AllToAllV: buildAllToAllV(c, s, rank, n); break;
    case OpKind::Gather:
      c.send = pattern(rank, bytes);
      c.recv.assign(rank == s.root ? bytes * nn : 0, 0xEE);
      c.want = rank == s.root ? concatPatterns(n, bytes) : c.recv;
      break;
    case OpKind::Scatter: {
      c.send = rank == s.root ? pattern(s.root, bytes * nn) : std::vector<uint8_t>{};
      c.recv.assign(bytes, 0xEE);
      std::vector<uint8_t> all = pattern(s.root, bytes * nn);
      c.want.assign(all.begin() + static_cast<long>(self), all.begin() + static_cast<long>(self + bytes));
      break;
    }
    default: break;
  }
  return c;
}

OpDesc describeOp(OpKind kind, const Shape& s, RankCase& c) {
  return OpDesc{.kind = kind,
                .send = c.sendBuffer(),
                .recv = c.recvBuffer(),
                .count = c.count.value_or(s.count),
                .dtype = s.dtype,
                .redop = s.redop,
                .root = s.root,
                .sendcounts = c.sendcounts.data(),
                .sdispls = c.sdispls.data(),
                .recvcounts = c.recvcounts.data(),
                .rdispls = c.rdispls.data()};
}

bool reduces(OpKind kind) {
  return opHasRedOp(kind);
}

bool hasInPlaceForm(OpKind kind) {
  return kind == OpKind::AllReduce || kind == OpKind::ReduceScatter || kind == OpKind::AllGather ||
         kind == OpKind::Broadcast || kind == OpKind::AllGatherV || kind == OpKind::ReduceScatterV ||
         kind == OpKind::Scan || kind == OpKind::Exscan;
}

// The shapes every rank runs in order: small counts with every type (and
// every reduction), then, on a few rank counts, one count past a pipeline
// piece in every block.
std::vector<Shape> shapesFor(OpKind kind, int n) {
  std::vector<Shape> out;
  const size_t odd = static_cast<size_t>(2 * n + 3);
  std::vector<vigilDataType_t> types(std::begin(kAllTypes), std::end(kAllTypes));
  std::vector<vigilRedOp_t> ops = reduces(kind) ? std::vector<vigilRedOp_t>(std::begin(kAllOps), std::end(kAllOps))
                                                : std::vector<vigilRedOp_t>{vigilSum};
  int index = 0;
  for (vigilDataType_t t : types) {
    for (vigilRedOp_t op : ops) {
      // Nine ranks' sums reach 315: past bfloat16's 8-bit mantissa, so the
      // order of the additions shows (common/typed_values.hpp).
      if (n > 8 && t == vigilBfloat16 && (op == vigilSum || op == vigilAvg) && reduces(kind)) continue;
      for (size_t count : {size_t{0}, size_t{1}, odd}) {
        for (bool inPlace : {false, true}) {
          if (inPlace && !hasInPlaceForm(kind)) continue;
          out.push_back({t, op, count, index++ % n, inPlace});
        }
      }
    }
  }
  if (n != 2 && n != 3 && n != 5) return out;
  // Past one pipeline piece in every block (allreduce cuts its vector into n blocks).
  const size_t piece = algo::kPipelineBytes / dtypeSize(vigilFloat32);
  const size_t large = kind == OpKind::AllReduce ? piece * static_cast<size_t>(n) + 5 : piece + 5;
  out.push_back({vigilFloat32, vigilSum, large, n - 1, false});
  if (hasInPlaceForm(kind)) out.push_back({vigilFloat32, vigilSum, large, 0, true});
  return out;
}

std::string describeShape(const Shape& s, int n) {
  return describe(n, " ranks, ", dtypeName(s.dtype), " ", s.redop, " count ", s.count, " root ", s.root,
                  s.inPlace ? " in place" : "");
}

void runRowOnRanks(const algo::AlgoRow& row, int n) {
  InMemoryFabric fabric;
  std::mutex failuresMutex;
  std::vector<std::string> failures;
  auto fail = [&](const std::string& what) {
    std::lock_guard lock(failuresMutex);
    failures.push_back(what);
  };
  const std::vector<Shape> shapes = shapesFor(row.kind, n);
  std::vector<std::thread> ranks;
  for (int r = 0; r < n; ++r) {
    ranks.emplace_back([&, r] {
      InMemoryRunner runner(fabric, r, n);
      for (const Shape& s : shapes) {
        RankCase c = buildCase(row.kind, s, r, n);
        try {
          row.run(runner, describeOp(row.kind, s, c));
        } catch (const std::exception& e) {
          fail(describe("rank ", r, ", ", describeShape(s, n), ": ", e.what()));
          fabric.breakDown();
          return;
        }
        if (c.output() != c.want) fail(describe("rank ", r, ", ", describeShape(s, n), ": wrong values"));
      }
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& f : failures) ADD_FAILURE() << row.name << " " << opName(row.kind) << ": " << f;
  EXPECT_EQ(fabric.unread(), 0u) << n << " ranks: messages sent and never received";
}

class AlgorithmSchedule : public ::testing::TestWithParam<const algo::AlgoRow*> {};

TEST_P(AlgorithmSchedule, ExactOnOneToNineRanks) {
  for (int n = 1; n <= 9; ++n) runRowOnRanks(*GetParam(), n);
}

// Every row that runs on plain steps; the shared-memory and hierarchical
// rows need a communicator (tests/multirank/test_algorithms.cpp).
std::vector<const algo::AlgoRow*> stepRows() {
  std::vector<const algo::AlgoRow*> rows;
  for (const algo::AlgoRow& row : algo::algorithmTable()) {
    if (row.needs == algo::Needs::Steps) rows.push_back(&row);
  }
  return rows;
}

INSTANTIATE_TEST_SUITE_P(Table, AlgorithmSchedule, ::testing::ValuesIn(stepRows()),
                         [](const ::testing::TestParamInfo<const algo::AlgoRow*>& info) {
                           return std::string(opName(info.param->kind)) + "_" + info.param->name;
                         });

TEST(AlgorithmSchedule, EveryCollectiveHasAStepRow) {
  for (OpKind kind :
       {OpKind::AllReduce, OpKind::Broadcast, OpKind::Reduce, OpKind::AllGather, OpKind::ReduceScatter,
        OpKind::AllToAll, OpKind::AllToAllV, OpKind::Gather, OpKind::Scatter, OpKind::Barrier, OpKind::AllGatherV,
        OpKind::GatherV, OpKind::ScatterV, OpKind::ReduceScatterV, OpKind::Scan, OpKind::Exscan}) {
    bool found = false;
    for (const algo::AlgoRow* row : stepRows()) found = found || row->kind == kind;
    EXPECT_TRUE(found) << opName(kind);
  }
}

TEST(AlgorithmSchedule, EveryRowHasARunFunction) {
  for (const algo::AlgoRow& row : algo::algorithmTable()) EXPECT_NE(row.run, nullptr) << row.name;
}

}  // namespace
}  // namespace vigil::test
