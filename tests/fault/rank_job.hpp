#pragma once
// RankJob: spawns rank processes of a scenario program with their launcher
// environment, reads their output with poll(), waits for lines and exits
// with deadlines, and kills and reaps them all when it goes out of scope.
// Plus parsers for the scenario program's FAIL lines and error texts.

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "vigil/vigil.h"

extern char** environ;

namespace vigil::fault {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr const char* kRankProgram = VIGIL_TEST_RANK;
constexpr auto kDeadline = seconds(60);  // generous: a hang fails the test, it never blocks it

inline long long monoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline bool startsWith(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}
inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

inline int pidfdOpen(pid_t pid) {
#ifdef SYS_pidfd_open
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  errno = ENOSYS;
  return -1;
#endif
}

// A root info for a new job, hosted by this process, as hex for VIGIL_ROOT_INFO.
inline std::string newRootHex() {
  vigilRootInfo info{};
  vigilResult_t rc = vigilGetRootInfo(&info);
  EXPECT_EQ(rc, vigilSuccess) << vigilGetLastError(nullptr);
  char hex[2 * VIGIL_ROOT_INFO_BYTES + 1] = {};
  EXPECT_EQ(vigilRootInfoToString(&info, hex, sizeof hex), vigilSuccess);
  return hex;
}

using Env = std::vector<std::pair<std::string, std::string>>;

// N processes of `vigil-test-rank args...` forming one job: spawned at
// construction; stdout and stderr captured per rank; each rank's stdin is a
// pipe the test may write to.
class RankJob {
 public:
  struct Rank {
    pid_t pid = 0;
    int in = -1, out = -1, err = -1, pidfd = -1;
    std::string outText, errText;
    std::vector<std::string> lines;  // complete stdout lines
    size_t lineStart = 0;            // where the next stdout line begins in outText
    bool exited = false;
    int status = 0;
  };

  RankJob(int nranks, const std::vector<std::string>& args, const Env& extraEnv = {})
      : ranks_(static_cast<size_t>(nranks)) {
    const std::string root = newRootHex();
    for (int r = 0; r < nranks; ++r) {
      Env env = extraEnv;
      env.emplace_back("VIGIL_ROOT_INFO", root);
      env.emplace_back("VIGIL_RANK", std::to_string(r));
      env.emplace_back("VIGIL_WORLD_SIZE", std::to_string(nranks));
      env.emplace_back("VIGIL_SOCKET_IFNAME", "lo");
      spawn(ranks_[static_cast<size_t>(r)], args, env);
    }
  }

  RankJob(const RankJob&) = delete;
  RankJob& operator=(const RankJob&) = delete;

  ~RankJob() {
    for (Rank& k : ranks_) {
      if (k.pid > 0 && !k.exited) {
        ::kill(k.pid, SIGKILL);
        int st = 0;
        while (::waitpid(k.pid, &st, 0) < 0 && errno == EINTR) {
        }
        k.exited = true;
      }
      for (int* fd : {&k.in, &k.out, &k.err, &k.pidfd}) closeFd(*fd);
    }
  }

  int size() const { return static_cast<int>(ranks_.size()); }
  const Rank& rank(int r) const { return ranks_.at(static_cast<size_t>(r)); }
  pid_t pid(int r) const { return rank(r).pid; }
  const std::vector<std::string>& lines(int r) const { return rank(r).lines; }
  const std::string& stderrText(int r) const { return rank(r).errText; }
  bool exited(int r) const { return rank(r).exited; }
  // The exit code, or -1 when the rank was killed by a signal (or still runs).
  int exitCode(int r) const {
    const Rank& k = rank(r);
    return k.exited && WIFEXITED(k.status) ? WEXITSTATUS(k.status) : -1;
  }
  int termSignal(int r) const {
    const Rank& k = rank(r);
    return k.exited && WIFSIGNALED(k.status) ? WTERMSIG(k.status) : 0;
  }

  // Waits until rank r prints a stdout line for which pred is true; returns it.
  std::optional<std::string> waitLine(int r, const std::function<bool(const std::string&)>& pred,
                                      Clock::duration timeout = kDeadline) {
    const auto deadline = Clock::now() + timeout;
    while (true) {
      for (const std::string& l : lines(r)) {
        if (pred(l)) return l;
      }
      if (rank(r).out < 0 || !pump(deadline)) return std::nullopt;  // EOF or deadline
    }
  }
  std::optional<std::string> waitLine(int r, const std::string& exact, Clock::duration timeout = kDeadline) {
    return waitLine(
        r, [&](const std::string& l) { return l == exact; }, timeout);
  }

  // Waits until every rank has exited and its output is drained.
  bool waitExit(Clock::duration timeout = kDeadline) {
    const auto deadline = Clock::now() + timeout;
    while (!allDone()) {
      if (!pump(deadline)) return false;
    }
    return true;
  }

  bool writeStdin(int r, const std::string& text) {
    const Rank& k = rank(r);
    return k.in >= 0 && ::write(k.in, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  }

  void killRank(int r) { ::kill(rank(r).pid, SIGKILL); }

  // Everything the ranks said and how they ended, for failure messages.
  std::string dump() const {
    std::ostringstream os;
    for (int r = 0; r < size(); ++r) {
      const Rank& k = rank(r);
      os << "--- rank " << r << " (pid " << k.pid << "): ";
      if (!k.exited) {
        os << "still running";
      } else if (WIFEXITED(k.status)) {
        os << "exit code " << WEXITSTATUS(k.status);
      } else if (WIFSIGNALED(k.status)) {
        os << "killed by signal " << WTERMSIG(k.status);
      }
      os << "\n[stdout]\n" << k.outText << "\n[stderr]\n" << k.errText << "\n";
    }
    return os.str();
  }

 private:
  static void closeFd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  void spawn(Rank& k, const std::vector<std::string>& args, const Env& env) {
    // Everything the child needs is built before fork: after it, only
    // async-signal-safe calls (this process has the root server's threads).
    std::vector<std::string> envStrings;
    auto overridden = [&](const char* entry) {
      for (const auto& [key, value] : env) {
        if (std::strncmp(entry, key.c_str(), key.size()) == 0 && entry[key.size()] == '=') return true;
      }
      return false;
    };
    for (char** e = environ; *e != nullptr; ++e) {
      if (!overridden(*e)) envStrings.emplace_back(*e);
    }
    for (const auto& [key, value] : env) envStrings.push_back(key + "=" + value);
    std::vector<char*> envp, argv;
    for (std::string& s : envStrings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> argStrings{kRankProgram};
    argStrings.insert(argStrings.end(), args.begin(), args.end());
    for (std::string& s : argStrings) argv.push_back(s.data());
    argv.push_back(nullptr);

    int inPipe[2], outPipe[2], errPipe[2];
    ASSERT_EQ(::pipe2(inPipe, O_CLOEXEC), 0) << std::strerror(errno);
    ASSERT_EQ(::pipe2(outPipe, O_CLOEXEC), 0) << std::strerror(errno);
    ASSERT_EQ(::pipe2(errPipe, O_CLOEXEC), 0) << std::strerror(errno);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0) << std::strerror(errno);
    if (pid == 0) {
      // dup2 clears FD_CLOEXEC on 0/1/2; every other fd of ours is O_CLOEXEC.
      ::dup2(inPipe[0], 0);
      ::dup2(outPipe[1], 1);
      ::dup2(errPipe[1], 2);
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      ::sigaction(SIGPIPE, &dfl, nullptr);  // this process ignores it; ranks get the default
      // A process group of its own. Ranks that a test stops (SIGSTOP) must
      // stay stopped until it kills them, and in an orphaned process group
      // (a test run from a daemon, ctest in the background) the kernel sends
      // SIGHUP to the whole group whenever any member exits while one is
      // stopped: a neighbouring test's exit would kill the stopped rank.
      // Here the group's parent, this test, is in another group of the same
      // session, so the group is not orphaned.
      ::setpgid(0, 0);
      ::execve(argv[0], argv.data(), envp.data());
      static const char msg[] = "test_process_faults: execve of the rank program failed\n";
      ssize_t ignored = ::write(2, msg, sizeof msg - 1);
      (void)ignored;
      ::_exit(127);
    }
    k.pid = pid;
    ::close(inPipe[0]);
    ::close(outPipe[1]);
    ::close(errPipe[1]);
    k.in = inPipe[1];
    k.out = outPipe[0];
    k.err = errPipe[0];
    k.pidfd = pidfdOpen(pid);  // -1 on old kernels: pump() then polls waitpid in short ticks
  }

  bool allDone() const {
    for (const Rank& k : ranks_) {
      if (!k.exited || k.out >= 0 || k.err >= 0) return false;
    }
    return true;
  }

  void reap(Rank& k) {
    if (k.exited) return;
    int st = 0;
    pid_t got = ::waitpid(k.pid, &st, WNOHANG);
    if (got == k.pid) {
      k.exited = true;
      k.status = st;
      closeFd(k.pidfd);
      closeFd(k.in);
    }
  }

  void readInto(int& fd, std::string& text) {
    char buf[65536];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      text.append(buf, static_cast<size_t>(n));
    } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
      closeFd(fd);
    }
  }

  void splitLines(Rank& k) {
    size_t nl;
    while ((nl = k.outText.find('\n', k.lineStart)) != std::string::npos) {
      k.lines.push_back(k.outText.substr(k.lineStart, nl - k.lineStart));
      k.lineStart = nl + 1;
    }
    if (k.out < 0 && k.lineStart < k.outText.size()) {  // a last line without newline
      k.lines.push_back(k.outText.substr(k.lineStart));
      k.lineStart = k.outText.size();
    }
  }

  // One round: waits (at most until deadline) for output or an exit and
  // takes it in. Returns false once the deadline has passed.
  bool pump(Clock::time_point deadline) {
    std::vector<pollfd> pfds;
    std::vector<std::pair<Rank*, int>> what;  // 0 stdout, 1 stderr, 2 pidfd
    bool needTick = false;
    for (Rank& k : ranks_) {
      if (k.out >= 0) pfds.push_back({k.out, POLLIN, 0}), what.emplace_back(&k, 0);
      if (k.err >= 0) pfds.push_back({k.err, POLLIN, 0}), what.emplace_back(&k, 1);
      if (!k.exited) {
        if (k.pidfd >= 0) {
          pfds.push_back({k.pidfd, POLLIN, 0}), what.emplace_back(&k, 2);
        } else {
          needTick = true;
        }
      }
    }
    auto now = Clock::now();
    if (now >= deadline) return false;
    long long waitMs = std::chrono::duration_cast<milliseconds>(deadline - now).count() + 1;
    if (needTick) waitMs = std::min(waitMs, 10LL);
    int rc = ::poll(pfds.data(), pfds.size(), static_cast<int>(waitMs));
    if (rc < 0 && errno != EINTR) {
      ADD_FAILURE() << "poll: " << std::strerror(errno);
      return false;
    }
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents == 0) continue;
      Rank& k = *what[i].first;
      switch (what[i].second) {
        case 0: readInto(k.out, k.outText), splitLines(k); break;
        case 1: readInto(k.err, k.errText); break;
        case 2: reap(k); break;
      }
    }
    if (needTick) {
      for (Rank& k : ranks_) reap(k);
    }
    return true;
  }

  std::vector<Rank> ranks_;
};

// "FAIL iter=<i> rc=<int> mono_ns=<ns> call_ms=<ms> text=<...>"
struct FailLine {
  int iter = -1;
  int rc = -1;
  long long monoNs = 0;
  double callMs = -1;
  std::string text;
};

inline std::optional<FailLine> parseFail(const std::string& line) {
  FailLine f;
  int consumed = 0;
  if (std::sscanf(line.c_str(), "FAIL iter=%d rc=%d mono_ns=%lld call_ms=%lf text=%n", &f.iter, &f.rc, &f.monoNs,
                  &f.callMs, &consumed) != 4 ||
      consumed == 0) {
    return std::nullopt;
  }
  f.text = line.substr(static_cast<size_t>(consumed));
  return f;
}

std::vector<std::string> iterLines(int from, int to) {  // "iter from" .. "iter to-1"
  std::vector<std::string> out;
  for (int i = from; i < to; ++i) out.push_back("iter " + std::to_string(i));
  return out;
}

inline bool isFail(const std::string& l) {
  return startsWith(l, "FAIL ");
}

// A rank that failed its allreduce: exit 3, stdout = "iter 0".."iter <k>" then one FAIL line.
inline FailLine expectFailed(const RankJob& job, int r) {
  const auto& lines = job.lines(r);
  EXPECT_EQ(job.exitCode(r), 3) << "rank " << r;
  EXPECT_EQ(std::count_if(lines.begin(), lines.end(), isFail), 1) << "rank " << r;
  std::optional<FailLine> f;
  if (!lines.empty()) f = parseFail(lines.back());
  if (!f) {
    ADD_FAILURE() << "rank " << r << ": last stdout line is not a FAIL line";
    return {};
  }
  std::vector<std::string> want = iterLines(0, f->iter + 1);
  want.push_back(lines.back());
  EXPECT_EQ(lines, want) << "rank " << r << ": stdout must be iter 0..iter " << f->iter << " then FAIL";
  return *f;
}

// A rank that finished: exit 0, stdout exactly "iter 0".."iter N-1", "DONE".
inline void expectDone(const RankJob& job, int r, int iters) {
  std::vector<std::string> want = iterLines(0, iters);
  want.push_back("DONE");
  EXPECT_EQ(job.exitCode(r), 0) << "rank " << r;
  EXPECT_EQ(job.lines(r), want) << "rank " << r;
}

// A survivor must name the rank that really went away. Today it may instead
// name another survivor that failed first and then destroyed its
// communicator ("rank 0 left ... It had failed before leaving: <rank 0's
// error naming rank 2>"): accepted while kAllowCascade, provided the quoted
// chain ends at the right rank. Set it to false once the library always puts
// the root cause first. A survivor whose error does not lead to the rank that
// went away at all (a bye without the cause) always fails the test.
constexpr bool kAllowCascade = false;

const std::string kDiedText = "closed its connection without saying goodbye: its process exited, crashed or was killed";

// One peer-gone error:
// "<id>: rank <me>/<n> (comm '<c>'): allreduce seq <s>: rank <peer> (host <h>, pid <pid>) <rest>"
struct PeerError {
  std::string id, comm, rest;
  int me = -1, seq = -1, peer = -1;
  long pid = -1;
};

inline std::optional<PeerError> parsePeerError(const std::string& text, int nranks) {
  const std::regex re(
      "^(VG-PEER-00[0-9]): rank ([0-9]+)/" + std::to_string(nranks) +
      R"( \(comm '([^']*)'\): allreduce seq ([0-9]+): rank ([0-9]+) \(host [^,]+, pid ([0-9]+)\) (.*)$)");
  std::smatch m;
  if (!std::regex_match(text, m, re)) return std::nullopt;
  PeerError e;
  e.id = m[1];
  e.me = std::stoi(m[2]);
  e.comm = m[3];
  e.seq = std::stoi(m[4]);
  e.peer = std::stoi(m[5]);
  e.pid = std::stol(m[6]);
  e.rest = m[7];
  return e;
}

// What the error about the rank that really left (the root cause) must say.
using RootCheck = std::function<::testing::AssertionResult(const PeerError&)>;

::testing::AssertionResult expectPeerError(const PeerError& e, const std::string& id, const std::string& restPrefix) {
  if (e.id == id && startsWith(e.rest, restPrefix)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "rank " << e.me << " about rank " << e.peer << ": expected " << id << " and '"
                                       << restPrefix << "...', got " << e.id << " and '" << e.rest << "'";
}

// Checks the error text `reporter` got in allreduce `seq` when rank `root`
// went away: it names rank `root` with its pid, and rootCheck accepts what it
// says. Or (a cascade, when kAllowCascade) it names another survivor that
// failed first and then destroyed its communicator, "left ... It had failed
// before leaving: <its own error>", and that quoted error passes this check in
// turn. chain gets the ranks named, outermost first.
::testing::AssertionResult checkPeerReport(const std::string& text, int reporter, int seq, int root, const RankJob& job,
                                           const RootCheck& rootCheck, std::vector<int>& chain) {
  std::optional<PeerError> e = parsePeerError(text, job.size());
  if (!e) {
    return ::testing::AssertionFailure() << "not '<VG-PEER-id>: rank " << reporter << "/" << job.size()
                                         << " (comm ..): allreduce seq N: rank N (host H, pid P) ...': " << text;
  }
  if (e->me != reporter) return ::testing::AssertionFailure() << "reported by rank " << e->me << ", not " << reporter;
  if (e->seq != seq)
    return ::testing::AssertionFailure() << "rank " << reporter << " reports seq " << e->seq << ", not " << seq;
  if (e->peer < 0 || e->peer >= job.size() || e->peer == reporter || e->pid != job.pid(e->peer)) {
    return ::testing::AssertionFailure() << "names rank " << e->peer << " with pid " << e->pid;
  }
  chain.push_back(e->peer);
  if (e->peer == root) return rootCheck(*e);
  if (!kAllowCascade) {
    return ::testing::AssertionFailure() << "rank " << reporter << " names rank " << e->peer << ", not rank " << root
                                         << " that left";
  }
  if (chain.size() > static_cast<size_t>(job.size())) return ::testing::AssertionFailure() << "cascade loops";
  // The other survivor failed in the same collective: it completed seq-1 only.
  const std::string prefix = "left the communicator (vigilCommDestroy) after completing collective seq " +
                             std::to_string(seq - 1) + "; this rank still needs it. It had failed before leaving: ";
  auto outer = expectPeerError(*e, "VG-PEER-002", prefix);
  if (!outer) {
    return outer << " (rank " << reporter << " names rank " << e->peer << " instead of rank " << root
                 << ", and does not quote an error of rank " << e->peer << " that names rank " << root << ")";
  }
  return checkPeerReport(e->rest.substr(prefix.size()), e->peer, seq, root, job, rootCheck, chain);
}

inline std::string describeChain(const std::vector<int>& chain) {
  if (chain.size() < 2) return "";
  std::string out = " (cascade: names rank " + std::to_string(chain[0]);
  for (size_t i = 1; i < chain.size(); ++i) out += ", which quotes rank " + std::to_string(chain[i]);
  return out + ")";
}

}  // namespace vigil::fault
