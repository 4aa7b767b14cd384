#include "comm/registry.hpp"

#include <cstdlib>
#include <list>
#include <mutex>

#include "bootstrap/root_server.hpp"
#include "comm/communicator.hpp"
#include "comm/dump_on_signal.hpp"

namespace vigil {
namespace {

struct Registry {
  std::mutex mutex;
  std::list<std::weak_ptr<Communicator>> live;
};

Registry& registry() {
  static Registry* const r = new Registry();  // immortal: used by the exit handler
  return *r;
}

void destroyAll(ByeReason reason, const std::string& error) {
  std::list<std::weak_ptr<Communicator>> live;
  {
    std::lock_guard lock(registry().mutex);
    live.swap(registry().live);
  }
  for (auto& weak : live) {
    if (auto comm = weak.lock()) comm->destroy(reason, error);
  }
}

void onProcessExit() {
  destroyAll(ByeReason::ProcessExit, {});
  stopAllRootServers();
  stopDumpOnSignal();
}

}  // namespace

void destroyAllForExit(const std::string& error) {
  destroyAll(error.empty() ? ByeReason::ProcessExit : ByeReason::ProcessError, error);
}

void installExitHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    registry();
    std::atexit(onProcessExit);
  });
}

void registerCommunicator(const std::shared_ptr<Communicator>& comm) {
  {
    std::lock_guard lock(registry().mutex);
    // Drop entries of communicators already gone, so the list stays short.
    registry().live.remove_if([](const std::weak_ptr<Communicator>& w) { return w.expired(); });
    registry().live.push_back(comm);
  }
  installDumpOnSignal();
}

std::vector<std::shared_ptr<Communicator>> liveCommunicators() {
  std::vector<std::shared_ptr<Communicator>> out;
  std::lock_guard lock(registry().mutex);
  for (const auto& weak : registry().live) {
    if (auto comm = weak.lock()) out.push_back(std::move(comm));
  }
  return out;
}

}  // namespace vigil
