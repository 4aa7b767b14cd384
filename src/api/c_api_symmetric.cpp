// The C API of symmetric memory: argument plumbing around symm/heap.hpp.
//
// The heap is made by a communicator's first vigilMemAlloc (collective, as
// the allocation is) and lives in the handle until the communicator is
// destroyed or aborted. Without a stream a call blocks; with one it is
// queued, and what it finds wrong is returned by vigilStreamSynchronize.

#include <mutex>

#include "api/handles.hpp"
#include "runtime/stream.hpp"
#include "symm/heap.hpp"
#include "vigil/vigil.h"

using namespace vigil;

namespace {

std::shared_ptr<SymmetricHeap> heapOf(vigilComm_t comm, const char* call, bool create) {
  std::shared_ptr<Communicator> c = api::acquire(comm);
  if (std::shared_ptr<SymmetricHeap> heap = comm->heap.load()) return heap;
  if (!create) {
    c->error(Errc::SymBadAddress)
        .op(call)
        .cause("communicator '", c->name(), "' has no symmetric allocation (vigilMemAlloc was not called on it)")
        .raise();
  }
  c->checkUsable();
  std::lock_guard lock(comm->heapMutex);
  std::shared_ptr<SymmetricHeap> heap = comm->heap.load();
  if (!heap) {
    heap = std::make_shared<SymmetricHeap>(c);
    comm->heap.store(heap);
  }
  return heap;
}

// Runs `body(heap)` now, or queued on `stream`.
// `collective`: the call may make the heap (every rank makes it).
template <class Body>
vigilResult_t oneSided(vigilComm_t comm, vigilStream_t stream, const char* call, Body&& body, bool collective = false) {
  return api::guarded(comm, [&] {
    std::shared_ptr<SymmetricHeap> heap = heapOf(comm, call, collective);
    std::shared_ptr<Stream> s = api::streamOf(stream);
    if (!s) {
      body(*heap);
    } else {
      heap->comm().checkUsable();
      s->enqueue([heap, body] { body(*heap); });
    }
  });
}

}  // namespace

extern "C" {

vigilResult_t vigilMemAlloc(vigilComm_t comm, size_t bytes, void** ptr) {
  return api::guarded(comm, [&] {
    if (ptr == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilMemAlloc").cause("ptr is NULL").raise();
    *ptr = nullptr;
    std::shared_ptr<SymmetricHeap> heap = heapOf(comm, "vigilMemAlloc", true);
    heap->comm().checkUsable();
    *ptr = heap->alloc(bytes);
  });
}

vigilResult_t vigilMemFree(vigilComm_t comm, void* ptr) {
  return api::guarded(comm, [&] {
    std::shared_ptr<SymmetricHeap> heap = heapOf(comm, "vigilMemFree", ptr == nullptr);
    heap->comm().checkUsable();
    heap->free(ptr);
  });
}

vigilResult_t vigilMemPeerPtr(vigilComm_t comm, const void* ptr, int peer, void** peerPtr) {
  return api::guarded(comm, [&] {
    if (peerPtr == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilMemPeerPtr").cause("peerPtr is NULL").raise();
    *peerPtr = nullptr;
    *peerPtr = heapOf(comm, "vigilMemPeerPtr", false)->peerPtr(ptr, peer);
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

// Without a heap there is no put to order or complete (and no heap is made:
// these calls are not collective).
vigilResult_t vigilFence(vigilComm_t comm, vigilStream_t stream) {
  if (vigilComm* c = comm; c != nullptr && c->magic.load() == vigilComm::kLive && !c->heap.load()) {
    return api::guarded(comm, [&] { api::acquire(comm)->checkUsable(); });
  }
  return oneSided(comm, stream, "vigilFence", [](SymmetricHeap& heap) { heap.fence(); });
}

vigilResult_t vigilQuiet(vigilComm_t comm, vigilStream_t stream) {
  if (vigilComm* c = comm; c != nullptr && c->magic.load() == vigilComm::kLive && !c->heap.load()) {
    return api::guarded(comm, [&] { api::acquire(comm)->checkUsable(); });
  }
  return oneSided(comm, stream, "vigilQuiet", [](SymmetricHeap& heap) { heap.quiet(); });
}

vigilResult_t vigilBarrierAll(vigilComm_t comm, vigilStream_t stream) {
  return oneSided(comm, stream, "vigilBarrierAll", [](SymmetricHeap& heap) { heap.barrierAll(); }, true);
}

}  // extern "C"
