#include "api/handles.hpp"

#include <list>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

namespace vigil::api {
namespace {

struct Shells {
  std::mutex mutex;
  std::list<vigilComm> all;  // never shrinks: see handles.hpp
};

Shells& shells() {
  static Shells* const s = new Shells();  // immortal: handles may be used during exit
  return *s;
}

// Node-based: a stored error stays where it is while others are added, so the
// strings handed out stay valid until that error is replaced.
thread_local std::unordered_map<const void*, Error> lastErrors;

// borrow()'s cache: the last communicator this thread borrowed, kept alive.
struct Borrowed {
  vigilComm_t handle = nullptr;
  std::shared_ptr<Communicator> comm;
};
thread_local Borrowed borrowed;

}  // namespace

Communicator& borrow(vigilComm_t comm) {
  // A handle never changes communicator: once live it only dies (retire).
  if (comm == borrowed.handle && comm != nullptr &&
      comm->magic.load(std::memory_order_acquire) == vigilComm::kLive) {
    return *borrowed.comm;
  }
  std::shared_ptr<Communicator> c = acquire(comm);
  borrowed.comm = std::move(c);
  borrowed.handle = comm;
  return *borrowed.comm;
}

vigilComm_t makeHandle(std::shared_ptr<Communicator> comm) {
  std::lock_guard lock(shells().mutex);
  vigilComm& shell = shells().all.emplace_back();
  shell.impl.store(std::move(comm));
  return &shell;
}

std::shared_ptr<Communicator> acquire(vigilComm_t comm) {
  if (comm == nullptr) ErrorBuilder(Errc::ApiNullArgument).cause("comm is NULL").raise();
  uint64_t magic = comm->magic.load(std::memory_order_acquire);
  if (magic != vigilComm::kLive && magic != vigilComm::kDead) {
    ErrorBuilder(Errc::ApiBadHandle)
        .cause("comm ", static_cast<const void*>(comm), " is not a vigil communicator")
        .raise();
  }
  std::shared_ptr<Communicator> impl = comm->impl.load();
  if (!impl) {
    ErrorBuilder(Errc::ApiUseAfterFree)
        .cause("comm ", static_cast<const void*>(comm), " was already destroyed or aborted")
        .raise();
  }
  return impl;
}

std::shared_ptr<Communicator> retire(vigilComm_t comm) {
  acquire(comm);  // validates the handle
  if (borrowed.handle == comm) borrowed = Borrowed{};
  std::shared_ptr<Communicator> impl = comm->impl.exchange(nullptr);
  comm->magic.store(vigilComm::kDead, std::memory_order_release);
  return impl;
}

std::shared_ptr<Stream> streamOf(vigilStream_t stream) {
  if (stream == nullptr) return nullptr;
  if (stream->magic != vigilStream::kLive) {
    ErrorBuilder(Errc::ApiBadHandle)
        .cause("stream ", static_cast<const void*>(stream), " is not a live vigil stream")
        .remedy("pass NULL or a stream from vigilStreamCreate that was not destroyed")
        .raise();
  }
  return stream->impl;
}

vigilEvent& eventOf(vigilEvent_t event) {
  if (event == nullptr) ErrorBuilder(Errc::ApiNullArgument).cause("event is NULL").raise();
  if (event->magic != vigilEvent::kLive) {
    ErrorBuilder(Errc::ApiBadHandle)
        .cause("event ", static_cast<const void*>(event), " is not a live vigil event")
        .remedy("pass an event from vigilEventCreate that was not destroyed")
        .raise();
  }
  return *event;
}

void setLastError(vigilComm_t comm, const Error& error) {
  lastErrors.insert_or_assign(comm, error);
  if (comm != nullptr) lastErrors.insert_or_assign(nullptr, error);  // also "the last error of this thread"
}

vigilResult_t fromException(vigilComm_t comm) {
  try {
    throw;
  } catch (const Error& e) {
    setLastError(comm, e);
    return e.result();
  } catch (const std::bad_alloc&) {
    Error e = ErrorBuilder(Errc::OpOutOfMemory).cause("out of memory").build();
    setLastError(comm, e);
    return e.result();
  } catch (const std::exception& ex) {
    Error e = ErrorBuilder(Errc::Internal).cause(ex.what()).build();
    setLastError(comm, e);
    return e.result();
  }
}

const Error* lastError(vigilComm_t comm) {
  auto it = lastErrors.find(comm);
  if (it != lastErrors.end()) return &it->second;
  // An error this thread did not see (it failed an op on another thread).
  if (comm != nullptr && comm->magic.load() == vigilComm::kLive) {
    if (auto impl = comm->impl.load()) {
      if (auto error = impl->asyncError()) return &lastErrors.insert_or_assign(comm, *error).first->second;
    }
  }
  return nullptr;
}

}  // namespace vigil::api
