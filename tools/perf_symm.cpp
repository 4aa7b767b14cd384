// vigil-perf -c symmetric: the symmetric heap's calls and kernels (docs/symmetric.md).
// With ranks on several hosts (one-sided calls over UCX RMA) only the one-sided rows
// run, and a put is timed with the vigilQuiet that completes it at its target.
//
//   vigil-run -n 2 vigil-perf -c symmetric [-b 8] [-e 16M] [-f 4] [--gemm 1024x1024x256] [--json]
//
// Rows:
//   put, get        rank r to rank r+1 (every rank at once), per size: µs per call, GB/s per rank
//   put_signal      8 B put-signal ping-pong between ranks 2i and 2i+1: µs one way
//   barrier_all     µs per call
//   allreduce_symm  vigilAllReduceSymmetric against vigilAllReduce (float32 sum), per size:
//                   µs per call and algbw (bytes / time) of both, and their ratio
//   allgather_gemm, gemm_rs   the GEMM kernels at --gemm MxKxN (float32; M all ranks' rows):
//                   µs per call and GFLOP/s per rank
// Times are the median over samples of the slowest rank's time. Every figure is checked
// first: the symmetric allreduce's bytes against vigilAllReduce's.

#include <vigil/vigil.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct SymmOptions {
  size_t minBytes = 8, maxBytes = size_t{16} << 20;
  size_t factor = 4;
  size_t m = 1024, k = 1024, n = 256;
  int iters = 20, warmup = 5, samples = 10;
  bool json = false;
};

struct Failure {
  std::string what;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr,
               "vigil-perf: %s\nusage: vigil-perf -c symmetric [-b min] [-e max] [-f factor] [--gemm MxKxN]\n"
               "           [-n iters] [-w warmup] [-s samples] [--json]\n",
               why.c_str());
  std::exit(2);
}

size_t bytesOf(const std::string& text) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (end == text.c_str()) usage("bad size: " + text);
  const std::string unit = end;
  if (unit.empty()) return v;
  if (unit == "K") return v << 10;
  if (unit == "M") return v << 20;
  if (unit == "G") return v << 30;
  usage("bad size: " + text);
}

SymmOptions parse(int argc, char** argv) {
  SymmOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage("missing value for " + a);
      return argv[++i];
    };
    if (a == "-c") {
      value();
    } else if (a == "-b") {
      o.minBytes = bytesOf(value());
    } else if (a == "-e") {
      o.maxBytes = bytesOf(value());
    } else if (a == "-f") {
      o.factor = std::max<size_t>(2, bytesOf(value()));
    } else if (a == "-n") {
      o.iters = std::max(1, std::atoi(value().c_str()));
    } else if (a == "-w") {
      o.warmup = std::max(0, std::atoi(value().c_str()));
    } else if (a == "-s") {
      o.samples = std::max(1, std::atoi(value().c_str()));
    } else if (a == "--gemm") {
      const std::string s = value();
      if (std::sscanf(s.c_str(), "%zux%zux%zu", &o.m, &o.k, &o.n) != 3) usage("--gemm takes MxKxN, not " + s);
    } else if (a == "--json") {
      o.json = true;
    } else {
      usage("unknown argument " + a);
    }
  }
  if (o.minBytes == 0 || o.minBytes > o.maxBytes) usage("need 0 < -b <= -e");
  return o;
}

class SymmPerf {
 public:
  SymmPerf(const SymmOptions& o, vigilComm_t comm) : o_(o), comm_(comm) {
    check(vigilCommUserRank(comm_, &rank_), "vigilCommUserRank");
    check(vigilCommCount(comm_, &nranks_), "vigilCommCount");
  }

  void run() {
    if (rank_ == 0 && !o_.json) {
      std::printf("# symmetric memory over %d ranks; us: median per call of the slowest rank\n", nranks_);
      std::printf("%-15s %12s %12s %10s %12s %10s %8s\n", "op", "bytes", "us", "GB/s", "baseline_us", "base_GB/s",
                  "ratio");
    }
    spansHosts_ = spansHosts();
    if (rank_ == 0 && spansHosts_ && !o_.json) {
      std::printf(
          "# ranks on several hosts: one-sided rows only (the kernels need one host); put includes vigilQuiet\n");
    }
    oneSided();
    if (nranks_ >= 2) pingPong();
    const double barrier = time([&] { check(vigilBarrierAll(comm_, nullptr), "vigilBarrierAll"); });
    row("barrier_all", 0, barrier, 0, 0);
    if (spansHosts_) return;
    allReduce();
    gemms();
  }

 private:
  void check(vigilResult_t rc, const char* call) const {
    if (rc != vigilSuccess) throw Failure{std::string(call) + ": " + vigilGetLastError(comm_)};
  }

  void* alloc(size_t bytes) {
    void* p = nullptr;
    check(vigilMemAlloc(comm_, bytes, &p), "vigilMemAlloc");
    return p;
  }

  template <class Body>
  double time(Body&& body, int iters = -1) {
    if (iters < 0) iters = o_.iters;
    for (int i = 0; i < o_.warmup; ++i) body();
    std::vector<double> per;
    for (int s = 0; s < o_.samples; ++s) {
      check(vigilBarrier(comm_, nullptr), "vigilBarrier");
      const auto t0 = Clock::now();
      for (int i = 0; i < iters; ++i) body();
      double sec = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
      check(vigilAllReduce(&sec, &sec, 1, vigilFloat64, vigilMax, comm_, nullptr), "vigilAllReduce");
      per.push_back(sec);
    }
    std::sort(per.begin(), per.end());
    return per[per.size() / 2];
  }

  // bytes / sec in GB/s per rank; a baseline of 0 prints none.
  void row(const char* op, size_t bytes, double sec, double baseSec, double gflop) const {
    if (rank_ != 0) return;
    const double gbps = sec > 0 && bytes > 0 ? static_cast<double>(bytes) / sec / 1e9 : 0;
    const double baseGbps = baseSec > 0 && bytes > 0 ? static_cast<double>(bytes) / baseSec / 1e9 : 0;
    const double ratio = baseSec > 0 ? baseSec / sec : 0;
    if (o_.json) {
      std::printf("{\"lib\":\"vigil\",\"op\":\"%s\",\"ranks\":%d,\"bytes\":%zu,\"us\":%.3f,\"gbps\":%.3f", op, nranks_,
                  bytes, sec * 1e6, gbps);
      if (baseSec > 0) std::printf(",\"baseline_us\":%.3f,\"baseline_gbps\":%.3f,\"ratio\":%.3f", baseSec * 1e6, baseGbps, ratio);
      if (gflop > 0) std::printf(",\"gflops\":%.2f", gflop / sec);
      std::printf("}\n");
    } else if (gflop > 0) {
      std::printf("%-15s %12s %12.1f %10s %12s %10s %8s   %.2f GFLOP/s per rank\n", op, "-", sec * 1e6, "-", "-", "-",
                  "-", gflop / sec);
    } else if (baseSec > 0) {
      std::printf("%-15s %12zu %12.3f %10.3f %12.3f %10.3f %7.2fx\n", op, bytes, sec * 1e6, gbps, baseSec * 1e6,
                  baseGbps, ratio);
    } else {
      std::printf("%-15s %12zu %12.3f %10.3f %12s %10s %8s\n", op, bytes, sec * 1e6, gbps, "-", "-", "-");
    }
    std::fflush(stdout);
  }

  std::vector<size_t> sizes() const {
    std::vector<size_t> out;
    for (size_t b = o_.minBytes; b <= o_.maxBytes; b *= o_.factor) out.push_back(b);
    if (out.back() != o_.maxBytes) out.push_back(o_.maxBytes);
    return out;
  }

  // Whether a peer runs on another host (no load/store pointer to it).
  bool spansHosts() {
    void* p = alloc(64);
    bool far = false;
    for (int r = 0; r < nranks_ && !far; ++r) {
      void* q = nullptr;
      far = vigilMemPeerPtr(comm_, p, r, &q) != vigilSuccess;
    }
    check(vigilMemFree(comm_, p), "vigilMemFree");
    return far;
  }

  void oneSided() {
    const int right = (rank_ + 1) % nranks_;
    auto* remote = static_cast<uint8_t*>(alloc(o_.maxBytes));
    std::vector<uint8_t> local(o_.maxBytes, static_cast<uint8_t>(rank_ + 1));
    for (size_t bytes : sizes()) {
      const int iters = bytes >= (size_t{1} << 20) ? std::max(2, o_.iters / 4) : o_.iters;
      const double put = time(
          [&] {
            check(vigilPut(remote, local.data(), bytes, right, comm_, nullptr), "vigilPut");
            if (spansHosts_) check(vigilQuiet(comm_, nullptr), "vigilQuiet");
          },
          iters);
      row("put", bytes, put, 0, 0);
    }
    for (size_t bytes : sizes()) {
      const int iters = bytes >= (size_t{1} << 20) ? std::max(2, o_.iters / 4) : o_.iters;
      const double get = time([&] { check(vigilGet(local.data(), remote, bytes, right, comm_, nullptr), "vigilGet"); }, iters);
      row("get", bytes, get, 0, 0);
    }
    check(vigilMemFree(comm_, remote), "vigilMemFree");
  }

  // Ranks 2i and 2i+1 bounce an 8-byte put-signal; an odd last rank waits out.
  void pingPong() {
    auto* data = static_cast<uint8_t*>(alloc(8));
    auto* signal = static_cast<uint64_t*>(alloc(sizeof(uint64_t)));
    const int peer = rank_ ^ 1;
    const bool plays = peer < nranks_;
    const uint64_t local = 0;
    uint64_t seq = 0;
    constexpr int kBounces = 1000;  // per timed call: one call would be too short to time
    const double sec = time([&] {
      for (int i = 0; plays && i < kBounces; ++i) {
        ++seq;
        if ((rank_ & 1) == 0) {
          check(vigilPutSignal(data, &local, 8, signal, seq, vigilSignalSet, peer, comm_, nullptr), "vigilPutSignal");
          check(vigilSignalWaitUntil(signal, vigilCmpGe, seq, peer, nullptr, comm_, nullptr), "vigilSignalWaitUntil");
        } else {
          check(vigilSignalWaitUntil(signal, vigilCmpGe, seq, peer, nullptr, comm_, nullptr), "vigilSignalWaitUntil");
          check(vigilPutSignal(data, &local, 8, signal, seq, vigilSignalSet, peer, comm_, nullptr), "vigilPutSignal");
        }
      }
    }, 1);
    row("put_signal", 8, sec / (2.0 * kBounces), 0, 0);
    check(vigilMemFree(comm_, signal), "vigilMemFree");
    check(vigilMemFree(comm_, data), "vigilMemFree");
  }

  void allReduce() {
    for (size_t bytes : sizes()) {
      const size_t count = std::max<size_t>(1, bytes / sizeof(float));
      const size_t b = count * sizeof(float);
      auto* send = static_cast<float*>(alloc(b));
      auto* recv = static_cast<float*>(alloc(b));
      std::vector<float> plainSend(count), plainRecv(count);
      for (size_t i = 0; i < count; ++i) plainSend[i] = send[i] = static_cast<float>((i * 7 + rank_ * 13) % 101) * 0.25f;
      check(vigilAllReduceSymmetric(send, recv, count, vigilFloat32, vigilSum, comm_, nullptr), "vigilAllReduceSymmetric");
      check(vigilAllReduce(plainSend.data(), plainRecv.data(), count, vigilFloat32, vigilSum, comm_, nullptr), "vigilAllReduce");
      if (std::memcmp(recv, plainRecv.data(), b) != 0) {
        throw Failure{"vigilAllReduceSymmetric of " + std::to_string(b) + " bytes differs from vigilAllReduce"};
      }
      const int iters = b >= (size_t{1} << 20) ? std::max(2, o_.iters / 4) : o_.iters;
      const double symm = time([&] {
        check(vigilAllReduceSymmetric(send, recv, count, vigilFloat32, vigilSum, comm_, nullptr), "vigilAllReduceSymmetric");
      }, iters);
      const double staged = time([&] {
        check(vigilAllReduce(plainSend.data(), plainRecv.data(), count, vigilFloat32, vigilSum, comm_, nullptr), "vigilAllReduce");
      }, iters);
      row("allreduce_symm", b, symm, staged, 0);
      check(vigilMemFree(comm_, recv), "vigilMemFree");
      check(vigilMemFree(comm_, send), "vigilMemFree");
    }
  }

  void gemms() {
    const size_t rows = o_.m / static_cast<size_t>(nranks_);
    if (rows == 0) return;
    const size_t m = rows * static_cast<size_t>(nranks_);
    const double gflop = 2.0 * static_cast<double>(m) * static_cast<double>(o_.k) * static_cast<double>(o_.n) / 1e9;
    std::vector<float> w(o_.k * o_.n, 0.5f), out(m * o_.n), a(m * o_.k, 0.25f), block(rows * o_.n);
    auto* x = static_cast<float*>(alloc(rows * o_.k * sizeof(float)));
    auto* work = static_cast<float*>(alloc(m * o_.n * sizeof(float)));
    std::fill(x, x + rows * o_.k, 0.25f);
    const int iters = std::max(1, o_.iters / 10);
    const double ag = time([&] {
      check(vigilAllGatherGemm(x, w.data(), out.data(), rows, o_.k, o_.n, vigilFloat32, comm_, nullptr), "vigilAllGatherGemm");
    }, iters);
    row("allgather_gemm", 0, ag, 0, gflop);
    const double rs = time([&] {
      check(vigilGemmReduceScatter(a.data(), w.data(), block.data(), work, rows, o_.k, o_.n, vigilFloat32, comm_, nullptr),
            "vigilGemmReduceScatter");
    }, iters);
    row("gemm_rs", 0, rs, 0, gflop);
    check(vigilMemFree(comm_, work), "vigilMemFree");
    check(vigilMemFree(comm_, x), "vigilMemFree");
  }

  SymmOptions o_;
  vigilComm_t comm_;
  int rank_ = 0, nranks_ = 0;
  bool spansHosts_ = false;
};

}  // namespace

int runSymmetricPerf(int argc, char** argv) {
  const SymmOptions o = parse(argc, argv);
  vigilComm_t comm = nullptr;
  if (vigilCommInitFromEnv(&comm) != vigilSuccess) {
    std::fprintf(stderr, "vigil-perf: vigilCommInitFromEnv failed: %s\n", vigilGetLastError(nullptr));
    return 1;
  }
  try {
    SymmPerf(o, comm).run();
  } catch (const Failure& f) {
    int rank = -1;
    vigilCommUserRank(comm, &rank);
    std::fprintf(stderr, "vigil-perf: rank %d: %s\n", rank, f.what.c_str());
    vigilCommAbort(comm);
    return 1;
  }
  if (vigilCommFinalize(comm) != vigilSuccess) {
    std::fprintf(stderr, "vigil-perf: vigilCommFinalize failed: %s\n", vigilGetLastError(nullptr));
    vigilCommDestroy(comm);
    return 1;
  }
  vigilCommDestroy(comm);
  return 0;
}
