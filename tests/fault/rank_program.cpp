// vigil-test-rank: one rank of a fault scenario, run as its own process by
// tests/fault/test_process_faults.cpp (or by hand under vigil-run).
// It links libvigil.so, like a user's program, and initialises from the
// launcher environment (VIGIL_ROOT_INFO, VIGIL_RANK, VIGIL_WORLD_SIZE).
//
//   vigil-test-rank loop --iters N --count C [--no-destroy]
//                   [--leave-rank R --leave-iter I --how destroy|exit|abort|kill|stop|stall [--leave-gate]]
//   vigil-test-rank init-only
//   vigil-test-rank symm --iters N --count C [--leave-rank R --leave-iter I --how kill|stop|destroy]
//                   (a ring of put-signals on the symmetric heap: in iteration i each rank
//                   puts C bytes and signal i+1 into its right neighbour's copy, then waits
//                   for its left neighbour's; a FAIL line names the failed call)
// (stall: the rank stays alive, running and handling signals, but calls nothing more.)
//
// Output protocol (stdout, one line each, flushed):
//   iter <i>                      before iteration i (0-based) starts
//   LEAVING iter=<i> how=<how>    the leaving rank, just before it leaves
//   GATE                          the leaving rank with --leave-gate: it now waits for one
//                                 line on stdin before leaving
//   FAIL iter=<i> rc=<int> mono_ns=<ns> call_ms=<ms> text=<vigilGetLastError>
//                                 a rank whose allreduce failed (exit code 3)
//   WRONG iter=<i> index=<k> got=<v> expected=<v>   a wrong result (exit code 4)
//   DONE                          every iteration finished (exit code 0)
//   OK rank <r> / INITFAIL rc=<int> text=<...>      init-only (exit code 0 / 5)
// Other exit codes: 2 bad usage, 5 init failed, 6 another API call failed.

#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <vigil/vigil.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "vigil-test-rank: %s\n"
               "usage: vigil-test-rank loop --iters N --count C [--no-destroy]\n"
               "         [--leave-rank R --leave-iter I --how destroy|exit|abort|kill|stop|stall [--leave-gate]]\n"
               "       vigil-test-rank init-only\n",
               why);
  std::exit(2);
}

long long monoNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

long parseLong(const char* flag, const char* text) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) usage((std::string("bad value for ") + flag).c_str());
  return v;
}

int initComm(vigilComm_t* comm) {
  vigilResult_t rc = vigilCommInitFromEnv(comm);
  if (rc != vigilSuccess) {
    std::printf("INITFAIL rc=%d text=%s\n", static_cast<int>(rc), vigilGetLastError(nullptr));
    return 5;
  }
  return 0;
}

int initOnly() {
  vigilComm_t comm = nullptr;
  if (int code = initComm(&comm)) return code;
  int rank = -1;
  if (vigilCommUserRank(comm, &rank) != vigilSuccess) return 6;
  std::printf("OK rank %d\n", rank);
  return vigilCommDestroy(comm) == vigilSuccess ? 0 : 6;
}

struct LoopOptions {
  long iters = -1, count = -1;
  long leaveRank = -1, leaveIter = -1;
  std::string how;
  bool gate = false;
  bool noDestroy = false;
};

int loop(const LoopOptions& o) {
  vigilComm_t comm = nullptr;
  if (int code = initComm(&comm)) return code;
  int rank = -1, n = 0;
  if (vigilCommUserRank(comm, &rank) != vigilSuccess || vigilCommCount(comm, &n) != vigilSuccess) return 6;

  std::vector<float> buf(static_cast<size_t>(o.count));
  for (long it = 0; it < o.iters; ++it) {
    std::printf("iter %ld\n", it);
    if (rank == o.leaveRank && it == o.leaveIter) {
      std::printf("LEAVING iter=%ld how=%s\n", it, o.how.c_str());
      if (o.gate) {
        std::printf("GATE\n");
        int c;
        while ((c = std::getchar()) != EOF && c != '\n') {
        }
      }
      std::fflush(stdout);
      if (o.how == "destroy") {
        vigilCommDestroy(comm);
        std::exit(0);
      }
      if (o.how == "exit") return 0;  // from main, without vigilCommDestroy
      if (o.how == "abort") {
        vigilCommAbort(comm);
        std::exit(0);
      }
      if (o.how == "stall") {
        for (;;) pause();  // a signal handler (SIGUSR1's dump) runs, then it waits again
      }
      if (o.how == "stop") {
        raise(SIGSTOP);  // alive but frozen, until the test kills it
        std::exit(0);
      }
      raise(SIGKILL);  // "kill"
    }
    // Every rank contributes rank+1+it; the sum n(n+1)/2 + n*it is exact in float32.
    const float mine = static_cast<float>(rank + 1 + it);
    const float expected = static_cast<float>(n * (n + 1) / 2 + n * it);
    for (float& x : buf) x = mine;
    const long long t0 = monoNs();
    vigilResult_t rc = vigilAllReduce(buf.data(), buf.data(), buf.size(), vigilFloat32, vigilSum, comm, nullptr);
    const long long t1 = monoNs();
    if (rc != vigilSuccess) {
      std::printf("FAIL iter=%ld rc=%d mono_ns=%lld call_ms=%.3f text=%s\n", it, static_cast<int>(rc), t1,
                  static_cast<double>(t1 - t0) / 1e6, vigilGetLastError(comm));
      std::fflush(stdout);
      vigilCommDestroy(comm);
      return 3;
    }
    for (size_t k = 0; k < buf.size(); ++k) {
      if (buf[k] != expected) {
        std::printf("WRONG iter=%ld index=%zu got=%.9g expected=%.9g\n", it, k, static_cast<double>(buf[k]),
                    static_cast<double>(expected));
        std::fflush(stdout);
        vigilCommDestroy(comm);
        return 4;
      }
    }
  }
  std::printf("DONE\n");
  std::fflush(stdout);
  if (o.noDestroy) return 0;  // the exit handler must leave cleanly (S6)
  return vigilCommDestroy(comm) == vigilSuccess ? 0 : 6;
}

int symm(const LoopOptions& o) {
  vigilComm_t comm = nullptr;
  if (int code = initComm(&comm)) return code;
  int rank = -1, n = 0;
  if (vigilCommUserRank(comm, &rank) != vigilSuccess || vigilCommCount(comm, &n) != vigilSuccess) return 6;
  const size_t bytes = static_cast<size_t>(o.count);
  void* heap = nullptr;
  if (vigilMemAlloc(comm, bytes + 8, &heap) != vigilSuccess) {
    std::printf("FAIL iter=-1 rc=6 mono_ns=%lld call_ms=0 text=%s\n", monoNs(), vigilGetLastError(comm));
    return 6;
  }
  auto* data = static_cast<uint8_t*>(heap);
  auto* signal = reinterpret_cast<uint64_t*>(data + bytes);
  std::vector<uint8_t> mine(bytes);
  const int right = (rank + 1) % n, left = (rank + n - 1) % n;
  for (long it = 0; it < o.iters; ++it) {
    std::printf("iter %ld\n", it);
    if (rank == o.leaveRank && it == o.leaveIter) {
      std::printf("LEAVING iter=%ld how=%s\n", it, o.how.c_str());
      std::fflush(stdout);
      if (o.how == "destroy") {
        vigilCommDestroy(comm);
        std::exit(0);
      }
      if (o.how == "stop") {
        raise(SIGSTOP);
        std::exit(0);
      }
      raise(SIGKILL);
    }
    for (size_t k = 0; k < bytes; ++k) mine[k] = static_cast<uint8_t>(rank * 7 + it + k);
    const long long t0 = monoNs();
    vigilResult_t rc = vigilPutSignal(data, mine.data(), bytes, signal, static_cast<uint64_t>(it) + 1, vigilSignalSet,
                                      right, comm, nullptr);
    if (rc == vigilSuccess) {
      rc = vigilSignalWaitUntil(signal, vigilCmpGe, static_cast<uint64_t>(it) + 1, left, nullptr, comm, nullptr);
    }
    const long long t1 = monoNs();
    if (rc != vigilSuccess) {
      std::printf("FAIL iter=%ld rc=%d mono_ns=%lld call_ms=%.3f text=%s\n", it, static_cast<int>(rc), t1,
                  static_cast<double>(t1 - t0) / 1e6, vigilGetLastError(comm));
      std::fflush(stdout);
      vigilCommDestroy(comm);
      return 3;
    }
    for (size_t k = 0; k < bytes; ++k) {
      const auto expected = static_cast<uint8_t>(left * 7 + it + k);
      if (data[k] != expected) {
        std::printf("WRONG iter=%ld index=%zu got=%d expected=%d\n", it, k, data[k], expected);
        std::fflush(stdout);
        vigilCommDestroy(comm);
        return 4;
      }
    }
    // Everyone has read this iteration's data before anyone overwrites it.
    if ((rc = vigilBarrierAll(comm, nullptr)) != vigilSuccess) {
      std::printf("FAIL iter=%ld rc=%d mono_ns=%lld call_ms=0 text=%s\n", it, static_cast<int>(rc), monoNs(),
                  vigilGetLastError(comm));
      std::fflush(stdout);
      vigilCommDestroy(comm);
      return 3;
    }
  }
  // Then get and the symmetric allreduce, checked against the two-sided calls.
  auto fail = [&](const char* what) {
    std::printf("FAIL iter=-2 rc=1 mono_ns=%lld call_ms=0 text=%s: %s\n", monoNs(), what, vigilGetLastError(comm));
    std::fflush(stdout);
    vigilCommDestroy(comm);
    return 3;
  };
  std::vector<uint8_t> got(bytes);
  if (vigilGet(got.data(), data, bytes, right, comm, nullptr) != vigilSuccess) return fail("vigilGet");
  for (size_t k = 0; k < bytes; ++k) {
    if (got[k] != static_cast<uint8_t>(rank * 7 + (o.iters - 1) + k)) {
      std::printf("WRONG get index=%zu got=%d\n", k, got[k]);
      return 4;
    }
  }
  const size_t count = bytes / sizeof(int64_t);
  auto* values = reinterpret_cast<int64_t*>(data);
  std::vector<int64_t> plain(count), expected(count);
  if (vigilBarrierAll(comm, nullptr) != vigilSuccess) return fail("vigilBarrierAll");
  for (size_t k = 0; k < count; ++k) plain[k] = values[k] = static_cast<int64_t>(k * 31 + static_cast<size_t>(rank));
  if (vigilAllReduce(plain.data(), expected.data(), count, vigilInt64, vigilSum, comm, nullptr) != vigilSuccess) {
    return fail("vigilAllReduce");
  }
  if (vigilAllReduceSymmetric(values, values, count, vigilInt64, vigilSum, comm, nullptr) != vigilSuccess) {
    return fail("vigilAllReduceSymmetric");
  }
  if (std::memcmp(values, expected.data(), count * sizeof(int64_t)) != 0) {
    std::printf("WRONG allreduce_symmetric\n");
    return 4;
  }
  std::printf("DONE\n");
  std::fflush(stdout);
  vigilMemFree(comm, heap);
  return vigilCommDestroy(comm) == vigilSuccess ? 0 : 6;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // stdout is a pipe: one flushed line at a time
  if (argc < 2) usage("no mode");
  const std::string mode = argv[1];
  if (mode == "init-only") {
    if (argc != 2) usage("init-only takes no options");
    return initOnly();
  }
  if (mode != "loop" && mode != "symm") usage(("unknown mode '" + mode + "'").c_str());
  LoopOptions o;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> const char* {
      if (i + 1 >= argc) usage((a + " needs a value").c_str());
      return argv[++i];
    };
    if (a == "--iters") {
      o.iters = parseLong("--iters", value());
    } else if (a == "--count") {
      o.count = parseLong("--count", value());
    } else if (a == "--leave-rank") {
      o.leaveRank = parseLong("--leave-rank", value());
    } else if (a == "--leave-iter") {
      o.leaveIter = parseLong("--leave-iter", value());
    } else if (a == "--how") {
      o.how = value();
      if (o.how != "destroy" && o.how != "exit" && o.how != "abort" && o.how != "kill" && o.how != "stop" &&
          o.how != "stall") {
        usage(("bad --how '" + o.how + "'").c_str());
      }
    } else if (a == "--leave-gate") {
      o.gate = true;
    } else if (a == "--no-destroy") {
      o.noDestroy = true;
    } else {
      usage(("unknown option '" + a + "'").c_str());
    }
  }
  if (o.iters < 0 || o.count < 0) usage("loop needs --iters and --count");
  if ((o.leaveRank >= 0) != (o.leaveIter >= 0) || (o.leaveRank >= 0) != !o.how.empty()) {
    usage("--leave-rank, --leave-iter and --how go together");
  }
  return mode == "symm" ? symm(o) : loop(o);
}
