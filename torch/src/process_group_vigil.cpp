#include "process_group_vigil.hpp"

#include <Python.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "backend_threads.hpp"
#include "tensor_args.hpp"
#include "vigil_work.hpp"

namespace vigil::torchpg {
namespace {

// Below this group timeout, connecting waits VIGIL_CONNECT_TIMEOUT_MS
// (default 120 s) instead: ranks may reach new_group() far apart, and a short
// per-operation timeout should not fail that.
constexpr int kMinConnectTimeoutMs = 120000;

std::vector<uint8_t> bytesOf(const std::string& text) {
  return {text.begin(), text.end()};
}

// Agrees on the root info of the group's communicator through the store.
// The store may outlive a group of the same name (destroy_process_group,
// then init again): every rank counts its arrivals in the store, so the n-th
// communicator of a store prefix reads the n-th root info.
std::string rendezvous(c10d::Store& store, int rank, int size) {
  const int64_t arrivals = store.add("vigil/arrivals", 1);
  const std::string key = "vigil/root/" + std::to_string((arrivals - 1) / size);
  if (rank == 0) {
    const std::string text = vigil::RootInfo::create().toString();
    store.set(key, bytesOf(text));
    return text;
  }
  const std::vector<uint8_t> text = store.get(key);
  return std::string(text.begin(), text.end());
}

// A short name for logs and errors, the same on every rank: a hash of the
// root info, which is unique to this communicator.
std::string nameFor(const std::string& rootText) {
  uint32_t hash = 2166136261u;  // FNV-1a
  for (char c : rootText) hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
  char name[32];
  std::snprintf(name, sizeof name, "torch-%08x", hash);
  return name;
}

}  // namespace

ProcessGroupVigil::ProcessGroupVigil(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout), store_(store) {
  const std::string rootText = rendezvous(*store, rank, size);
  commName_ = nameFor(rootText);
  const int timeoutMs = static_cast<int>(std::clamp<int64_t>(timeout.count(), 1, INT32_MAX));
  vigilConfig config = VIGIL_CONFIG_INIT;
  config.timeoutMs = timeoutMs;
  config.connectTimeoutMs = timeoutMs >= kMinConnectTimeoutMs ? timeoutMs : -1;
  config.commName = commName_.c_str();
  config.timeoutName = kTimeoutName;
  comm_ = std::make_shared<vigil::Communicator>(size, vigil::RootInfo::fromString(rootText), rank, &config);
  completions_ = std::make_unique<CompletionPool>();
  p2p_ = std::make_unique<PointToPoint>(*comm_);
  queue_ = std::make_unique<OpQueue>("the group's queue", timeout);
  sequenceNum_ = c10d::SequenceNum(0);
  init();
}

ProcessGroupVigil::~ProcessGroupVigil() {
  shutDown();  // done already when a weak reference outlived the last strong one
}

void ProcessGroupVigil::release_resources() {
  // The last strong reference is gone while track's weak one lives on: c10
  // deletes the group only when that weak reference goes too, which for the
  // registry's is never. So the destructor's work is done here, now.
  shutDown();
}

void ProcessGroupVigil::shutDown() noexcept {
  if (!comm_) return;
  // The workers may hold the last reference to a Python tensor and need the
  // GIL to free it: never wait for them while holding it (Python drops the
  // group, or a DDP reducer that holds it, with the GIL held).
  PyThreadState* python = Py_IsInitialized() && PyGILState_Check() ? PyEval_SaveThread() : nullptr;
  stopThreads();
  queue_.reset();
  p2p_.reset();  // its communicator
  completions_.reset();
  {
    std::lock_guard lock(symmetricMutex_);
    symmetricBlocks_.clear();  // each holds the communicator
  }
  comm_.reset();  // destroyed here, or with the last tensor over its symmetric heap
  store_.reset();
  if (python != nullptr) PyEval_RestoreThread(python);
}

void ProcessGroupVigil::stopThreads() {
  queue_->stop();        // runs what is queued: each operation ends by its deadline
  p2p_->stop();          // the pending requests complete first
  completions_->stop();  // runs the callbacks of the last completions
}

namespace {

struct LiveGroups {
  std::mutex mutex;
  std::vector<c10::weak_intrusive_ptr<ProcessGroupVigil>> groups;
};

LiveGroups& liveGroups() {
  static LiveGroups* const live = new LiveGroups();  // immortal: used at exit
  return *live;
}

}  // namespace

void ProcessGroupVigil::track(const c10::intrusive_ptr<ProcessGroupVigil>& group) {
  LiveGroups& live = liveGroups();
  std::lock_guard lock(live.mutex);
  std::erase_if(live.groups, [](const auto& weak) { return weak.expired(); });
  live.groups.emplace_back(group);
}

void ProcessGroupVigil::stopAllForExit() {
  std::vector<c10::intrusive_ptr<ProcessGroupVigil>> groups;
  {
    LiveGroups& live = liveGroups();
    std::lock_guard lock(live.mutex);
    for (const auto& weak : live.groups) {
      if (auto group = weak.lock()) groups.push_back(std::move(group));
    }
  }
  for (const auto& group : groups) group->stopThreads();
  groups.clear();
  // Threads of groups destroyed from a thread of their own (a future's
  // callback that dropped the last reference) end on their own: wait for
  // them too, so that none takes the GIL once Python finalizes.
  constexpr std::chrono::seconds kSlice(10);
  for (size_t waited = 1; !waitForBackendThreads(kSlice); ++waited) {
    std::fprintf(stderr,
                 "vigil.torch: at exit, %zu backend thread(s) still run after %zu s (a future's callback that has "
                 "not returned, or an operation waiting for its deadline); waiting for them before Python "
                 "finalizes\n",
                 runningBackendThreads(), waited * static_cast<size_t>(kSlice.count()));
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::launch(const char* op, WorkSpec spec, std::function<void()> body) {
  sequenceNum_->increment();
  auto abortComm = [comm = comm()] { vigilCommAbortWithReason(comm, kInterruptedReason); };
  return launchOn(*queue_, std::move(abortComm), op, std::move(spec), std::move(body));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::launchOn(OpQueue& queue, std::function<void()> abortComm,
                                                           const char* op, WorkSpec spec, std::function<void()> body) {
  auto work = c10::make_intrusive<VigilWork>(site(op), spec.type, spec.title, spec.inputs, std::move(spec.outputs),
                                             *completions_, std::move(abortComm), spec.sourceRank);
  queue.push(OpQueue::Job{work->site(), [work, body = std::move(body)] { work->run(body); },
                          [work](std::exception_ptr error) { work->fail(std::move(error)); }});
  return work;
}

at::Tensor ProcessGroupVigil::singleTensor(const OpSite& where, const std::vector<at::Tensor>& tensors) const {
  if (tensors.size() != 1) {
    raise(where, ids::TorchBadTensor,
          "got " + std::to_string(tensors.size()) + " tensors; the vigil backend takes one tensor per rank",
          "pass a list with exactly one tensor (multi-device collectives are not supported)");
  }
  requireDenseCpu(where, tensors[0], "tensor");
  return tensors[0];
}

void ProcessGroupVigil::requirePeer(const OpSite& where, int peer) const {
  if (peer >= 0 && peer < size_ && peer != rank_) return;
  raise(where, ids::ApiBadPeer,
        peer == rank_ ? "peer " + std::to_string(peer) + " is this rank itself"
                      : "peer " + std::to_string(peer) + " is outside [0, " + std::to_string(size_) + ")",
        "pass another rank of the group (group ranks, not global ranks)");
}

struct ProcessGroupVigil::QueueHold::State {
  std::mutex mutex;
  std::condition_variable changed;
  bool released = false;
};

void ProcessGroupVigil::QueueHold::release() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mutex);
    state_->released = true;
  }
  state_->changed.notify_all();
}

std::unique_ptr<ProcessGroupVigil::QueueHold> ProcessGroupVigil::holdQueueForTesting() {
  auto hold = std::make_unique<QueueHold>();
  hold->state_ = std::make_shared<QueueHold::State>();
  queue_->push(OpQueue::Job{site("_hold_queue_for_testing"),
                            [state = hold->state_] {
                              std::unique_lock lock(state->mutex);
                              state->changed.wait(lock, [&] { return state->released; });
                            },
                            [](std::exception_ptr) {}});
  return hold;
}

void ProcessGroupVigil::setSequenceNumberForGroup() {
  // Every rank built the group with 0 and counts the same collectives.
}

uint64_t ProcessGroupVigil::getSequenceNumberForGroup() {
  return sequenceNum_->get();
}

}  // namespace vigil::torchpg
