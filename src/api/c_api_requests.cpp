// The C API of the non-blocking tagged sends and receives: vigilIsendTag,
// vigilIrecvTag, vigilWait, vigilWaitAny, vigilTest (comm/requests.cpp).

#include <memory>
#include <vector>

#include "api/handles.hpp"
#include "comm/communicator.hpp"
#include "vigil/vigil.h"

using namespace vigil;

struct vigilRequest_st {
  static constexpr uint32_t kMagic = 0x76475251;  // "vGRQ"
  uint32_t magic = kMagic;
  vigilComm_t comm;
  std::shared_ptr<Request> request;
};

namespace {

vigilResult_t post(vigilComm_t comm, const OpDesc& op, vigilRequest_t* request, const char* label) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    if (request == nullptr) c->error(Errc::ApiNullArgument).op(label).cause("request is NULL").raise();
    *request = VIGIL_REQUEST_NULL;
    std::shared_ptr<Request> r = c->post(op);
    *request = new vigilRequest_st{.comm = comm, .request = std::move(r)};
  });
}

// The live request behind a handle; VG-API-024 otherwise.
vigilRequest_st& requestOf(vigilRequest_t* request, const char* label) {
  if (request == nullptr || *request == VIGIL_REQUEST_NULL || (*request)->magic != vigilRequest_st::kMagic) {
    ErrorBuilder(Errc::ApiBadRequest)
        .op(label)
        .cause(request == nullptr               ? "the request pointer is NULL"
               : *request == VIGIL_REQUEST_NULL ? "the request is VIGIL_REQUEST_NULL (completed, or never posted)"
                                                : "the request is not one that vigilIsendTag or vigilIrecvTag returned")
        .raise();
  }
  return **request;
}

// Frees a request that completed (or whose communicator failed: it never will).
void release(vigilRequest_t* request, vigilStatus* status) {
  if (status != nullptr) *status = (*request)->request->status;
  (*request)->magic = 0;
  delete *request;
  *request = VIGIL_REQUEST_NULL;
}

// Runs a wait of `c` on `reqs`; a failure frees them (they cannot complete any more).
int waitOn(Communicator& c, std::span<vigilRequest_t* const> handles, Communicator::WaitMode mode) {
  std::vector<Request*> reqs;
  reqs.reserve(handles.size());
  for (vigilRequest_t* h : handles) reqs.push_back((*h)->request.get());
  try {
    return c.waitRequests(reqs, mode);
  } catch (...) {
    for (vigilRequest_t* h : handles) release(h, nullptr);
    throw;
  }
}

}  // namespace

extern "C" {

vigilResult_t vigilIsendTag(const void* sendbuff, size_t count, vigilDataType_t datatype, int peer, int tag,
                            vigilComm_t comm, vigilRequest_t* request) {
  OpDesc d{OpKind::Send, sendbuff, nullptr, count, datatype};
  d.peer = peer;
  d.tagged = true;
  d.tag = tag;
  return post(comm, d, request, "isend");
}

vigilResult_t vigilIrecvTag(void* recvbuff, size_t count, vigilDataType_t datatype, int source, int tag,
                            vigilComm_t comm, vigilRequest_t* request) {
  OpDesc d{OpKind::Recv, nullptr, recvbuff, count, datatype};
  d.peer = source;
  d.tagged = true;
  d.tag = tag;
  return post(comm, d, request, "irecv");
}

vigilResult_t vigilWait(vigilRequest_t* request, vigilStatus* status) {
  vigilComm_t comm = nullptr;
  return api::guarded(comm, [&] {
    vigilRequest_st& r = requestOf(request, "wait");
    comm = r.comm;
    std::shared_ptr<Communicator> c = api::acquire(comm);
    vigilRequest_t* handles[1] = {request};
    waitOn(*c, handles, Communicator::WaitMode::Wait);
    release(request, status);
  });
}

vigilResult_t vigilTest(vigilRequest_t* request, int* flag, vigilStatus* status) {
  vigilComm_t comm = nullptr;
  return api::guarded(comm, [&] {
    vigilRequest_st& r = requestOf(request, "test");
    comm = r.comm;
    std::shared_ptr<Communicator> c = api::acquire(comm);
    if (flag == nullptr) c->error(Errc::ApiNullArgument).op("test").cause("flag is NULL").raise();
    vigilRequest_t* handles[1] = {request};
    *flag = 0;
    if (waitOn(*c, handles, Communicator::WaitMode::Test) < 0) return;
    *flag = 1;
    release(request, status);
  });
}

vigilResult_t vigilRequestFree(vigilRequest_t* request) {
  return api::guarded(nullptr, [&] {
    requestOf(request, "request free");
    release(request, nullptr);
  });
}

vigilResult_t vigilWaitAny(int count, vigilRequest_t* requests, int* index, vigilStatus* status) {
  vigilComm_t comm = nullptr;
  return api::guarded(comm, [&] {
    if (index == nullptr || (count > 0 && requests == nullptr)) {
      ErrorBuilder(Errc::ApiNullArgument)
          .op("waitany")
          .cause(index == nullptr ? "index" : "requests", " is NULL")
          .raise();
    }
    *index = -1;
    std::vector<vigilRequest_t*> active;
    std::vector<int> positions;
    for (int i = 0; i < count; ++i) {
      if (requests[i] == VIGIL_REQUEST_NULL) continue;
      vigilRequest_st& r = requestOf(&requests[i], "waitany");
      if (comm == nullptr) comm = r.comm;
      if (r.comm != comm) {
        ErrorBuilder(Errc::ApiBadRequest)
            .op("waitany")
            .cause("requests[", i, "] belongs to another communicator than requests[", positions.front(), "]")
            .raise();
      }
      active.push_back(&requests[i]);
      positions.push_back(i);
    }
    if (active.empty()) return;  // nothing to wait for
    std::shared_ptr<Communicator> c = api::acquire(comm);
    const int done = waitOn(*c, active, Communicator::WaitMode::WaitAny);
    if (done < 0) return;  // woken: a request was posted on the communicator
    *index = positions[static_cast<size_t>(done)];
    release(active[static_cast<size_t>(done)], status);
  });
}

}  // extern "C"
