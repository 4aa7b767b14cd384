#include "comm/dump_on_signal.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string_view>
#include <thread>

#include "comm/communicator.hpp"
#include "comm/registry.hpp"
#include "core/log.hpp"
#include "core/thread.hpp"
#include "net/event_fd.hpp"

namespace vigil {
namespace {

std::atomic<int> gDumpWakeFd{-1};  // lock-free: read in the handler

extern "C" void onDumpSignal(int) {
  // Async-signal-safe: one write to an eventfd, errno preserved.
  const int saved = errno;
  uint64_t one = 1;
  ssize_t ignored = ::write(gDumpWakeFd.load(std::memory_order_relaxed), &one, sizeof one);
  (void)ignored;
  errno = saved;
}

std::optional<int> envInt(const char* var) {
  const char* text = std::getenv(var);
  if (text == nullptr || *text == '\0') return std::nullopt;
  std::string_view v(text);
  int value = 0;
  auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (ec != std::errc() || end != v.data() + v.size()) return std::nullopt;
  return value;
}

class DumpOnSignal {
 public:
  DumpOnSignal() {
    launcherRank_ = envInt("VIGIL_RANK").value_or(-1);
    // Only a pipe is written to: a stale number must not hit another file.
    if (auto fd = envInt("VIGIL_DUMP_NOTIFY_FD")) {
      struct stat st {};
      if (*fd > 2 && ::fstat(*fd, &st) == 0 && S_ISFIFO(st.st_mode)) {
        notifyFd_ = *fd;
        ::fcntl(notifyFd_, F_SETFD, FD_CLOEXEC);  // not for the rank's own children
      }
    }
    gDumpWakeFd.store(wake_.fd(), std::memory_order_relaxed);
    thread_ = startLibraryThread([this] { run(); });
    struct sigaction sa {};
    sa.sa_handler = onDumpSignal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
    notify(DumpNotice::kHandlerInstalled);
  }

  void stop() {
    stop_.signal();
    if (thread_.joinable()) thread_.join();
  }

 private:
  void run() {
    pollfd fds[2] = {{wake_.fd(), POLLIN, 0}, {stop_.fd(), POLLIN, 0}};
    while (true) {
      if (::poll(fds, 2, -1) < 0) continue;  // EINTR
      if (fds[1].revents != 0) return;
      if (fds[0].revents != 0) {
        wake_.clear();  // signals that arrive during the round make one more round
        dumpAll();
      }
    }
  }

  void dumpAll() const {
    int32_t written = 0;
    std::vector<std::shared_ptr<Communicator>> comms = liveCommunicators();
    for (const auto& comm : comms) {
      try {
        comm->dumpFlightRecorder({}, "signal");
        ++written;
      } catch (const Error& e) {
        VIGIL_LOG_AT(LogLevel::Warn, comm->rank(), "SIGUSR1: ", e.text());
      }
    }
    VIGIL_LOG_AT(LogLevel::Warn, -1, "SIGUSR1: wrote the flight recorders of ", written, " of ", comms.size(),
                 " live communicator(s)");
    notify(written);
  }

  void notify(int32_t dumpsWritten) const {
    if (notifyFd_ < 0) return;
    DumpNotice notice{launcherRank_, static_cast<int32_t>(::getpid()), dumpsWritten};
    ssize_t ignored = ::write(notifyFd_, &notice, sizeof notice);  // atomic: below PIPE_BUF
    (void)ignored;
  }

  int launcherRank_ = -1;
  int notifyFd_ = -1;
  EventFd wake_, stop_;
  std::thread thread_;
};

std::mutex gInstallMutex;
DumpOnSignal* gDumper = nullptr;  // immortal once made: the handler may fire until exit

}  // namespace

void installDumpOnSignal() {
  std::lock_guard lock(gInstallMutex);
  if (gDumper != nullptr) return;
  struct sigaction current {};
  ::sigaction(SIGUSR1, nullptr, &current);
  if ((current.sa_flags & SA_SIGINFO) != 0 || current.sa_handler != SIG_DFL) {
    static bool told = false;
    if (!told) {
      told = true;
      VIGIL_LOG_AT(LogLevel::Info, -1,
                   "SIGUSR1 has a handler of the program: vigil does not dump flight recorders on SIGUSR1");
    }
    return;
  }
  gDumper = new DumpOnSignal();
}

void stopDumpOnSignal() {
  std::lock_guard lock(gInstallMutex);
  if (gDumper != nullptr) gDumper->stop();
}

}  // namespace vigil
