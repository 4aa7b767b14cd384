// The C API of streams, events and host functions.

#include <atomic>
#include <cstring>

#include "api/handles.hpp"
#include "vigil/vigil.h"

using namespace vigil;

namespace {

std::atomic<uint64_t> nextStreamId{1};

}  // namespace

extern "C" {

vigilResult_t vigilStreamCreate(vigilStream_t* stream) {
  return api::guarded(nullptr, [&] {
    if (stream == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilStreamCreate").cause("stream is NULL").raise();
    auto handle = std::make_unique<vigilStream>();
    handle->impl = std::make_shared<Stream>(cat("s", nextStreamId.fetch_add(1)));
    *stream = handle.release();  // owned by the caller until vigilStreamDestroy
  });
}

vigilResult_t vigilStreamDestroy(vigilStream_t stream) {
  return api::guarded(nullptr, [&] {
    if (api::streamOf(stream) == nullptr) {
      ErrorBuilder(Errc::ApiNullArgument).op("vigilStreamDestroy").cause("stream is NULL").raise();
    }
    std::unique_ptr<vigilStream> handle(stream);
    handle->magic = 0;
    // The worker finishes the queued work and joins when the last holder
    // (this handle, or an event recorded on it) lets go.
  });
}

vigilResult_t vigilStreamSynchronize(vigilStream_t stream) {
  return api::guarded(nullptr, [&] {
    if (auto s = api::streamOf(stream)) s->synchronize();
  });
}

vigilResult_t vigilStreamQuery(vigilStream_t stream) {
  vigilResult_t rc = vigilSuccess;
  vigilResult_t err = api::guarded(nullptr, [&] {
    std::shared_ptr<Stream> s = api::streamOf(stream);
    if (!s) return;
    if (auto e = s->error()) throw *e;
    if (!s->idle()) rc = vigilInProgress;
  });
  return err != vigilSuccess ? err : rc;
}

vigilResult_t vigilLaunchHostFunc(vigilStream_t stream, vigilHostFn_t fn, void* userData) {
  return api::guarded(nullptr, [&] {
    if (fn == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilLaunchHostFunc").cause("fn is NULL").raise();
    std::shared_ptr<Stream> s = api::streamOf(stream);
    if (!s) {
      fn(userData);  // the NULL stream is the caller
      return;
    }
    s->enqueue([fn, userData] { fn(userData); });
  });
}

vigilResult_t vigilMemcpyAsync(void* dst, const void* src, size_t bytes, vigilStream_t stream) {
  return api::guarded(nullptr, [&] {
    if (bytes > 0 && (dst == nullptr || src == nullptr)) {
      ErrorBuilder(Errc::ApiNullArgument)
          .op("vigilMemcpyAsync")
          .cause(dst == nullptr ? "dst" : "src", " is NULL but bytes is ", bytes)
          .raise();
    }
    std::shared_ptr<Stream> s = api::streamOf(stream);
    if (!s) {
      if (bytes > 0) std::memmove(dst, src, bytes);
      return;
    }
    if (bytes > 0) s->enqueue([dst, src, bytes] { std::memmove(dst, src, bytes); });
  });
}

vigilResult_t vigilEventCreate(vigilEvent_t* event) {
  return api::guarded(nullptr, [&] {
    if (event == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilEventCreate").cause("event is NULL").raise();
    *event = std::make_unique<vigilEvent>().release();  // owned by the caller until vigilEventDestroy
  });
}

vigilResult_t vigilEventRecord(vigilEvent_t event, vigilStream_t stream) {
  return api::guarded(nullptr, [&] {
    vigilEvent& e = api::eventOf(event);
    std::shared_ptr<Stream> s = api::streamOf(stream);
    std::lock_guard lock(e.mutex);
    e.event.position = s ? s->position() : 0;
    e.event.stream = std::move(s);  // NULL stream: complete at once
  });
}

vigilResult_t vigilStreamWaitEvent(vigilStream_t stream, vigilEvent_t event) {
  return api::guarded(nullptr, [&] {
    vigilEvent& e = api::eventOf(event);
    Event marker;
    {
      std::lock_guard lock(e.mutex);
      marker = e.event;
    }
    std::shared_ptr<Stream> s = api::streamOf(stream);
    if (!marker.stream || marker.stream == s) return;  // done, or already ordered by the stream itself
    if (!s) {
      marker.stream->waitFor(marker.position);  // the NULL stream is the caller: block it
      return;
    }
    s->enqueue([marker] { marker.stream->waitFor(marker.position); });
  });
}

vigilResult_t vigilEventSynchronize(vigilEvent_t event) {
  return api::guarded(nullptr, [&] {
    vigilEvent& e = api::eventOf(event);
    Event marker;
    {
      std::lock_guard lock(e.mutex);
      marker = e.event;
    }
    if (!marker.stream) return;
    marker.stream->waitFor(marker.position);
    if (auto error = marker.stream->error()) throw *error;  // the work it waited for failed
  });
}

vigilResult_t vigilEventQuery(vigilEvent_t event) {
  vigilResult_t rc = vigilSuccess;
  vigilResult_t err = api::guarded(nullptr, [&] {
    vigilEvent& e = api::eventOf(event);
    std::lock_guard lock(e.mutex);
    if (e.event.stream && !e.event.stream->reached(e.event.position)) rc = vigilInProgress;
  });
  return err != vigilSuccess ? err : rc;
}

vigilResult_t vigilEventDestroy(vigilEvent_t event) {
  return api::guarded(nullptr, [&] {
    std::unique_ptr<vigilEvent> handle(&api::eventOf(event));
    handle->magic = 0;
  });
}

}  // extern "C"
