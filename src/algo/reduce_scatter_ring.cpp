// Ring reduce-scatter: in step s rank r sends its running partial result of
// block (r - s - 1) to the right and receives the left neighbour's partial
// of block (r - s - 2), adding its own contribution. After n-1 steps the
// partial that arrives is block r, complete. Each block is reduced along one
// chain of ranks, so the result does not depend on which rank computes it.
//
// Blocks move in pieces of kPipelineBytes, and a piece is reduced while the
// next one travels: the reduction is the exchange's work (ExchangeWork), in
// units small enough that the transport progresses between them. A send
// that needs the piece being reduced (a block of one piece) waits for it.

#include <algorithm>
#include <cstring>
#include <vector>

#include "algo/ring.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

namespace {

// dst = mine OP theirs over one arrived piece, a unit at a time.
class PieceReduction final : public ExchangeWork {
 public:
  PieceReduction(vigilDataType_t dtype, vigilRedOp_t op)
      : dtype_(dtype), op_(op), elem_(dtypeSize(dtype)), unit_(std::max<size_t>(1, kUnitBytes / elem_)) {}

  void start(uint8_t* dst, const uint8_t* mine, const uint8_t* theirs, size_t count) {
    dst_ = dst;
    mine_ = mine;
    theirs_ = theirs;
    count_ = count;
    done_ = 0;
    complete_ = count == 0;
  }
  // For a send of [data, data + bytes): null when nothing there is still to
  // be written, else a flag that turns true once the reduction is complete.
  const bool* readyFlag(const uint8_t* data, size_t bytes) const {
    const bool writes = pending() && data < dst_ + count_ * elem_ && dst_ + done_ * elem_ < data + bytes;
    return writes ? &complete_ : nullptr;
  }

  bool pending() const override { return done_ < count_; }
  void runOne() override {
    const size_t n = std::min(unit_, count_ - done_), at = done_ * elem_;
    reduce::reduceInto(dst_ + at, mine_ + at, theirs_ + at, n, dtype_, op_);
    done_ += n;
    complete_ = !pending();
  }

 private:
  // A unit: long enough that the kernel runs at speed, short enough that a
  // message waiting for the other side's answer is not held up.
  static constexpr size_t kUnitBytes = 64u << 10;
  const vigilDataType_t dtype_;
  const vigilRedOp_t op_;
  const size_t elem_, unit_;
  uint8_t* dst_ = nullptr;
  const uint8_t* mine_ = nullptr;
  const uint8_t* theirs_ = nullptr;
  size_t count_ = 0, done_ = 0;
  bool complete_ = true;
};

}  // namespace

void ringReduceScatter(StepRunner& r, const RingReduceScatter& args) {
  const size_t elem = dtypeSize(args.dtype);
  const int n = r.nranks(), me = r.rank();
  const int right = mod(me + 1, n), left = mod(me - 1, n);
  const Blocks& blocks = args.blocks;
  // Both ends cut a block into the same pieces.
  const size_t piece = std::max<size_t>(1, kPipelineBytes / elem);
  const size_t largest = blocks.largest(), pieceRoom = std::min(piece, largest);
  // Two arriving pieces (one lands while the other is reduced), and two
  // partial blocks (one is sent while the next is reduced) when the caller
  // keeps no partials.
  uint8_t* space = r.scratch((2 * pieceRoom + (args.partials != nullptr ? 0 : 2 * largest)) * elem);
  uint8_t* incoming[2] = {space, space + pieceRoom * elem};
  int landing = 0;
  auto partialOf = [&](int block, int step) -> uint8_t* {
    if (block == me) return args.owned;
    if (args.partials != nullptr) return args.partials + blocks.begin(block) * elem;
    return space + (2 * pieceRoom + static_cast<size_t>(step % 2) * largest) * elem;
  };

  PieceReduction reduction(args.dtype, args.op);
  // Step 0 sends this rank's own contribution straight from the input.
  const uint8_t* outgoing = args.input + blocks.begin(mod(me - 1, n)) * elem;
  for (int s = 0; s < n - 1; ++s) {
    const int sendBlock = mod(me - s - 1, n), recvBlock = mod(me - s - 2, n);
    const size_t sendCount = blocks.size(sendBlock), recvCount = blocks.size(recvBlock);
    uint8_t* partial = partialOf(recvBlock, s);
    const uint8_t* mine = args.input + blocks.begin(recvBlock) * elem;
    for (size_t off = 0; off < std::max(sendCount, recvCount); off += piece) {
      Transfer step[2];
      size_t k = 0;
      if (off < sendCount) {
        const size_t bytes = std::min(piece, sendCount - off) * elem;
        step[k] = Transfer::send(right, outgoing + off * elem, bytes);
        step[k++].ready = reduction.readyFlag(outgoing + off * elem, bytes);
      }
      const size_t got = off < recvCount ? std::min(piece, recvCount - off) : 0;
      if (got > 0) step[k++] = Transfer::recv(left, incoming[landing], got * elem);
      r.exchange(std::span<const Transfer>(step, k), &reduction);
      reduction.runRest();
      // mine OP theirs, written where the partial is kept: an in-place
      // input block is read before it is overwritten, never copied whole.
      if (got > 0) {
        reduction.start(partial + off * elem, mine + off * elem, incoming[landing], got);
        landing ^= 1;
      }
    }
    outgoing = partial;
  }
  reduction.runRest();
  if (args.op == vigilAvg) reduce::divideInPlace(args.owned, blocks.size(me), args.dtype, n);
}

void reduceScatterRing(StepRunner& r, const OpDesc& op) {
  const int n = r.nranks();
  const size_t elem = dtypeSize(op.dtype), block = op.count * elem;
  const auto* in = static_cast<const uint8_t*>(op.send);
  auto* out = static_cast<uint8_t*>(op.recv);
  if (n == 1) {
    if (in != out && block > 0) std::memmove(out, in, block);
    return;
  }
  // recv may alias this rank's block of send (the in-place form).
  ringReduceScatter(r, {.input = in,
                        .owned = out,
                        .partials = nullptr,
                        .blocks = Blocks{op.count * static_cast<size_t>(n), n},
                        .dtype = op.dtype,
                        .op = op.redop});
}

// The same ring over blocks of recvcounts[p] elements, one after another in
// rank order.
void reduceScatterVRing(StepRunner& r, const OpDesc& op) {
  const int n = r.nranks();
  const size_t elem = dtypeSize(op.dtype);
  std::vector<size_t> starts(static_cast<size_t>(n));
  size_t at = 0;
  for (size_t p = 0; p < starts.size(); ++p) {
    starts[p] = at;
    at += op.recvcounts[p];
  }
  const Blocks blocks{.count = 0, .parts = n, .starts = starts.data(), .sizes = op.recvcounts};
  const auto* in = static_cast<const uint8_t*>(op.send);
  auto* out = static_cast<uint8_t*>(op.recv);
  if (n == 1) {
    if (in != out && blocks.size(0) > 0) std::memmove(out, in, blocks.size(0) * elem);
    return;
  }
  ringReduceScatter(
      r, {.input = in, .owned = out, .partials = nullptr, .blocks = blocks, .dtype = op.dtype, .op = op.redop});
}

}  // namespace vigil::algo
