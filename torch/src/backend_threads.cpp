#include "backend_threads.hpp"

#include <condition_variable>
#include <mutex>

namespace vigil::torchpg {
namespace {

struct Running {
  std::mutex mutex;
  std::condition_variable ended;
  size_t count = 0;
};

Running& running() {
  static Running* const r = new Running();  // immortal: threads may end during static destruction
  return *r;
}

void ended() {
  Running& r = running();
  {
    std::lock_guard lock(r.mutex);
    --r.count;
  }
  r.ended.notify_all();
}

}  // namespace

std::thread startBackendThread(std::function<void()> body) {
  {
    std::lock_guard lock(running().mutex);
    ++running().count;  // before it starts: a wait that follows sees it
  }
  try {
    return std::thread([body = std::move(body)] {
      struct Counted {
        ~Counted() { ended(); }
      } counted;
      body();
    });
  } catch (...) {
    ended();  // it never started
    throw;
  }
}

size_t runningBackendThreads() {
  std::lock_guard lock(running().mutex);
  return running().count;
}

bool waitForBackendThreads(std::chrono::milliseconds timeout) {
  Running& r = running();
  std::unique_lock lock(r.mutex);
  return r.ended.wait_for(lock, timeout, [&] { return r.count == 0; });
}

}  // namespace vigil::torchpg
