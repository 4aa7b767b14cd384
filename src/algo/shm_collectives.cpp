// Collectives on shared memory: every rank writes into its own staging
// buffer, the step counters say when a buffer is complete, and every rank
// reads the others' buffers in place. Large messages go in chunks of one
// staging buffer, alternating between two buffers, so a rank may copy in
// chunk k+1 while a slower one still reads chunk k.
//
// Reductions combine the ranks' contributions in rank order (0, 1, ..., n-1)
// on whichever rank computes a slice, so every rank ends with the same bits
// as every other, whatever the algorithm or chunking.

#include <algorithm>
#include <cstring>

#include "algo/algo.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil::algo {

namespace {

// dst = src(0) OP src(1) OP ... OP src(n-1), in rank order. dst may be one
// of the sources only if it is src(0).
template <class Source>
void reduceRanks(void* dst, Source&& src, int n, size_t count, vigilDataType_t dtype, vigilRedOp_t op) {
  if (count == 0) return;
  reduce::reduceInto(dst, src(0), src(1), count, dtype, op);
  for (int q = 2; q < n; ++q) reduce::reduceInPlace(dst, src(q), count, dtype, op);
}

void copy(void* dst, const void* src, size_t bytes) {
  if (bytes > 0 && dst != src) std::memcpy(dst, src, bytes);
}

// Collectives over n blocks (reduce-scatter, all-to-all, scatter) stage the
// same range of every block: a chunk is n sub-blocks of this many elements.
size_t subBlockChunk(const LoadStoreDomain& p, size_t elem, int n) {
  return std::max<size_t>(1, p.stagingBytes() / elem / static_cast<size_t>(n));
}

// Copies elements [off, off + c) of every block of `in` (blocks of
// `blockCount` elements) but block `skip` into `staged` as sub-blocks.
void stageSubBlocks(uint8_t* staged, const uint8_t* in, int n, int skip, size_t blockCount, size_t off, size_t c,
                    size_t elem) {
  for (int q = 0; q < n; ++q) {
    const size_t qq = static_cast<size_t>(q);
    if (q != skip) copy(staged + qq * c * elem, in + (qq * blockCount + off) * elem, c * elem);
  }
}

// Allreduce (root < 0: every rank gets the result) and reduce (only `root`
// does) share one schedule; only the copying out differs.
void reduceToShm(LoadStoreRunner& r, const OpDesc& desc, int root) {
  LoadStoreDomain& p = r.loadStoreDomain();
  const size_t count = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const vigilRedOp_t op = desc.redop;
  const int n = r.nranks(), me = r.rank();
  const bool receives = root < 0 || me == root;
  const size_t elem = dtypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(desc.send);
  auto* out = static_cast<uint8_t*>(desc.recv);

  if (count * elem <= std::min(kSmallAllReduceBytes, p.stagingBytes())) {
    if (count == 0) return;
    // A few bytes ride in the step line itself; more in the staging buffer.
    const bool inLine = count * elem <= p.inlineBytes();
    auto buffer = [&](int q, int b) { return inLine ? p.inlineData(q, b) : p.staging(q, b); };
    const int b = r.takeStagingBuffer();
    copy(buffer(me, b), in, count * elem);
    const uint64_t s = r.syncStep();
    if (receives) {
      reduceRanks(
          out, [&](int q) { return buffer(q, b); }, n, count, dtype, op);
      if (op == vigilAvg) reduce::divideInPlace(out, count, dtype, n);
    }
    r.releaseStagingBuffer(b, s);
    return;
  }

  // Reduce-scatter + gather per chunk: rank q reduces slice q of the chunk
  // from everyone's staging buffer into its own, then the receiving ranks
  // copy every reduced slice out.
  const size_t chunk = std::max<size_t>(1, p.stagingBytes() / elem / static_cast<size_t>(n)) * static_cast<size_t>(n);
  for (size_t off = 0; off < count; off += chunk) {
    const Blocks slice{std::min(chunk, count - off), n};
    const uint8_t* src = in + off * elem;
    const int b = r.takeStagingBuffer();
    uint8_t* mine = p.staging(me, b);
    // The others need my input's other slices; my own slice I read from the input.
    copy(mine, src, slice.begin(me) * elem);
    copy(mine + slice.begin(me + 1) * elem, src + slice.begin(me + 1) * elem,
         (slice.count - slice.begin(me + 1)) * elem);
    r.syncStep();
    const size_t at = slice.begin(me) * elem;
    uint8_t* reduced = mine + at;
    reduceRanks(
        reduced, [&](int q) { return q == me ? src + at : p.staging(q, b) + at; }, n, slice.size(me), dtype, op);
    if (op == vigilAvg) reduce::divideInPlace(reduced, slice.size(me), dtype, n);
    const uint64_t s = r.syncStep();
    if (receives) {
      for (int q = 0; q < n; ++q) {
        copy(out + (off + slice.begin(q)) * elem, p.staging(q, b) + slice.begin(q) * elem, slice.size(q) * elem);
      }
    }
    r.releaseStagingBuffer(b, s);
  }
}

}  // namespace

void allReduceShm(StepRunner& r, const OpDesc& op) {
  reduceToShm(requireLoadStore(r), op, -1);
}

void reduceShm(StepRunner& r, const OpDesc& op) {
  reduceToShm(requireLoadStore(r), op, op.root);
}

void gatherShm(StepRunner& runner, const OpDesc& desc) {
  LoadStoreRunner& r = requireLoadStore(runner);
  LoadStoreDomain& p = r.loadStoreDomain();
  const size_t sendcount = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const int root = desc.root;
  const int n = r.nranks(), me = r.rank();
  const size_t bytes = sendcount * dtypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(desc.send);
  auto* out = static_cast<uint8_t*>(desc.recv);
  if (me == root) copy(out + static_cast<size_t>(me) * bytes, in, bytes);
  for (size_t off = 0; off < bytes; off += p.stagingBytes()) {
    const size_t c = std::min(p.stagingBytes(), bytes - off);
    const int b = r.takeStagingBuffer();
    if (me != root) copy(p.staging(me, b), in + off, c);
    const uint64_t s = r.syncStep();
    if (me == root) {
      for (int q = 0; q < n; ++q) {
        if (q != root) copy(out + static_cast<size_t>(q) * bytes + off, p.staging(q, b), c);
      }
    }
    r.releaseStagingBuffer(b, s);
  }
}

void scatterShm(StepRunner& runner, const OpDesc& desc) {
  LoadStoreRunner& r = requireLoadStore(runner);
  LoadStoreDomain& p = r.loadStoreDomain();
  const size_t recvcount = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const int root = desc.root;
  const int n = r.nranks(), me = r.rank();
  const size_t elem = dtypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(desc.send);
  auto* out = static_cast<uint8_t*>(desc.recv);
  if (me == root) copy(out, in + static_cast<size_t>(root) * recvcount * elem, recvcount * elem);
  const size_t chunk = subBlockChunk(p, elem, n);
  for (size_t off = 0; off < recvcount; off += chunk) {
    const size_t c = std::min(chunk, recvcount - off);
    const int b = r.takeStagingBuffer();
    uint8_t* staged = p.staging(root, b);
    if (me == root) stageSubBlocks(staged, in, n, root, recvcount, off, c, elem);
    const uint64_t s = r.syncStep();
    if (me != root) copy(out + off * elem, staged + static_cast<size_t>(me) * c * elem, c * elem);
    r.releaseStagingBuffer(b, s);
  }
}

void broadcastShm(StepRunner& runner, const OpDesc& desc) {
  LoadStoreRunner& r = requireLoadStore(runner);
  LoadStoreDomain& p = r.loadStoreDomain();
  const size_t count = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const int root = desc.root;
  const int me = r.rank();
  const size_t bytes = count * dtypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(desc.send);
  auto* out = static_cast<uint8_t*>(desc.recv);
  if (me == root) copy(out, in, bytes);
  const bool inLine = bytes <= p.inlineBytes();  // then it rides in the root's step line
  for (size_t off = 0; off < bytes; off += p.stagingBytes()) {
    const size_t c = std::min(p.stagingBytes(), bytes - off);
    const int b = r.takeStagingBuffer();
    uint8_t* staged = inLine ? p.inlineData(root, b) : p.staging(root, b);
    if (me == root) copy(staged, in + off, c);
    const uint64_t s = r.syncStep();
    if (me != root) copy(out + off, staged, c);
    r.releaseStagingBuffer(b, s);
  }
}

void allGatherShm(StepRunner& runner, const OpDesc& desc) {
  LoadStoreRunner& r = requireLoadStore(runner);
  LoadStoreDomain& p = r.loadStoreDomain();
  const size_t sendcount = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const int n = r.nranks(), me = r.rank();
  const size_t bytes = sendcount * dtypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(desc.send);
  auto* out = static_cast<uint8_t*>(desc.recv);
  copy(out + static_cast<size_t>(me) * bytes, in, bytes);
  for (size_t off = 0; off < bytes; off += p.stagingBytes()) {
    const size_t c = std::min(p.stagingBytes(), bytes - off);
    const int b = r.takeStagingBuffer();
    copy(p.staging(me, b), in + off, c);
    const uint64_t s = r.syncStep();
    for (int q = 0; q < n; ++q) {
      if (q != me) copy(out + static_cast<size_t>(q) * bytes + off, p.staging(q, b), c);
    }
    r.releaseStagingBuffer(b, s);
  }
}

void reduceScatterShm(StepRunner& runner, const OpDesc& desc) {
  LoadStoreRunner& r = requireLoadStore(runner);
  LoadStoreDomain& p = r.loadStoreDomain();
  const size_t recvcount = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const vigilRedOp_t op = desc.redop;
  const int n = r.nranks(), me = r.rank();
  const size_t elem = dtypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(desc.send);
  auto* out = static_cast<uint8_t*>(desc.recv);
  const size_t chunk = subBlockChunk(p, elem, n);
  for (size_t off = 0; off < recvcount; off += chunk) {
    const size_t c = std::min(chunk, recvcount - off);
    const int b = r.takeStagingBuffer();
    uint8_t* mine = p.staging(me, b);
    stageSubBlocks(mine, in, n, me, recvcount, off, c, elem);
    const uint64_t s = r.syncStep();
    uint8_t* reduced = mine + static_cast<size_t>(me) * c * elem;  // my own sub-block's slot is free
    const uint8_t* own = in + (static_cast<size_t>(me) * recvcount + off) * elem;
    reduceRanks(
        reduced, [&](int q) { return q == me ? own : p.staging(q, b) + static_cast<size_t>(me) * c * elem; }, n, c,
        dtype, op);
    if (op == vigilAvg) reduce::divideInPlace(reduced, c, dtype, n);
    copy(out + off * elem, reduced, c * elem);
    r.releaseStagingBuffer(b, s);
  }
}

void allToAllShm(StepRunner& runner, const OpDesc& desc) {
  LoadStoreRunner& r = requireLoadStore(runner);
  LoadStoreDomain& p = r.loadStoreDomain();
  const size_t count = desc.count;
  const vigilDataType_t dtype = desc.dtype;
  const int n = r.nranks(), me = r.rank();
  const size_t elem = dtypeSize(dtype);
  const auto* in = static_cast<const uint8_t*>(desc.send);
  auto* out = static_cast<uint8_t*>(desc.recv);
  const size_t chunk = subBlockChunk(p, elem, n);
  const size_t self = static_cast<size_t>(me) * count * elem;
  copy(out + self, in + self, count * elem);
  for (size_t off = 0; off < count; off += chunk) {
    const size_t c = std::min(chunk, count - off);
    const int b = r.takeStagingBuffer();
    stageSubBlocks(p.staging(me, b), in, n, me, count, off, c, elem);
    const uint64_t s = r.syncStep();
    for (int q = 0; q < n; ++q) {
      if (q != me) {
        copy(out + (q * count + off) * elem, p.staging(q, b) + static_cast<size_t>(me) * c * elem, c * elem);
      }
    }
    r.releaseStagingBuffer(b, s);
  }
}

void barrierShm(StepRunner& r, const OpDesc& /*op*/) {
  requireLoadStore(r).syncStep();
}

}  // namespace vigil::algo
