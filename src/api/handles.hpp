#pragma once
// What a vigilComm_t points to. The shell outlives the communicator: after
// destroy or abort it stays (tiny, marked dead) so that a late call gets
// VG-API-007 instead of touching freed memory.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "comm/communicator.hpp"
#include "runtime/stream.hpp"

struct vigilComm {
  static constexpr uint64_t kLive = 0x5649474c434f4d4dULL;  // "VIGLCOMM"
  static constexpr uint64_t kDead = 0x44454144434f4d4dULL;  // "DEADCOMM"
  std::atomic<uint64_t> magic{kLive};
  std::atomic<std::shared_ptr<vigil::Communicator>> impl;
};

struct vigilStream {
  static constexpr uint64_t kLive = 0x5649474c5354524dULL;  // "VIGLSTRM"
  uint64_t magic = kLive;
  std::shared_ptr<vigil::Stream> impl;
};

struct vigilEvent {
  static constexpr uint64_t kLive = 0x5649474c4556454eULL;  // "VIGLEVEN"
  uint64_t magic = kLive;
  std::mutex mutex;  // record and wait may race from different threads
  vigil::Event event;
};

namespace vigil::api {

// The stream behind a handle (null for the NULL stream); throws VG-API-013
// for a pointer that is not a live vigil stream.
std::shared_ptr<Stream> streamOf(vigilStream_t stream);
vigilEvent& eventOf(vigilEvent_t event);

vigilComm_t makeHandle(std::shared_ptr<Communicator> comm);
// The live communicator behind a handle; throws VG-API-013 / VG-API-007.
std::shared_ptr<Communicator> acquire(vigilComm_t comm);
// acquire() for the hot paths: no reference count moves when this thread
// borrowed the same live handle last. The communicator stays alive until
// this thread borrows another one, retires this one, or exits.
Communicator& borrow(vigilComm_t comm);
// Detaches the communicator from its handle (destroy/abort); null if already dead.
std::shared_ptr<Communicator> retire(vigilComm_t comm);

// Runs `body`, mapping a thrown Error to its result code and storing it as
// the calling thread's last error for `comm`.
template <class Body>
vigilResult_t guarded(vigilComm_t comm, Body&& body);

// Also the thread's last error (comm NULL). Replaces the stored error, whose
// strings vigilGetLastError/vigilGetLastErrorInfo handed out.
void setLastError(vigilComm_t comm, const Error& error);
vigilResult_t fromException(vigilComm_t comm);
// The calling thread's last error for `comm` (NULL: of the thread); else the
// communicator's asynchronous error, which this thread did not see; else null.
const Error* lastError(vigilComm_t comm);

template <class Body>
vigilResult_t guarded(vigilComm_t comm, Body&& body) {
  try {
    body();
    return vigilSuccess;
  } catch (...) {
    return fromException(comm);
  }
}

}  // namespace vigil::api
