// The C API of MoE dispatch/combine: argument plumbing around src/moe/.
// A call with a stream first drains that stream (the operation then runs in
// stream order, on the calling thread), so its handle is ready on return.

#include "api/handles.hpp"
#include "moe/moe.hpp"
#include "runtime/stream.hpp"
#include "vigil/vigil.h"

using namespace vigil;

struct vigilMoeHandle : moe::Handle {};

namespace {

void drain(vigilStream_t stream) {
  if (std::shared_ptr<Stream> s = api::streamOf(stream)) s->synchronize();
}

void needOut(const void* p, const char* call, const char* name) {
  if (p == nullptr) ErrorBuilder(Errc::ApiNullArgument).op(call).cause(name, " is NULL").raise();
}

}  // namespace

extern "C" {

vigilResult_t vigilMoeDispatchGetWorkspaceSize(const vigilMoeConfig* cfg, const vigilMoeDispatchArgs* args,
                                               vigilComm_t comm, size_t* workspaceBytes) {
  return api::guarded(comm, [&] {
    needOut(workspaceBytes, "vigilMoeDispatchGetWorkspaceSize", "workspaceBytes");
    std::shared_ptr<Communicator> c = api::acquire(comm);
    moe::validateDispatch(*c, cfg, args, nullptr, 0, false);
    *workspaceBytes = moe::dispatchWorkspaceBytes(*cfg, *args);
  });
}

vigilResult_t vigilMoeDispatch(const vigilMoeConfig* cfg, const vigilMoeDispatchArgs* args, void* workspace,
                               size_t workspaceBytes, vigilMoeHandle_t* handle, vigilComm_t comm,
                               vigilStream_t stream) {
  return api::guarded(comm, [&] {
    needOut(handle, "vigilMoeDispatch", "handle");
    *handle = nullptr;
    std::shared_ptr<Communicator> c = api::acquire(comm);
    c->checkUsable();
    drain(stream);
    std::unique_ptr<moe::Handle> h = moe::dispatch(c, cfg, args, workspace, workspaceBytes);
    auto* out = new vigilMoeHandle;
    static_cast<moe::Handle&>(*out) = std::move(*h);
    *handle = out;
  });
}

vigilResult_t vigilMoeCombineGetWorkspaceSize(const vigilMoeConfig* cfg, vigilMoeHandle_t handle, vigilComm_t comm,
                                              size_t* workspaceBytes) {
  return api::guarded(comm, [&] {
    needOut(workspaceBytes, "vigilMoeCombineGetWorkspaceSize", "workspaceBytes");
    needOut(cfg, "vigilMoeCombineGetWorkspaceSize", "cfg");
    std::shared_ptr<Communicator> c = api::acquire(comm);
    moe::checkHandle(*c, *cfg, handle, "vigilMoeCombineGetWorkspaceSize");
    *workspaceBytes = moe::combineWorkspaceBytes(*handle);
  });
}

vigilResult_t vigilMoeCombine(const vigilMoeConfig* cfg, vigilMoeHandle_t handle, const vigilMoeCombineArgs* args,
                              void* workspace, size_t workspaceBytes, vigilComm_t comm, vigilStream_t stream) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    c->checkUsable();
    drain(stream);
    moe::combine(c, cfg, handle, args, workspace, workspaceBytes);
  });
}

vigilResult_t vigilMoeHandleDestroy(vigilMoeHandle_t handle) {
  return api::guarded(nullptr, [&] {
    if (handle == nullptr) return;
    if (handle->magic != moe::Handle::kLive) {
      ErrorBuilder(Errc::MoeBadHandle)
          .op("vigilMoeHandleDestroy")
          .cause("the handle was already destroyed or is not a vigil MoE handle")
          .raise();
    }
    handle->magic = 0;
    delete handle;
  });
}

int64_t vigilMoeRequiredRows(const vigilMoeConfig* cfg, int rank) {
  // No capacity for a config that dispatch would refuse.
  if (cfg == nullptr || !moe::configProblem(*cfg).empty() || rank < 0 || rank >= cfg->epWorldSize) return -1;
  return moe::Placement(*cfg).requiredRows(rank);
}

}  // extern "C"
