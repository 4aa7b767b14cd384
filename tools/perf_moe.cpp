// vigil-perf -c moe_dispatch|moe_combine|moe: MoE dispatch and combine per call, against the same
// exchange written as vigilAllToAllV plus local packing (bench/common/moe_exchange.hpp).
// `symmetric`: the same calls with expandX, its scales and the expert outputs in the
// symmetric heap (vigilMemAlloc), where rows go straight into the peers' copies.
//
//   vigil-run -n 4 vigil-perf -c moe --tokens 256 --hidden 1024 --topk 8 --experts 64
//             [--impl vigil|symmetric|alltoallv|both|all]   (both: vigil and alltoallv)
//
// Per row: µs per call (median of the samples, the slowest rank's time), tokens/s (all ranks'
// tokens per second) and GB/s (this rank's selections x row bytes per second). Before timing,
// the two implementations' dispatch outputs are compared byte for byte.

#include <vigil/vigil.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "moe_exchange.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct MoeOptions {
  moebench::Shape shape;
  bool dispatch = true, combine = true;
  bool vigil = true, symmetric = false, alltoallv = true;
  int iters = 10, warmup = 3, samples = 5;
  bool json = false;
};

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(
      stderr,
      "vigil-perf: %s\nusage: vigil-perf -c moe|moe_dispatch|moe_combine [--tokens N] [--hidden H] [--topk K]\n"
      "           [--experts E] [--impl vigil|symmetric|alltoallv|both|all] [-n iters] [-w warmup] [-s samples]\n"
      "           [--json]\n",
      why.c_str());
  std::exit(2);
}

long long number(const char* flag, const char* text) {
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || v < 0) usage(std::string("bad value for ") + flag + ": " + text);
  return v;
}

MoeOptions parse(int argc, char** argv) {
  MoeOptions o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&] {
      if (i + 1 >= argc) usage("missing value for " + a);
      return argv[++i];
    };
    if (a == "-c") {
      const std::string c = value();
      o.dispatch = c != "moe_combine";
      o.combine = c != "moe_dispatch";
    } else if (a == "--tokens") {
      o.shape.tokens = number("--tokens", value());
    } else if (a == "--hidden") {
      o.shape.hidden = number("--hidden", value());
    } else if (a == "--topk") {
      o.shape.topK = number("--topk", value());
    } else if (a == "--experts") {
      o.shape.experts = number("--experts", value());
    } else if (a == "--impl") {
      const std::string impl = value();
      if (impl != "vigil" && impl != "symmetric" && impl != "alltoallv" && impl != "both" && impl != "all") {
        usage("--impl is vigil, symmetric, alltoallv, both or all");
      }
      o.vigil = impl == "vigil" || impl == "both" || impl == "all";
      o.symmetric = impl == "symmetric" || impl == "all";
      o.alltoallv = impl == "alltoallv" || impl == "both" || impl == "all";
    } else if (a == "-n") {
      o.iters = static_cast<int>(number("-n", value()));
    } else if (a == "-w") {
      o.warmup = static_cast<int>(number("-w", value()));
    } else if (a == "-s") {
      o.samples = static_cast<int>(number("-s", value()));
    } else if (a == "--json") {
      o.json = true;
    } else {
      usage("unknown option " + a);
    }
  }
  if (o.shape.hidden < 1 || o.shape.topK < 1 || o.shape.tokens < 1 || o.iters < 1 || o.samples < 1) {
    usage("--tokens, --hidden, --topk, -n and -s must be >= 1");
  }
  return o;
}

struct Failed {
  std::string what;
};

void check(vigilResult_t rc, vigilComm_t comm, const char* what) {
  if (rc != vigilSuccess) throw Failed{std::string(what) + ": " + vigilGetLastError(comm)};
}

// The baseline's exchange: vigilAllToAllV on bytes.
struct VigilAllToAllV {
  vigilComm_t comm;
  void operator()(const void* send, const size_t* sb, const size_t* sd, void* recv, const size_t* rb,
                  const size_t* rd) const {
    check(vigilAllToAllV(send, sb, sd, recv, rb, rd, vigilUint8, comm, nullptr), comm, "vigilAllToAllV");
  }
};

class Bench {
 public:
  Bench(const MoeOptions& o, vigilComm_t comm) : o_(o), comm_(comm), s_(o.shape), base_(o.shape) {
    moebench::makeWorkload(s_, ids_, weights_, x_);
    cfg_.size = sizeof cfg_;
    cfg_.epWorldSize = s_.W;
    cfg_.epRankId = s_.rank;
    cfg_.moeExpertNum = s_.experts;
    cfg_.hidden = s_.hidden;
    cfg_.topK = s_.topK;
    cfg_.maxTokensPerRank = s_.tokens;
    cfg_.expertTokenNumsType = 1;
    rows_ = vigilMoeRequiredRows(&cfg_, s_.rank);
    expandX_.assign(static_cast<size_t>(rows_ * s_.hidden), 0.0f);
    baseX_.assign(expandX_.size(), 0.0f);
    expandScales_.resize(static_cast<size_t>(rows_));
    tokenNums_.resize(static_cast<size_t>(s_.local()));
    recvCounts_.resize(static_cast<size_t>(s_.W * s_.local()));
    out_.resize(x_.size());
    args_.x = x_.data();
    args_.xType = vigilFloat32;
    args_.bs = s_.tokens;
    args_.expertIds = ids_.data();
    args_.expertScales = weights_.data();
    args_.expandX = expandX_.data();
    args_.expandXRows = rows_;
    args_.expandScales = expandScales_.data();
    args_.expertTokenNums = tokenNums_.data();
    args_.epRecvCounts = recvCounts_.data();
    args_.recvRows = &recvRows_;
    size_t bytes = 0;
    check(vigilMoeDispatchGetWorkspaceSize(&cfg_, &args_, comm_, &bytes), comm_, "vigilMoeDispatchGetWorkspaceSize");
    workspace_.resize(bytes);
    if (o.symmetric) {
      // Every rank holds the same rows here (no shared experts), so the sizes agree.
      check(vigilMemAlloc(comm_, expandX_.size() * sizeof(float), &heapX_), comm_, "vigilMemAlloc");
      check(vigilMemAlloc(comm_, expandScales_.size() * sizeof(float), &heapScales_), comm_, "vigilMemAlloc");
    }
  }
  ~Bench() {
    if (heapX_ != nullptr) vigilMemFree(comm_, heapX_);
    if (heapScales_ != nullptr) vigilMemFree(comm_, heapScales_);
  }
  Bench(const Bench&) = delete;
  Bench& operator=(const Bench&) = delete;

  // Dispatch outputs (and combine inputs) in the symmetric heap, or in private memory.
  void useHeap(bool heap) {
    args_.expandX = heap ? heapX_ : expandX_.data();
    args_.expandScales = heap ? static_cast<float*>(heapScales_) : expandScales_.data();
  }

  vigilMoeHandle_t dispatch() {
    vigilMoeHandle_t h = nullptr;
    check(vigilMoeDispatch(&cfg_, &args_, workspace_.data(), workspace_.size(), &h, comm_, nullptr), comm_,
          "vigilMoeDispatch");
    return h;
  }
  void combine(vigilMoeHandle_t h) {
    size_t bytes = 0;
    check(vigilMoeCombineGetWorkspaceSize(&cfg_, h, comm_, &bytes), comm_, "vigilMoeCombineGetWorkspaceSize");
    if (combineWs_.size() < bytes) combineWs_.resize(bytes);
    vigilMoeCombineArgs c{};
    c.expandX = args_.expandX;
    c.xType = vigilFloat32;
    c.expertScales = weights_.data();
    c.out = out_.data();
    check(vigilMoeCombine(&cfg_, h, &c, combineWs_.data(), combineWs_.size(), comm_, nullptr), comm_,
          "vigilMoeCombine");
  }
  void baseDispatch() { baseRows_ = base_.dispatch(x_.data(), ids_.data(), baseX_.data(), a2av()); }
  void baseCombine() { base_.combine(baseX_.data(), weights_.data(), out_.data(), a2av()); }

  // Both dispatches must leave the same rows in the same places.
  void crossCheck() {
    vigilMoeHandle_t h = dispatch();
    vigilMoeHandleDestroy(h);
    baseDispatch();
    const bool same = baseRows_ == recvRows_ &&
                      std::memcmp(baseX_.data(), args_.expandX, static_cast<size_t>(recvRows_ * s_.hidden) * 4) == 0;
    int bad = same ? 0 : 1;
    check(vigilAllReduce(&bad, &bad, 1, vigilInt32, vigilMax, comm_, nullptr), comm_, "vigilAllReduce");
    if (bad) throw Failed{"vigil's dispatch and the all-to-all-v one placed different rows"};
  }

  // Median over samples of the slowest rank's time per call.
  template <class Body>
  double time(Body&& body) {
    for (int i = 0; i < o_.warmup; ++i) body();
    std::vector<double> per;
    for (int s = 0; s < o_.samples; ++s) {
      check(vigilBarrier(comm_, nullptr), comm_, "vigilBarrier");
      const auto t0 = Clock::now();
      for (int i = 0; i < o_.iters; ++i) body();
      double sec = std::chrono::duration<double>(Clock::now() - t0).count() / o_.iters;
      check(vigilAllReduce(&sec, &sec, 1, vigilFloat64, vigilMax, comm_, nullptr), comm_, "vigilAllReduce");
      per.push_back(sec);
    }
    std::sort(per.begin(), per.end());
    return per[per.size() / 2];
  }

  void report(const char* impl, const char* op, double sec) const {
    if (s_.rank != 0) return;
    const double tokensPerSec = static_cast<double>(s_.tokens) * s_.W / sec;
    const double gbps = static_cast<double>(s_.selections()) * static_cast<double>(s_.rowBytes()) / sec / 1e9;
    if (o_.json) {
      std::printf(
          "{\"lib\":\"vigil\",\"impl\":\"%s\",\"op\":\"%s\",\"ranks\":%d,\"tokens\":%lld,\"hidden\":%lld,\"topk\":%lld,"
          "\"experts\":%lld,\"us\":%.2f,\"tokens_per_s\":%.0f,\"gbps\":%.3f}\n",
          impl, op, s_.W, static_cast<long long>(s_.tokens), static_cast<long long>(s_.hidden),
          static_cast<long long>(s_.topK), static_cast<long long>(s_.experts), sec * 1e6, tokensPerSec, gbps);
    } else {
      std::printf("%-10s %-9s %6d %7lld %7lld %5lld %8lld %12.1f %14.0f %9.3f\n", impl, op, s_.W,
                  static_cast<long long>(s_.tokens), static_cast<long long>(s_.hidden), static_cast<long long>(s_.topK),
                  static_cast<long long>(s_.experts), sec * 1e6, tokensPerSec, gbps);
    }
    std::fflush(stdout);
  }

 private:
  VigilAllToAllV a2av() const { return {comm_}; }

  MoeOptions o_;
  vigilComm_t comm_;
  moebench::Shape s_;
  moebench::Baseline base_;
  std::vector<int32_t> ids_;
  std::vector<float> weights_, x_, expandX_, baseX_, expandScales_, out_;
  std::vector<int64_t> tokenNums_;
  std::vector<int32_t> recvCounts_;
  std::vector<uint8_t> workspace_, combineWs_;
  vigilMoeConfig cfg_{};
  vigilMoeDispatchArgs args_{};
  int64_t rows_ = 0, recvRows_ = 0, baseRows_ = 0;
  void* heapX_ = nullptr;
  void* heapScales_ = nullptr;
};

}  // namespace

int runMoePerf(int argc, char** argv) {
  MoeOptions o = parse(argc, argv);
  vigilComm_t comm = nullptr;
  if (vigilCommInitFromEnv(&comm) != vigilSuccess) {
    std::fprintf(stderr, "vigil-perf: vigilCommInitFromEnv failed: %s\n", vigilGetLastError(nullptr));
    return 1;
  }
  vigilCommUserRank(comm, &o.shape.rank);
  vigilCommCount(comm, &o.shape.W);
  if (o.shape.experts % o.shape.W != 0 || o.shape.topK > o.shape.experts) {
    if (o.shape.rank == 0)
      std::fprintf(stderr, "vigil-perf: --experts must be a multiple of the ranks and >= --topk\n");
    vigilCommDestroy(comm);
    return 2;
  }
  try {
    Bench b(o, comm);
    b.crossCheck();
    if (o.symmetric) {
      b.useHeap(true);
      b.crossCheck();
      b.useHeap(false);
    }
    if (o.shape.rank == 0 && !o.json) {
      std::printf("# MoE over %d ranks; us: median per call of the slowest rank; GB/s: selections x row bytes\n",
                  o.shape.W);
      std::printf("%-10s %-9s %6s %7s %7s %5s %8s %12s %14s %9s\n", "impl", "op", "ranks", "tokens", "hidden", "topk",
                  "experts", "us", "tokens/s", "GB/s");
    }
    if (o.vigil && o.dispatch) b.report("vigil", "dispatch", b.time([&] { vigilMoeHandleDestroy(b.dispatch()); }));
    if (o.vigil && o.combine) {
      vigilMoeHandle_t h = b.dispatch();
      b.report("vigil", "combine", b.time([&] { b.combine(h); }));
      vigilMoeHandleDestroy(h);
    }
    if (o.symmetric) {
      b.useHeap(true);
      if (o.dispatch) b.report("symmetric", "dispatch", b.time([&] { vigilMoeHandleDestroy(b.dispatch()); }));
      if (o.combine) {
        vigilMoeHandle_t h = b.dispatch();
        b.report("symmetric", "combine", b.time([&] { b.combine(h); }));
        vigilMoeHandleDestroy(h);
      }
      b.useHeap(false);
    }
    if (o.alltoallv && o.dispatch) b.report("alltoallv", "dispatch", b.time([&] { b.baseDispatch(); }));
    if (o.alltoallv && o.combine) {
      b.baseDispatch();
      b.report("alltoallv", "combine", b.time([&] { b.baseCombine(); }));
    }
  } catch (const Failed& f) {
    std::fprintf(stderr, "vigil-perf: rank %d: %s\n", o.shape.rank, f.what.c_str());
    vigilCommAbort(comm);
    return 1;
  }
  int status = vigilCommFinalize(comm) == vigilSuccess ? 0 : 1;
  vigilCommDestroy(comm);
  return status;
}
