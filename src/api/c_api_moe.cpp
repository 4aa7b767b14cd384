// The C API of MoE dispatch/combine: argument plumbing around src/moe/.
//
// Without a stream a call blocks. With one, the call checks what it can at
// once and queues the operation (with copies of the config and argument
// structs; the buffers they point to must stay valid until the stream gets
// there, as for every queued operation). A refusal found at the call is
// returned by the call and still queued, so that the other ranks hear it in
// the handshake instead of waiting for this rank. The handle is returned at
// once and filled when the dispatch runs: a combine queued on the same
// stream follows it; any other use waits for it first; destroying it waits
// for every queued use.

#include <algorithm>
#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include "api/handles.hpp"
#include "moe/moe.hpp"
#include "runtime/group.hpp"
#include "runtime/stream.hpp"
#include "vigil/vigil.h"

using namespace vigil;

struct vigilMoeHandle : moe::Handle {
  // Where the handle's dispatch and combines were queued: (stream, position).
  std::vector<std::pair<std::shared_ptr<Stream>, uint64_t>> queued;

  // Waits for the queued dispatch and combines that use this handle, except
  // on `except` (work queued behind them there is ordered after them anyway).
  void waitQueued(const Stream* except = nullptr) const {
    for (const auto& [stream, position] : queued) {
      if (stream.get() != except) stream->waitFor(position);
    }
  }
  bool queuedOn(const Stream* stream) const {
    for (const auto& entry : queued) {
      if (stream != nullptr && entry.first.get() == stream && !stream->reached(entry.second)) return true;
    }
    return false;
  }
};

namespace {

// The MoE handles alive now. A destroyed handle's memory is freed, so whether
// a handle is alive is looked up here, never read from the handle. Sharded by
// address, so that ranks-as-threads do not meet on one lock.
class LiveHandles {
 public:
  void add(const vigilMoeHandle* h) {
    Shard& s = shardOf(h);
    std::lock_guard lock(s.mutex);
    s.live.insert(h);
  }
  // False if `h` was not alive (already destroyed, or never a handle).
  bool remove(const vigilMoeHandle* h) {
    Shard& s = shardOf(h);
    std::lock_guard lock(s.mutex);
    return s.live.erase(h) == 1;
  }
  bool contains(const vigilMoeHandle* h) {
    Shard& s = shardOf(h);
    std::lock_guard lock(s.mutex);
    return s.live.count(h) == 1;
  }

 private:
  static constexpr size_t kShards = 16;
  struct alignas(64) Shard {
    std::mutex mutex;
    std::unordered_set<const vigilMoeHandle*> live;
  };
  Shard& shardOf(const vigilMoeHandle* h) { return shards_[(reinterpret_cast<uintptr_t>(h) >> 6) % kShards]; }
  std::array<Shard, kShards> shards_;
};

LiveHandles& liveHandles() {
  static auto* live = new LiveHandles;  // never destroyed: handles may be destroyed during exit
  return *live;
}

constexpr const char* kNotLive = "the handle was destroyed (vigilMoeHandleDestroy) or is not a vigil MoE handle";

// NULL passes: the full checks name it.
void requireLive(const Communicator& c, vigilMoeHandle_t handle, const char* call) {
  if (handle != nullptr && !liveHandles().contains(handle)) {
    c.error(Errc::MoeBadHandle).op(call).cause(kNotLive).raise();
  }
}

void needOut(const void* p, const char* call, const char* name) {
  if (p == nullptr) ErrorBuilder(Errc::ApiNullArgument).op(call).cause(name, " is NULL").raise();
}

// MoE calls are collectives with a handshake of their own: not in a group.
void notInGroup(const Communicator& c, const char* call) {
  if (group::active()) c.error(Errc::MoeInGroup).op(call).cause(call, " was called inside a group").raise();
}

template <class T>
std::optional<T> copyOf(const T* p) {
  return p ? std::optional<T>(*p) : std::nullopt;
}

template <class T>
const T* ptr(const std::optional<T>& v) {
  return v ? &*v : nullptr;
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
    notInGroup(*c, "vigilMoeDispatch");
    std::shared_ptr<Stream> s = api::streamOf(stream);
    if (!s) {
      auto out = std::make_unique<vigilMoeHandle>();
      moe::dispatch(c, cfg, args, workspace, workspaceBytes, *out);
      liveHandles().add(out.get());
      *handle = out.release();
      return;
    }
    std::optional<Error> refused;
    try {
      moe::validateDispatch(*c, cfg, args, workspace, workspaceBytes, true);
    } catch (const Error& e) {
      refused = e;
    }
    vigilMoeHandle* out = nullptr;
    if (!refused) {
      out = new vigilMoeHandle;
      out->comm = c;
      out->commId = c.get();
      out->configDigest = moe::configDigest(*cfg);
      liveHandles().add(out);
    }
    s->enqueue([c, cfg = copyOf(cfg), args = copyOf(args), workspace, workspaceBytes, refused, out] {
      moe::Handle unused;
      try {
        moe::dispatch(c, ptr(cfg), ptr(args), workspace, workspaceBytes, out ? *out : unused, refused);
      } catch (const Error&) {
        if (!refused) throw;  // else the call returned it already
      }
    });
    if (refused) throw *refused;
    out->queued.emplace_back(s, s->position());
    *handle = out;
  });
}

vigilResult_t vigilMoeCombineGetWorkspaceSize(const vigilMoeConfig* cfg, vigilMoeHandle_t handle, vigilComm_t comm,
                                              size_t* workspaceBytes) {
  return api::guarded(comm, [&] {
    needOut(workspaceBytes, "vigilMoeCombineGetWorkspaceSize", "workspaceBytes");
    needOut(cfg, "vigilMoeCombineGetWorkspaceSize", "cfg");
    std::shared_ptr<Communicator> c = api::acquire(comm);
    requireLive(*c, handle, "vigilMoeCombineGetWorkspaceSize");
    moe::checkHandle(*c, *cfg, handle, "vigilMoeCombineGetWorkspaceSize", true);
    handle->waitQueued();  // the size depends on the routing
    moe::checkHandle(*c, *cfg, handle, "vigilMoeCombineGetWorkspaceSize");
    *workspaceBytes = moe::combineWorkspaceBytes(*handle);
  });
}

vigilResult_t vigilMoeCombine(const vigilMoeConfig* cfg, vigilMoeHandle_t handle, const vigilMoeCombineArgs* args,
                              void* workspace, size_t workspaceBytes, vigilComm_t comm, vigilStream_t stream) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    c->checkUsable();
    notInGroup(*c, "vigilMoeCombine");
    std::shared_ptr<Stream> s = api::streamOf(stream);
    std::optional<Error> refused;
    try {
      // A handle whose dispatch is queued elsewhere is waited for; on this
      // stream the combine simply comes after it, and is checked in full there.
      requireLive(*c, handle, "vigilMoeCombine");
      if (cfg != nullptr) moe::checkHandle(*c, *cfg, handle, "vigilMoeCombine", true);
      const bool behind = handle != nullptr && handle->queuedOn(s.get());
      if (handle != nullptr) handle->waitQueued(s.get());
      if (!behind) moe::checkCombine(*c, cfg, handle, args, workspace, workspaceBytes);
    } catch (const Error& e) {
      refused = e;
    }
    if (!s) return moe::combine(c, cfg, handle, args, workspace, workspaceBytes, refused);
    s->enqueue([c, cfg = copyOf(cfg), handle, args = copyOf(args), workspace, workspaceBytes, refused] {
      try {
        moe::combine(c, ptr(cfg), handle, ptr(args), workspace, workspaceBytes, refused);
      } catch (const Error&) {
        if (!refused) throw;  // else the call returned it already
      }
    });
    if (refused) throw *refused;
    handle->queued.emplace_back(s, s->position());
  });
}

vigilResult_t vigilMoeRefuse(int combine, const char* errorId, vigilComm_t comm) {
  return api::guarded(comm, [&] {
    const char* call = combine ? "vigilMoeCombine" : "vigilMoeDispatch";
    if (errorId == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilMoeRefuse").cause("errorId is NULL").raise();
    const auto table = allErrcInfo();
    const auto info =
        std::find_if(table.begin(), table.end(), [&](const ErrcInfo& i) { return std::string_view(i.id) == errorId; });
    if (info == table.end()) {
      ErrorBuilder(Errc::ApiBadConfig)
          .op("vigilMoeRefuse")
          .cause("'", errorId, "' is not a vigil error id")
          .remedy("pass the id of the refusal, as vigil-doctor explain lists them")
          .raise();
    }
    std::shared_ptr<Communicator> c = api::acquire(comm);
    c->checkUsable();
    notInGroup(*c, call);
    const Error refusal =
        c->error(info->errc).op(call).cause("refused by the caller's own checks (", info->meaning, ")").build();
    try {
      if (combine) {
        moe::combine(c, nullptr, nullptr, nullptr, nullptr, 0, refusal);
      } else {
        moe::Handle unused;
        moe::dispatch(c, nullptr, nullptr, nullptr, 0, unused, refusal);
      }
    } catch (const Error& e) {
      if (e.text() != refusal.text()) throw;  // the handshake itself failed
    }
  });
}

vigilResult_t vigilMoeHandleDestroy(vigilMoeHandle_t handle) {
  return api::guarded(nullptr, [&] {
    if (handle == nullptr) return;
    // Dead from here on for every other call, while its queued uses finish.
    if (!liveHandles().remove(handle))
      ErrorBuilder(Errc::MoeBadHandle).op("vigilMoeHandleDestroy").cause(kNotLive).raise();
    handle->waitQueued();
    delete handle;
  });
}

int64_t vigilMoeRequiredRows(const vigilMoeConfig* cfg, int rank) {
  // No capacity for a config that dispatch would refuse.
  if (cfg == nullptr || !moe::configProblem(*cfg).empty() || rank < 0 || rank >= cfg->epWorldSize) return -1;
  return moe::Placement(*cfg).requiredRows(rank);
}

}  // extern "C"
