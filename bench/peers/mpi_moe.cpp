// The MoE exchange of bench/common/moe_exchange.hpp over MPI_Alltoallv: the
// MPI baseline for vigil's dispatch and combine. Built against Open MPI and
// MPICH by bench/build_peers.sh, run under that MPI's launcher; prints the
// same JSON records as `vigil-perf -c moe --json` (rank 0).
//
//   mpirun -np 4 build-bench/mpi_moe_openmpi --tokens 256 --hidden 1024 --topk 8 --experts 64
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../common/moe_exchange.hpp"

#ifndef MPI_PERF_LIB
#define MPI_PERF_LIB "mpi"
#endif

namespace {

// MPI counts are int: the byte counts of one call must fit.
struct MpiAllToAllV {
  std::vector<int> sc, sd, rc, rd;
  void operator()(const void* send, const size_t* sb, const size_t* sdis, void* recv, const size_t* rb,
                  const size_t* rdis) {
    const size_t n = sc.size();
    for (size_t i = 0; i < n; ++i) {
      sc[i] = static_cast<int>(sb[i]);
      sd[i] = static_cast<int>(sdis[i]);
      rc[i] = static_cast<int>(rb[i]);
      rd[i] = static_cast<int>(rdis[i]);
    }
    MPI_Alltoallv(send, sc.data(), sd.data(), MPI_BYTE, recv, rc.data(), rd.data(), MPI_BYTE, MPI_COMM_WORLD);
  }
};

long long arg(int argc, char** argv, const char* flag, long long fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], flag) == 0) return std::atoll(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  moebench::Shape s;
  MPI_Comm_rank(MPI_COMM_WORLD, &s.rank);
  MPI_Comm_size(MPI_COMM_WORLD, &s.W);
  s.tokens = arg(argc, argv, "--tokens", s.tokens);
  s.hidden = arg(argc, argv, "--hidden", s.hidden);
  s.topK = arg(argc, argv, "--topk", s.topK);
  s.experts = arg(argc, argv, "--experts", s.experts);
  const int iters = static_cast<int>(arg(argc, argv, "-n", 10)), warmup = static_cast<int>(arg(argc, argv, "-w", 3)),
            samples = static_cast<int>(arg(argc, argv, "-s", 5));
  if (s.experts % s.W != 0 || s.topK > s.experts || iters < 1 || samples < 1) {
    if (s.rank == 0) std::fprintf(stderr, "mpi_moe: --experts must be a multiple of the ranks and >= --topk\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  std::vector<int32_t> ids;
  std::vector<float> weights, x;
  moebench::makeWorkload(s, ids, weights, x);
  const int64_t capacity = s.tokens * s.W * std::min(s.local(), s.topK);
  std::vector<float> expandX(static_cast<size_t>(capacity * s.hidden)), out(x.size());
  moebench::Baseline base(s);
  MpiAllToAllV a2av{std::vector<int>(s.W), std::vector<int>(s.W), std::vector<int>(s.W), std::vector<int>(s.W)};

  auto time = [&](auto&& body) {
    for (int i = 0; i < warmup; ++i) body();
    std::vector<double> per;
    for (int k = 0; k < samples; ++k) {
      MPI_Barrier(MPI_COMM_WORLD);
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < iters; ++i) body();
      double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / iters;
      MPI_Allreduce(MPI_IN_PLACE, &sec, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      per.push_back(sec);
    }
    std::sort(per.begin(), per.end());
    return per[per.size() / 2];
  };
  auto report = [&](const char* op, double sec) {
    if (s.rank != 0) return;
    std::printf(
        "{\"lib\":\"%s\",\"impl\":\"alltoallv\",\"op\":\"%s\",\"ranks\":%d,\"tokens\":%lld,\"hidden\":%lld,"
        "\"topk\":%lld,\"experts\":%lld,\"us\":%.2f,\"tokens_per_s\":%.0f,\"gbps\":%.3f}\n",
        MPI_PERF_LIB, op, s.W, static_cast<long long>(s.tokens), static_cast<long long>(s.hidden),
        static_cast<long long>(s.topK), static_cast<long long>(s.experts), sec * 1e6,
        static_cast<double>(s.tokens) * s.W / sec,
        static_cast<double>(s.selections()) * static_cast<double>(s.rowBytes()) / sec / 1e9);
    std::fflush(stdout);
  };
  report("dispatch", time([&] { base.dispatch(x.data(), ids.data(), expandX.data(), a2av); }));
  base.dispatch(x.data(), ids.data(), expandX.data(), a2av);
  report("combine", time([&] { base.combine(expandX.data(), weights.data(), out.data(), a2av); }));
  MPI_Finalize();
  return 0;
}
