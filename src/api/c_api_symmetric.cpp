// The C API of symmetric memory: argument plumbing around symm/heap.hpp.
//
// The heap is made by a communicator's first vigilMemAlloc (or
// vigilBarrierAll; collective, as they are) and lives as long as the
// communicator: a call holds the communicator, and with it the heap, until
// it returns. Without a stream a call blocks; with one it is queued, and what
// it finds wrong is returned by vigilStreamSynchronize.

#include "api/handles.hpp"
#include "runtime/stream.hpp"
#include "symm/heap.hpp"
#include "vigil/vigil.h"

using namespace vigil;

namespace {

SymmetricHeap& heapOf(Communicator& c, const char* call, bool create) {
  if (SymmetricHeap* heap = SymmetricHeap::of(c, false)) return *heap;
  if (!create) {
    c.error(Errc::SymBadAddress)
        .op(call)
        .cause("communicator '", c.name(), "' has no symmetric allocation (vigilMemAlloc was not called on it)")
        .raise();
  }
  c.checkUsable();
  return *SymmetricHeap::of(c, true);
}

// Runs `body(heap)` now, or queued on `stream`. `collective`: the call may
// make the heap (every rank makes it).
template <class Body>
vigilResult_t oneSided(vigilComm_t comm, vigilStream_t stream, const char* call, Body&& body, bool collective = false) {
  return api::guarded(comm, [&] {
    if (stream == nullptr) {
      body(heapOf(api::borrow(comm), call, collective));
    } else {
      std::shared_ptr<Communicator> c = api::acquire(comm);
      SymmetricHeap& heap = heapOf(*c, call, collective);
      std::shared_ptr<Stream> s = api::streamOf(stream);
      c->checkUsable();
      s->enqueue([c, heap = &heap, body] { body(*heap); });
    }
  });
}

// Without a heap there is no put to order or complete (and none is made:
// these calls are not collective).
template <class Body>
vigilResult_t ordering(vigilComm_t comm, vigilStream_t stream, Body&& body) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    c->checkUsable();
    if (SymmetricHeap* heap = SymmetricHeap::of(*c, false)) {
      if (std::shared_ptr<Stream> s = api::streamOf(stream)) {
        s->enqueue([c, heap, body] { body(*heap); });
      } else {
        body(*heap);
      }
    }
  });
}

}  // namespace

extern "C" {

vigilResult_t vigilMemAlloc(vigilComm_t comm, size_t bytes, void** ptr) {
  return api::guarded(comm, [&] {
    if (ptr == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilMemAlloc").cause("ptr is NULL").raise();
    *ptr = nullptr;
    std::shared_ptr<Communicator> c = api::acquire(comm);
    SymmetricHeap& heap = heapOf(*c, "vigilMemAlloc", true);
    c->checkUsable();
    *ptr = heap.alloc(bytes);
  });
}

vigilResult_t vigilMemFree(vigilComm_t comm, void* ptr) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    SymmetricHeap& heap = heapOf(*c, "vigilMemFree", ptr == nullptr);
    c->checkUsable();
    heap.free(ptr);
  });
}

vigilResult_t vigilMemPeerPtr(vigilComm_t comm, const void* ptr, int peer, void** peerPtr) {
  return api::guarded(comm, [&] {
    if (peerPtr == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilMemPeerPtr").cause("peerPtr is NULL").raise();
    *peerPtr = nullptr;
    std::shared_ptr<Communicator> c = api::acquire(comm);
    *peerPtr = heapOf(*c, "vigilMemPeerPtr", false).peerPtr(ptr, peer);
  });
}

vigilResult_t vigilPut(void* dest, const void* source, size_t bytes, int peer, vigilComm_t comm,
                       vigilStream_t stream) {
  return oneSided(comm, stream, "vigilPut",
                  [=](SymmetricHeap& heap) { heap.put(dest, source, bytes, peer); });
}

vigilResult_t vigilGet(void* dest, const void* source, size_t bytes, int peer, vigilComm_t comm,
                       vigilStream_t stream) {
  return oneSided(comm, stream, "vigilGet",
                  [=](SymmetricHeap& heap) { heap.get(dest, source, bytes, peer); });
}

vigilResult_t vigilPutSignal(void* dest, const void* source, size_t bytes, uint64_t* signal, uint64_t value,
                             vigilSignalOp_t sigOp, int peer, vigilComm_t comm, vigilStream_t stream) {
  return oneSided(comm, stream, "vigilPutSignal", [=](SymmetricHeap& heap) {
    heap.putSignal(dest, source, bytes, signal, value, static_cast<SignalOp>(sigOp), peer);
  });
}

vigilResult_t vigilSignalWaitUntil(uint64_t* signal, vigilCmpOp_t cmp, uint64_t value, int fromPeer,
                                   uint64_t* observed, vigilComm_t comm, vigilStream_t stream) {
  return oneSided(comm, stream, "vigilSignalWaitUntil", [=](SymmetricHeap& heap) {
    const uint64_t seen = heap.waitUntil(signal, static_cast<CmpOp>(cmp), value, fromPeer);
    if (observed != nullptr) *observed = seen;
  });
}

vigilResult_t vigilFence(vigilComm_t comm, vigilStream_t stream) {
  return ordering(comm, stream, [](SymmetricHeap& heap) { heap.fence(); });
}

vigilResult_t vigilQuiet(vigilComm_t comm, vigilStream_t stream) {
  return ordering(comm, stream, [](SymmetricHeap& heap) { heap.quiet(); });
}

vigilResult_t vigilBarrierAll(vigilComm_t comm, vigilStream_t stream) {
  return oneSided(comm, stream, "vigilBarrierAll", [](SymmetricHeap& heap) { heap.barrierAll(); }, true);
}

vigilResult_t vigilAllReduceSymmetric(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype,
                                      vigilRedOp_t op, vigilComm_t comm, vigilStream_t stream) {
  return oneSided(comm, stream, "vigilAllReduceSymmetric",
                  [=](SymmetricHeap& heap) { heap.allReduce(sendbuff, recvbuff, count, datatype, op); });
}

vigilResult_t vigilAllGatherGemm(const void* x, const void* w, void* out, size_t rows, size_t k, size_t n,
                                 vigilDataType_t datatype, vigilComm_t comm, vigilStream_t stream) {
  return oneSided(comm, stream, "vigilAllGatherGemm",
                  [=](SymmetricHeap& heap) { heap.allGatherGemm(x, w, out, rows, k, n, datatype); });
}

vigilResult_t vigilGemmReduceScatter(const void* a, const void* w, void* out, void* workspace, size_t rows, size_t k,
                                     size_t n, vigilDataType_t datatype, vigilComm_t comm, vigilStream_t stream) {
  return oneSided(comm, stream, "vigilGemmReduceScatter",
                  [=](SymmetricHeap& heap) { heap.gemmReduceScatter(a, w, out, workspace, rows, k, n, datatype); });
}

}  // extern "C"
