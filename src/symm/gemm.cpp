// GEMM kernels on symmetric buffers (symm/heap.hpp), for the tensor-parallel
// linear layers: AllGather-GEMM (column-parallel: every rank needs every
// rank's rows of the activations) and GEMM-ReduceScatter (row-parallel:
// every rank holds a partial sum of the whole output and owns a block of its
// rows). The GEMMs are OpenBLAS's (symm/blas.cpp); what these kernels save is
// the collective's staging: inside a host a peer's rows and partial products
// are read where they lie, in the peer's copy of the heap, never copied into
// a gathered or received buffer first.
//
// AllGather-GEMM: a rank announces that its block of x is ready (the entry
// of the call), multiplies its own block, then each peer's block straight
// from the peer's copy as soon as that peer has entered, starting with the
// next rank, so ranks that arrive at different times do not wait for the
// last one. An exit barrier keeps every rank's x unchanged until every peer
// has read it.
//
// GEMM-ReduceScatter: a rank multiplies its rows block by block into its
// own copy of `workspace`, the block owned by the next rank first and its
// own block last, publishing a count after each; the owner of a block then
// reduces it from every rank's copy, in rank order (the bits of a
// sequential sum in rank order), into `out`. Blocks owned by others are
// done first, so they are ready when their owners look. An exit barrier
// keeps every workspace until its blocks are reduced.
#include <cstring>

#include "core/dtype.hpp"
#include "core/strcat.hpp"
#include "symm/blas.hpp"
#include "symm/heap.hpp"

namespace vigil {

namespace {

size_t gemmElement(Communicator& comm, const char* call, vigilDataType_t dtype) {
  if (dtype != vigilFloat32 && dtype != vigilFloat64) {
    comm.error(Errc::ApiBadDataType)
        .op(call)
        .cause("the GEMM kernels take vigilFloat32 or vigilFloat64, not data type ", static_cast<int>(dtype))
        .raise();
  }
  return dtypeSize(dtype);
}

// rows * cols elements of `elem` bytes, or VG-API-011.
size_t matrixBytes(Communicator& comm, const char* call, size_t rows, size_t cols, size_t elem, const char* what) {
  size_t bytes = 0;
  if (__builtin_mul_overflow(rows, cols, &bytes) || __builtin_mul_overflow(bytes, elem, &bytes)) {
    comm.error(Errc::ApiCountOverflow).op(call).cause(what, " of ", rows, " x ", cols, " elements overflows size_t").raise();
  }
  return bytes;
}

void requirePointer(Communicator& comm, const char* call, const void* p, size_t bytes, const char* what) {
  if (p == nullptr && bytes > 0) comm.error(Errc::ApiNullArgument).op(call).cause(what, " is NULL").raise();
}

bool overlap(const void* a, size_t aBytes, const void* b, size_t bBytes) {
  const auto* x = static_cast<const uint8_t*>(a);
  const auto* y = static_cast<const uint8_t*>(b);
  return aBytes > 0 && bBytes > 0 && x < y + bBytes && y < x + aBytes;
}

}  // namespace

void SymmetricHeap::allGatherGemm(const void* x, const void* w, void* out, size_t rows, size_t k, size_t n,
                                  vigilDataType_t dtype) {
  constexpr const char* kCall = "vigilAllGatherGemm";
  const size_t elem = gemmElement(*comm_, kCall, dtype);
  const int nl = static_cast<int>(localRanks_.size());
  const size_t xBytes = matrixBytes(*comm_, kCall, rows, k, elem, "x");
  const size_t wBytes = matrixBytes(*comm_, kCall, k, n, elem, "w");
  const size_t blockBytes = matrixBytes(*comm_, kCall, rows, n, elem, "a block of out");
  const size_t outBytes = matrixBytes(*comm_, kCall, blockBytes, static_cast<size_t>(nranks_), 1, "out");
  requirePointer(*comm_, kCall, w, wBytes, "w");
  requirePointer(*comm_, kCall, out, outBytes, "out");
  if (xBytes > 0) locate(kCall, x, xBytes, "x");
  if (overlap(out, outBytes, x, xBytes) || overlap(out, outBytes, w, wBytes)) {
    comm_->error(Errc::ApiBadAliasing).op(kCall).cause("out overlaps x or w").raise();
  }
  requireAllLocal(kCall);
  const size_t xAt = xBytes > 0 ? static_cast<size_t>(static_cast<const uint8_t*>(x) - mine_) : 0;
  const uint64_t fingerprint = symm::fingerprintOf(
      {static_cast<uint64_t>(Call::AllGatherGemm), rows, k, n, static_cast<uint64_t>(dtype)});
  begin(Call::AllGatherGemm, -1, xAt, rows);
  struct End {
    const SymmetricHeap& heap;
    ~End() { heap.end(); }
  } endOnExit{*this};

  const uint64_t epoch = arrive(BarrierKind::AllGatherGemmEntry, fingerprint, rows);
  const int me = localIndex_[static_cast<size_t>(rank_)];
  auto* o = static_cast<uint8_t*>(out);
  for (int d = 0; d < nl; ++d) {
    const int q = (me + d) % nl;
    if (d > 0) {
      awaitArrival(kCall, epoch, BarrierKind::AllGatherGemmEntry, fingerprint, rows, static_cast<size_t>(q),
                   "out holds no result");
    }
    if (xBytes > 0 && blockBytes > 0) {
      blas::gemm(nl, dtype, rows, n, k, part(q) + xAt, k, w, n,
                 o + static_cast<size_t>(localRanks_[static_cast<size_t>(q)]) * blockBytes, n);
    } else if (blockBytes > 0) {  // k == 0: an empty sum
      std::memset(o + static_cast<size_t>(localRanks_[static_cast<size_t>(q)]) * blockBytes, 0, blockBytes);
    }
  }
  localBarrier(kCall, BarrierKind::AllGatherGemmExit, fingerprint, rows);
}

void SymmetricHeap::gemmReduceScatter(const void* a, const void* w, void* out, void* workspace, size_t rows,
                                      size_t k, size_t n, vigilDataType_t dtype) {
  constexpr const char* kCall = "vigilGemmReduceScatter";
  const size_t elem = gemmElement(*comm_, kCall, dtype);
  const int nl = static_cast<int>(localRanks_.size());
  const size_t aBlockBytes = matrixBytes(*comm_, kCall, rows, k, elem, "a block of a");
  const size_t aBytes = matrixBytes(*comm_, kCall, aBlockBytes, static_cast<size_t>(nranks_), 1, "a");
  const size_t wBytes = matrixBytes(*comm_, kCall, k, n, elem, "w");
  const size_t blockBytes = matrixBytes(*comm_, kCall, rows, n, elem, "out");
  const size_t workBytes = matrixBytes(*comm_, kCall, blockBytes, static_cast<size_t>(nranks_), 1, "workspace");
  requirePointer(*comm_, kCall, a, aBytes, "a");
  requirePointer(*comm_, kCall, w, wBytes, "w");
  requirePointer(*comm_, kCall, out, blockBytes, "out");
  if (workBytes > 0) locate(kCall, workspace, workBytes, "workspace");
  if (overlap(out, blockBytes, workspace, workBytes) || overlap(out, blockBytes, a, aBytes) ||
      overlap(out, blockBytes, w, wBytes)) {
    comm_->error(Errc::ApiBadAliasing).op(kCall).cause("out overlaps a, w or the workspace").raise();
  }
  if (overlap(workspace, workBytes, a, aBytes) || overlap(workspace, workBytes, w, wBytes)) {
    comm_->error(Errc::ApiBadAliasing).op(kCall).cause("the workspace overlaps a or w").raise();
  }
  requireAllLocal(kCall);
  const size_t workAt = workBytes > 0 ? static_cast<size_t>(static_cast<uint8_t*>(workspace) - mine_) : 0;
  const uint64_t fingerprint = symm::fingerprintOf(
      {static_cast<uint64_t>(Call::GemmReduceScatter), rows, k, n, static_cast<uint64_t>(dtype)});
  begin(Call::GemmReduceScatter, -1, workAt, rows);
  struct End {
    const SymmetricHeap& heap;
    ~End() { heap.end(); }
  } endOnExit{*this};

  const uint64_t epoch = arrive(BarrierKind::GemmReduceScatterEntry, fingerprint, rows);
  const int me = localIndex_[static_cast<size_t>(rank_)];
  uint8_t* work = part(me) + workAt;
  // Block t holds the rows owned by local rank t; this rank's own block last.
  for (int step = 0; step < nl; ++step) {
    const int t = (me + 1 + step) % nl;
    if (blockBytes > 0) {
      uint8_t* dst = work + static_cast<size_t>(t) * blockBytes;
      if (aBlockBytes > 0) {
        blas::gemm(nl, dtype, rows, n, k, static_cast<const uint8_t*>(a) + static_cast<size_t>(t) * aBlockBytes, k, w,
                   n, dst, n);
      } else {
        std::memset(dst, 0, blockBytes);  // k == 0: an empty sum
      }
    }
    publishProgress(epoch, static_cast<uint64_t>(step) + 1);
  }
  // Every rank's partial of this rank's block, then their sum in rank order.
  for (int r = 0; r < nl; ++r) {
    if (r == me) continue;
    awaitArrival(kCall, epoch, BarrierKind::GemmReduceScatterEntry, fingerprint, rows, static_cast<size_t>(r),
                 "out holds no result");
    const uint64_t pieces = static_cast<uint64_t>((me - r - 1 + nl) % nl) + 1;  // r's step for this block, + 1
    awaitProgress(kCall, epoch, static_cast<size_t>(r), pieces,
                  cat("its partial product of rank ", rank_, "'s block in ", kCall).c_str());
  }
  if (blockBytes > 0) {
    reduceParts(workAt + static_cast<size_t>(me) * blockBytes, rows * n, dtype, vigilSum, out);
  }
  localBarrier(kCall, BarrierKind::GemmReduceScatterExit, fingerprint, rows);
}

}  // namespace vigil
