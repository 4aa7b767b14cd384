// vigil-run: start N local ranks of a vigil program and look after them.
//
// The launcher calls vigilGetRootInfo() itself, so the rendezvous listener runs in a
// background thread of this process; that is why it waits for the ranks instead of exec'ing.
// Ranks find the root info and their rank in the environment (vigilCommInitFromEnv).
// Output is prefixed "[rank] " line by line. The first rank that fails stops the others, so
// a crash never leaves its peers blocked in a collective until their own timeouts fire.
// All ranks share one new process group: one killpg() also reaches their helpers
// (`sh -c` children), and a terminal Ctrl-C reaches the ranks once, through our forwarding.
// With VIGIL_DUMP_DIR set, the others are first asked for their flight recorders (SIGUSR1)
// and stopped once all have written them (each rank says so on a pipe) or --dump-grace ends,
// so `vigil-doctor dumps` sees every rank. SIGUSR1 to vigil-run (`vigil-run --dump PID`)
// asks the running ranks for their flight recorders at any time.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vigil/vigil.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/dump_on_signal.hpp"
#include "run_env.hpp"
#include "run_options.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;
using vigil::DumpNotice;
using vigil::run::askForDumps;
using vigil::run::Options;
using vigil::run::parseArgs;
using vigil::run::rankEnv;
using vigil::run::setTorchRendezvous;

constexpr int kExitTimeout = 124;
constexpr int kExitExecFailed = 127;
constexpr size_t kMaxLine = 64 * 1024;                  // longer lines are cut: bounded memory per rank
constexpr auto kDrainWindow = std::chrono::seconds(1);  // for pipes held by leftover helpers

// Owns one file descriptor, so every exit path closes what was opened.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Fd& operator=(Fd&& o) noexcept { return reset(std::exchange(o.fd_, -1)), *this; }
  ~Fd() { reset(); }
  int get() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Signals become bytes on a pipe, so the poll() loop sees them with the output pipes.
std::atomic<int> gSignalWriteFd{-1};  // lock-free: read in the handler
extern "C" void onSignal(int sig) {
  int savedErrno = errno;
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t r =
      ::write(gSignalWriteFd.load(std::memory_order_relaxed), &b, 1);  // a full pipe already has a wake-up queued
  (void)r;
  errno = savedErrno;
}

// Installs the handlers and puts the old dispositions back before the pipe closes, so a late
// signal never writes to a reused fd number.
class SignalPipe {
 public:
  static constexpr int kSignals[] = {SIGCHLD, SIGINT, SIGTERM, SIGPIPE, SIGUSR1};

  SignalPipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return;
    read_.reset(fds[0]);
    write_.reset(fds[1]);
    gSignalWriteFd.store(fds[1], std::memory_order_relaxed);
    for (size_t i = 0; i < std::size(kSignals); ++i) {
      sigaction(kSignals[i], nullptr, &old_[i]);
      // A launcher started with SIGINT ignored (a background job) keeps ignoring it.
      if (kSignals[i] == SIGINT && old_[i].sa_handler == SIG_IGN) continue;
      struct sigaction sa {};
      // SIGPIPE: a closed stdout must not kill us while ranks still run.
      sa.sa_handler = kSignals[i] == SIGPIPE ? SIG_IGN : onSignal;
      sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
      sigaction(kSignals[i], &sa, nullptr);
    }
  }
  ~SignalPipe() { restore(); }

  bool ok() const { return read_.open(); }
  int fd() const { return read_.get(); }
  // Async-signal-safe: the forked child calls it too, so ranks start with our dispositions.
  void restore() const {
    for (size_t i = 0; ok() && i < std::size(kSignals); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  Fd read_, write_;
  struct sigaction old_[std::size(kSignals)]{};
};

// Writes all of `s`. False: our stdout/stderr is gone (e.g. `vigil-run ... | head`).
bool writeAll(int fd, std::string_view s) {
  while (!s.empty()) {
    ssize_t n = ::write(fd, s.data(), s.size());
    pollfd p{fd, POLLOUT, 0};
    if (n > 0)
      s.remove_prefix(static_cast<size_t>(n));
    else if (n < 0 && errno == EAGAIN)
      ::poll(&p, 1, -1);  // our stdout may be non-blocking
    else if (n < 0 && errno != EINTR)
      return false;
  }
  return true;
}

// One child output pipe; holds bytes until a whole line can be written with its prefix.
struct Stream {
  Fd fd;
  int outFd = 1;  // where its lines go: our stdout or stderr
  std::string prefix, pending;

  void consume(const char* data, size_t n) {
    std::string out;
    size_t lineStart = 0, scan = pending.size();  // pending never holds a newline
    pending.append(data, n);
    for (size_t nl; (nl = pending.find('\n', scan)) != std::string::npos;) {
      out.append(prefix).append(pending, lineStart, nl + 1 - lineStart);
      lineStart = scan = nl + 1;
    }
    pending.erase(0, lineStart);
    if (pending.size() > kMaxLine) flushPartial(out);
    // We are the only writer and write whole lines: no interleaving. When our output is gone,
    // closing the pipe gives the rank its SIGPIPE, as in a plain shell pipeline.
    if (!writeAll(outFd, out)) fd.reset();
  }
  void flushPartial(std::string& out) {
    if (!pending.empty()) out.append(prefix).append(pending).push_back('\n');
    pending.clear();
  }
  void close() {
    std::string out;
    flushPartial(out);
    writeAll(outFd, out);
    fd.reset();
  }
  // One read per wake-up keeps a chatty rank from starving the others. False: nothing to read.
  bool readOnce() {
    static char buf[64 * 1024];
    if (!fd.open()) return false;
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n > 0) return consume(buf, static_cast<size_t>(n)), true;
    if (n == 0 || (errno != EAGAIN && errno != EINTR)) close();
    return false;
  }
};

// Runs in the forked child: async-signal-safe calls only (strerror may lock and allocate).
// Several writes are fine, the launcher joins them into one line.
[[noreturn]] void execFailed(const char* prog, int err) {
  const char* why = strerrordesc_np(err);
  for (const char* part : {"vigil-run: cannot execute '", prog, "': ", why ? why : "?", "\n"}) {
    ssize_t r = ::write(2, part, std::strlen(part));
    (void)r;
  }
  _exit(kExitExecFailed);
}

std::string signalText(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  std::string name = abbrev ? std::string("SIG") + abbrev : std::string(strsignal(sig));
  return name + " (" + std::to_string(sig) + ")";
}

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

class Launcher {
 public:
  Launcher(Options opt, std::string rootHex)
      : opt_(std::move(opt)), rootHex_(std::move(rootHex)), startedAt_(Clock::now()) {}

  int run() {
    if (!signals_.ok()) return report("cannot create the signal pipe", errno), 1;
    if (!makeNotifyPipe()) return 1;
    if (!spawnAll()) beginStop(SIGTERM);  // stop the ranks already started
    while (!finished()) step();
    for (auto& s : streams_)
      if (s.fd.open()) s.close();
    return exitCode_.value_or(interruptSig_ ? 128 + interruptSig_ : 0);
  }

 private:
  // Launcher-side failure: exit 1 unless a rank failed first.
  bool report(const char* what, int err) {
    std::fprintf(stderr, "vigil-run: %s: %s\n", what, std::strerror(err));
    exitCode_ = exitCode_.value_or(1);
    return false;
  }

  // Signals stay blocked across fork, so a child never runs our handler before its exec.
  bool spawnAll() {
    Fd devNull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!devNull.open()) return report("cannot open /dev/null", errno);
    sigset_t block, old;
    sigemptyset(&block);
    for (int s : SignalPipe::kSignals) sigaddset(&block, s);
    ::sigprocmask(SIG_BLOCK, &block, &old);
    bool ok = true;
    for (int r = 0; r < opt_.nranks && ok; ++r) ok = spawn(r, devNull.get(), old);
    ::sigprocmask(SIG_SETMASK, &old, nullptr);
    return ok;
  }

  bool spawn(int rank, int devNull, const sigset_t& mask) {
    Fd outR, outW, errR, errW;
    if (!makePipe(outR, outW) || !makePipe(errR, errW)) return report("cannot create a pipe (see ulimit -n)", errno);
    std::vector<std::string> env = rankEnv(rootHex_, rank, opt_.nranks, notifyWrite_.get());
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    pid_t parent = ::getpid(), pid = ::fork();
    if (pid < 0) return report("cannot fork", errno);
    if (pid == 0) {
      int stdio[] = {devNull, outW.get(), errW.get()};
      runChild(parent, stdio, envp.data(), mask);
    }
    if (pgid_ == 0) pgid_ = pid;  // the first rank leads the group
    ::setpgid(pid, pgid_);        // also here, so the group is set before we ever signal it
    pids_.push_back(pid);
    awaitingDump_.push_back(false);
    handlesDumps_.push_back(false);
    ++running_;
    addStream(std::move(outR), 1, rank);
    addStream(std::move(errR), 2, rank);
    return true;
  }

  // The ranks' library writes one DumpNotice (src/comm/dump_on_signal.hpp) per round of dumps.
  bool makeNotifyPipe() {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC | O_NONBLOCK) != 0) return report("cannot create the dump notice pipe", errno);
    notifyRead_.reset(fds[0]);
    notifyWrite_.reset(fds[1]);
    return true;
  }

  static bool makePipe(Fd& readEnd, Fd& writeEnd) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return false;
    readEnd.reset(fds[0]);
    writeEnd.reset(fds[1]);
    return true;
  }

  // Between fork and exec only async-signal-safe calls: another thread may hold a lock.
  [[noreturn]] void runChild(pid_t parent, const int (&stdio)[3], char** envp, const sigset_t& mask) const {
    ::setpgid(0, pgid_);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);                    // a SIGKILLed launcher takes its ranks along,
    if (::getppid() != parent) _exit(1);                   // also when it died before the line above
    for (int fd = 0; fd < 3; ++fd) ::dup2(stdio[fd], fd);  // dup2 clears O_CLOEXEC
    ::fcntl(notifyWrite_.get(), F_SETFD, 0);               // the rank keeps the dump notice pipe
    signals_.restore();
    ::sigprocmask(SIG_SETMASK, &mask, nullptr);
    environ = envp;
    ::execvp(opt_.argv[0], opt_.argv.data());
    execFailed(opt_.argv[0], errno);
  }

  void addStream(Fd fd, int outFd, int rank) {
    ::fcntl(fd.get(), F_SETFL, ::fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
    std::string prefix = "[";
    prefix += std::to_string(rank);
    prefix += "] ";
    streams_.push_back({std::move(fd), outFd, std::move(prefix), {}});
  }

  bool finished() const {
    if (running_ > 0) return false;
    auto open = [](const Stream& s) { return s.fd.open(); };
    if (std::none_of(streams_.begin(), streams_.end(), open)) return true;
    if (Clock::now() < drainUntil_) return false;
    std::fprintf(stderr,
                 "vigil-run: output pipes still open after all ranks exited "
                 "(background processes?); not waiting for them\n");
    return true;
  }

  void step() {
    std::vector<pollfd> fds{{signals_.fd(), POLLIN, 0}, {notifyRead_.get(), POLLIN, 0}};
    std::vector<Stream*> owners{nullptr, nullptr};
    for (auto& s : streams_) {
      if (!s.fd.open()) continue;
      fds.push_back({s.fd.get(), POLLIN, 0});
      owners.push_back(&s);
    }
    // poll() fails only with EINTR or ENOMEM; both are worth another round.
    int n = ::poll(fds.data(), fds.size(), pollTimeoutMs());
    for (size_t i = 2; n > 0 && i < fds.size(); ++i)
      if (fds[i].revents != 0) owners[i]->readOnce();
    if (n > 0 && fds[1].revents != 0) readDumpNotices();
    if (n > 0 && fds[0].revents != 0) handleSignals();
    handleTimers();
  }

  // The nearest deadline: --timeout, the end of --grace, or the drain window.
  int pollTimeoutMs() const {
    std::optional<Clock::time_point> next;
    auto consider = [&](Clock::time_point t) { next = next ? std::min(*next, t) : t; };
    if (opt_.timeoutS > 0 && !stopping_) consider(startedAt_ + seconds(opt_.timeoutS));
    if (termAt_ && !killAt_) consider(*termAt_);
    if (killAt_ && !killed_) consider(*killAt_);
    if (running_ == 0) consider(drainUntil_);
    if (!next) return -1;
    auto ms = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
    return static_cast<int>(std::clamp<long long>(ms, 0, 60'000));
  }

  void handleSignals() {
    unsigned char buf[64];
    bool child = false;
    for (ssize_t n; (n = ::read(signals_.fd(), buf, sizeof buf)) > 0;) {
      for (ssize_t i = 0; i < n; ++i) {
        if (buf[i] == SIGCHLD)
          child = true;
        else if (buf[i] == SIGUSR1)
          requestDumps("on request (SIGUSR1 to vigil-run)");
        else
          forward(buf[i]);
      }
    }
    if (child) reap();
  }

  void forward(int sig) {
    std::fprintf(stderr, "vigil-run: received %s; forwarding it to %d running rank(s)\n", signalText(sig).c_str(),
                 running_);
    interruptSig_ = sig;
    stopping_ = true;  // the ranks were told to stop: no dumps asked for when they exit
    signalGroup(sig);
    if (!killAt_) killAt_ = Clock::now() + seconds(opt_.graceS);  // SIGKILL if it is ignored
  }

  // waitpid(-1): one call per exit, not one per rank (4096 ranks). Our only children are the
  // ranks; libvigil's listener is a thread.
  void reap() {
    int status = 0;
    for (pid_t pid; (pid = ::waitpid(-1, &status, WNOHANG)) > 0;) {
      auto it = std::find(pids_.begin(), pids_.end(), pid);
      if (it != pids_.end()) onExit(static_cast<size_t>(it - pids_.begin()), status);
    }
  }

  void onExit(size_t rank, int status) {
    pids_[rank] = 0;
    if (awaitingDump_[rank]) awaitingDump_[rank] = false, --awaitingDumps_;
    if (--running_ == 0) drainUntil_ = Clock::now() + kDrainWindow;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return;
    if (exitCode_) {
      // Only the first failure reaped decides the exit code. A rank killed by a signal that
      // vigil-run did not send is named too: it may have died first, its peers noticing within
      // a millisecond and being reaped before it.
      if (WIFSIGNALED(status) && !sentByUs(WTERMSIG(status)))
        writeAll(2, "vigil-run: rank " + std::to_string(rank) + " killed by signal " + signalText(WTERMSIG(status)) +
                        " as well, a signal vigil-run did not send\n");
      return;
    }
    // Its last words (an error message, usually) belong before our verdict. Bounded, in
    // case a helper process keeps writing.
    for (int i = 0; i < 64; ++i) {
      bool more = streams_[2 * rank].readOnce();
      if (!streams_[2 * rank + 1].readOnce() && !more) break;
    }
    exitCode_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::string msg = "vigil-run: rank " + std::to_string(rank);
    if (WIFEXITED(status))
      msg += " exited with code " + std::to_string(WEXITSTATUS(status));
    else
      msg += " killed by signal " + signalText(WTERMSIG(status));
    if (WCOREDUMP(status)) msg += " (core dumped)";
    if (!stopping_ && running_ > 0) {
      msg += "; stopping the other " + std::to_string(running_) + " rank(s)";
      if (dumpsBeforeStop()) msg += " once they have written their flight recorders";
    }
    writeAll(2, msg + "\n");
    stopRanks();
  }

  bool sentByUs(int sig) const {
    return (sig == SIGTERM && killAt_) || (sig == SIGKILL && killed_) || sig == interruptSig_;
  }

  // A failed job is explained by every rank's flight recorder, not only by those of the
  // ranks that failed: the others are asked for theirs before they are stopped.
  bool dumpsBeforeStop() const {
    const char* dir = std::getenv("VIGIL_DUMP_DIR");
    return dir != nullptr && *dir != '\0' && opt_.dumpGraceS > 0 && running_ > 0;
  }

  void stopRanks() {
    if (stopping_) return;
    stopping_ = true;
    if (!dumpsBeforeStop()) return beginStop(SIGTERM);
    requestDumps("before stopping them");
    if (awaitingDumps_ == 0) return beginStop(SIGTERM);
    termAt_ = Clock::now() + seconds(opt_.dumpGraceS);
  }

  // SIGUSR1 only to the running ranks whose vigil said it handles it: to any other process
  // (a rank before its first init, a program without vigil, a helper) it would be fatal.
  void requestDumps(const char* why) {
    int asked = 0, unable = 0;
    for (size_t r = 0; r < pids_.size(); ++r) {
      if (pids_[r] == 0) continue;
      if (!handlesDumps_[r] || ::kill(pids_[r], SIGUSR1) != 0) {
        ++unable;
        continue;
      }
      if (!awaitingDump_[r]) awaitingDump_[r] = true, ++awaitingDumps_;
      ++asked;
    }
    std::fprintf(stderr, "vigil-run: asking %d running rank(s) to write their flight recorders %s", asked, why);
    if (unable > 0) std::fprintf(stderr, " (%d running rank(s) have no vigil communicator to dump yet)", unable);
    std::fputc('\n', stderr);
  }

  void readDumpNotices() {
    char buf[sizeof(DumpNotice) * 64];
    for (ssize_t n; (n = ::read(notifyRead_.get(), buf, sizeof buf)) > 0;) {
      notices_.append(buf, static_cast<size_t>(n));
      size_t used = 0;
      for (; notices_.size() - used >= sizeof(DumpNotice); used += sizeof(DumpNotice)) {
        DumpNotice notice;
        std::memcpy(&notice, notices_.data() + used, sizeof notice);
        onDumpNotice(notice);
      }
      notices_.erase(0, used);
    }
  }

  void onDumpNotice(const DumpNotice& notice) {
    // The rank is the VIGIL_RANK we gave (also right for a rank started through a wrapper,
    // whose pid is not ours to know); the pid is the fallback.
    size_t rank = static_cast<size_t>(notice.launcherRank);
    if (notice.launcherRank < 0 || notice.launcherRank >= opt_.nranks) {
      auto it = std::find(pids_.begin(), pids_.end(), static_cast<pid_t>(notice.pid));
      if (it == pids_.end()) {
        if (notice.dumpsWritten != DumpNotice::kHandlerInstalled)
          std::fprintf(stderr, "vigil-run: process %d (not a rank) wrote %d flight-recorder dump(s)\n", notice.pid,
                       notice.dumpsWritten);
        return;
      }
      rank = static_cast<size_t>(it - pids_.begin());
    }
    if (notice.dumpsWritten == DumpNotice::kHandlerInstalled) {
      handlesDumps_[rank] = true;
      return;
    }
    std::fprintf(stderr, "vigil-run: rank %zu wrote %d flight-recorder dump(s) to %s\n", rank, notice.dumpsWritten,
                 std::getenv("VIGIL_DUMP_DIR") ? std::getenv("VIGIL_DUMP_DIR") : "(VIGIL_DUMP_DIR is not set)");
    if (awaitingDump_[rank]) awaitingDump_[rank] = false, --awaitingDumps_;
  }

  void beginStop(int sig) {
    stopping_ = true;
    if (killAt_) return;
    killAt_ = Clock::now() + seconds(opt_.graceS);
    signalGroup(sig);
  }

  // Only while a rank is unreaped: its pid keeps the group id from being reused, so we never
  // hit a stranger's group. Helpers still alive after the last rank are left alone.
  void signalGroup(int sig) const {
    if (running_ > 0) ::killpg(pgid_, sig);
  }

  void handleTimers() {
    auto now = Clock::now();
    if (opt_.timeoutS > 0 && !stopping_ && running_ > 0 && now >= startedAt_ + seconds(opt_.timeoutS)) {
      std::fprintf(stderr, "vigil-run: timeout after %g s; ranks still running: %s\n", opt_.timeoutS,
                   runningList().c_str());
      exitCode_ = exitCode_.value_or(kExitTimeout);
      stopRanks();
    }
    if (termAt_ && !killAt_ && (awaitingDumps_ == 0 || now >= *termAt_)) {
      if (awaitingDumps_ > 0)
        std::fprintf(stderr, "vigil-run: rank(s) %s wrote no flight recorder within %g s; stopping them anyway\n",
                     awaitingList().c_str(), opt_.dumpGraceS);
      beginStop(SIGTERM);
    }
    if (!killAt_ || killed_ || now < *killAt_) return;
    killed_ = true;
    if (running_ > 0)
      std::fprintf(stderr,
                   "vigil-run: %d rank(s) still running after %g s of grace; "
                   "sending SIGKILL\n",
                   running_, opt_.graceS);
    signalGroup(SIGKILL);  // also any helper processes of the ranks
    for (pid_t pid : pids_)
      if (pid != 0) ::kill(pid, SIGKILL);  // in case a rank left our process group
  }

  std::string awaitingList() const {
    std::string out;
    for (size_t r = 0; r < awaitingDump_.size(); ++r)
      if (awaitingDump_[r]) out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
  }

  std::string runningList() const {
    std::string out;
    for (size_t r = 0; r < pids_.size(); ++r)
      if (pids_[r] != 0) out += (out.empty() ? "" : ", ") + std::to_string(r);
    return out;
  }

  Options opt_;
  std::string rootHex_;
  SignalPipe signals_;
  Fd notifyRead_, notifyWrite_;     // DumpNotices from the ranks
  std::string notices_;             // bytes of an incomplete notice
  std::vector<pid_t> pids_;         // index = rank; 0 once reaped
  std::vector<bool> awaitingDump_;  // index = rank: asked for its dump, not yet confirmed
  int awaitingDumps_ = 0;
  std::vector<bool> handlesDumps_;  // index = rank: its vigil handles SIGUSR1 (it said so)
  std::vector<Stream> streams_;     // 2*rank: its stdout, 2*rank+1: its stderr
  pid_t pgid_ = 0;
  int running_ = 0;
  int interruptSig_ = 0;
  std::optional<int> exitCode_;              // set by the first failure or the timeout
  bool stopping_ = false;                    // the job is being stopped (dumps first, or SIGTERM)
  std::optional<Clock::time_point> termAt_;  // end of the dump grace: SIGTERM then
  std::optional<Clock::time_point> killAt_;  // set once SIGTERM went out
  bool killed_ = false;
  Clock::time_point startedAt_, drainUntil_;
};

// 4096 ranks need ~8200 pipe fds; the usual soft limit is 1024.
void raiseFdLimit(int nranks) {
  rlimit lim{};
  rlim_t need = 2 * static_cast<rlim_t>(nranks) + 64;
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0 || lim.rlim_cur >= need) return;
  lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? need : std::min(need, lim.rlim_max);
  ::setrlimit(RLIMIT_NOFILE, &lim);
}

}  // namespace

int main(int argc, char** argv) {
  Options opt = parseArgs(argc, argv);
  if (opt.dumpPid != 0) return askForDumps(opt.dumpPid);
  raiseFdLimit(opt.nranks);
  // All ranks of vigil-run share this host: loopback is the right network
  // unless the user says otherwise (the ranks inherit the variable).
  ::setenv("VIGIL_SOCKET_IFNAME", "lo", /*overwrite=*/0);
  setTorchRendezvous();
  vigilRootInfo info{};
  char hex[2 * VIGIL_ROOT_INFO_BYTES + 1] = {};
  if (vigilGetRootInfo(&info) != vigilSuccess || vigilRootInfoToString(&info, hex, sizeof hex) != vigilSuccess) {
    std::fprintf(stderr, "vigil-run: %s\n", vigilGetLastError(nullptr));
    return 1;
  }
  return Launcher(std::move(opt), hex).run();
}
