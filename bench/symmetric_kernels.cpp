// vigil-bench-symmetric-kernels: the kernels on symmetric buffers against
// their sequential versions, measured in the same run (launch with
// vigil-run -n N; ranks of one host):
//   allreduce        vigilAllReduceSymmetric  vs vigilAllReduce (staged through
//                    the transport) on the same float32 vector
//   allgather_gemm   vigilAllGatherGemm       vs vigilAllGather, then one GEMM
//   gemm_rs          vigilGemmReduceScatter   vs one GEMM, then vigilReduceScatter
// Each line also gives the parts of the sequential version timed alone, to
// show where a gain comes from. GEMMs are OpenBLAS's, in both versions; set
// OPENBLAS_NUM_THREADS to the cores per rank (bench/symmetric.sh does).
//   vigil-run -n 2 build/bench/vigil-bench-symmetric-kernels [--repeats N] [--quick]
#include <cblas.h>
#include <vigil/vigil.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

vigilComm_t comm = nullptr;
int me = 0, nranks = 0, repeats = 7;

[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "vigil-bench-symmetric-kernels: %s: %s\n", what, vigilGetLastError(comm));
  std::exit(1);
}
#define CHECK(call) \
  if ((call) != vigilSuccess) fail(#call)

double nowMs() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Median over `repeats` runs (after one warm-up) of the slowest rank's time.
template <class Fn>
double timeMs(Fn&& fn) {
  std::vector<double> runs;
  for (int r = 0; r <= repeats; ++r) {
    CHECK(vigilBarrier(comm, nullptr));
    const double t0 = nowMs();
    fn();
    double ms = nowMs() - t0;
    CHECK(vigilAllReduce(&ms, &ms, 1, vigilFloat64, vigilMax, comm, nullptr));
    if (r > 0) runs.push_back(ms);
  }
  std::sort(runs.begin(), runs.end());
  return runs[runs.size() / 2];
}

void* symmetric(size_t bytes) {
  void* p = nullptr;
  CHECK(vigilMemAlloc(comm, bytes, &p));
  return p;
}

void fill(float* p, size_t count, int salt) {
  for (size_t i = 0; i < count; ++i) p[i] = static_cast<float>(((i * 2654435761u) >> 7) % 1000) / 1000.0f - 0.5f + salt;
}

void sgemm(const float* a, const float* b, float* c, size_t m, size_t n, size_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(m), static_cast<int>(n),
              static_cast<int>(k), 1.0f, a, static_cast<int>(k), b, static_cast<int>(n), 0.0f, c, static_cast<int>(n));
}

void allreduce(size_t bytes) {
  const size_t count = bytes / sizeof(float);
  std::vector<float> send(count), recv(count);
  fill(send.data(), count, me);
  auto* ssend = static_cast<float*>(symmetric(bytes));
  auto* srecv = static_cast<float*>(symmetric(bytes));
  std::memcpy(ssend, send.data(), bytes);
  const double staged = timeMs([&] { CHECK(vigilAllReduce(send.data(), recv.data(), count, vigilFloat32, vigilSum, comm, nullptr)); });
  const double symm = timeMs([&] { CHECK(vigilAllReduceSymmetric(ssend, srecv, count, vigilFloat32, vigilSum, comm, nullptr)); });
  const bool same = std::memcmp(recv.data(), srecv, bytes) == 0;
  if (me == 0) {
    std::printf("{\"test\": \"allreduce\", \"bytes\": %zu, \"symmetric_ms\": %.3f, \"staged_ms\": %.3f, "
                "\"ratio\": %.2f, \"same_bits\": %s}\n",
                bytes, symm, staged, staged / symm, same ? "true" : "false");
    std::fflush(stdout);
  }
  CHECK(vigilMemFree(comm, srecv));
  CHECK(vigilMemFree(comm, ssend));
}

void allGatherGemm(size_t m, size_t k, size_t n) {
  const size_t rows = m / static_cast<size_t>(nranks);
  auto* x = static_cast<float*>(symmetric(rows * k * sizeof(float)));
  std::vector<float> xLocal(rows * k), w(k * n), gathered(m * k), out(m * n), ref(m * n);
  fill(xLocal.data(), xLocal.size(), me);
  fill(w.data(), w.size(), 0);
  std::memcpy(x, xLocal.data(), xLocal.size() * sizeof(float));
  const double kernel = timeMs([&] { CHECK(vigilAllGatherGemm(x, w.data(), out.data(), rows, k, n, vigilFloat32, comm, nullptr)); });
  const double sequential = timeMs([&] {
    CHECK(vigilAllGather(xLocal.data(), gathered.data(), xLocal.size(), vigilFloat32, comm, nullptr));
    sgemm(gathered.data(), w.data(), ref.data(), m, n, k);
  });
  const double gather = timeMs([&] { CHECK(vigilAllGather(xLocal.data(), gathered.data(), xLocal.size(), vigilFloat32, comm, nullptr)); });
  const double gemm = timeMs([&] { sgemm(gathered.data(), w.data(), ref.data(), m, n, k); });
  double err = 0;
  for (size_t i = 0; i < out.size(); ++i) err = std::max(err, static_cast<double>(std::abs(out[i] - ref[i]) / (1 + std::abs(ref[i]))));
  if (me == 0) {
    std::printf("{\"test\": \"allgather_gemm\", \"m\": %zu, \"k\": %zu, \"n\": %zu, \"kernel_ms\": %.3f, "
                "\"sequential_ms\": %.3f, \"ratio\": %.3f, \"allgather_ms\": %.3f, \"gemm_ms\": %.3f, \"max_rel_diff\": %.2e}\n",
                m, k, n, kernel, sequential, sequential / kernel, gather, gemm, err);
    std::fflush(stdout);
  }
  CHECK(vigilMemFree(comm, x));
}

void gemmReduceScatter(size_t m, size_t k, size_t n) {
  const size_t rows = m / static_cast<size_t>(nranks);
  auto* work = static_cast<float*>(symmetric(m * n * sizeof(float)));
  std::vector<float> a(m * k), w(k * n), partial(m * n), out(rows * n), ref(rows * n);
  fill(a.data(), a.size(), me);
  fill(w.data(), w.size(), me);
  const double kernel = timeMs([&] { CHECK(vigilGemmReduceScatter(a.data(), w.data(), out.data(), work, rows, k, n, vigilFloat32, comm, nullptr)); });
  const double sequential = timeMs([&] {
    sgemm(a.data(), w.data(), partial.data(), m, n, k);
    CHECK(vigilReduceScatter(partial.data(), ref.data(), rows * n, vigilFloat32, vigilSum, comm, nullptr));
  });
  const double gemm = timeMs([&] { sgemm(a.data(), w.data(), partial.data(), m, n, k); });
  const double rs = timeMs([&] { CHECK(vigilReduceScatter(partial.data(), ref.data(), rows * n, vigilFloat32, vigilSum, comm, nullptr)); });
  double err = 0;
  for (size_t i = 0; i < out.size(); ++i) err = std::max(err, static_cast<double>(std::abs(out[i] - ref[i]) / (1 + std::abs(ref[i]))));
  if (me == 0) {
    std::printf("{\"test\": \"gemm_rs\", \"m\": %zu, \"k\": %zu, \"n\": %zu, \"kernel_ms\": %.3f, "
                "\"sequential_ms\": %.3f, \"ratio\": %.3f, \"gemm_ms\": %.3f, \"reduce_scatter_ms\": %.3f, \"max_rel_diff\": %.2e}\n",
                m, k, n, kernel, sequential, sequential / kernel, gemm, rs, err);
    std::fflush(stdout);
  }
  CHECK(vigilMemFree(comm, work));
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--repeats" && i + 1 < argc) repeats = std::atoi(argv[++i]);
    if (a == "--quick") quick = true;
  }
  CHECK(vigilCommInitFromEnv(&comm));
  CHECK(vigilCommUserRank(comm, &me));
  CHECK(vigilCommCount(comm, &nranks));
  if (me == 0) {
    std::printf("{\"ranks\": %d, \"openblas_threads\": %d}\n", nranks, openblas_get_num_threads());
  }
  const std::vector<size_t> sizes = quick ? std::vector<size_t>{size_t{1} << 20}
                                          : std::vector<size_t>{size_t{1} << 20, size_t{4} << 20, size_t{16} << 20,
                                                                size_t{64} << 20};
  for (size_t bytes : sizes) allreduce(bytes);
  // A transformer layer's projections scaled to a CPU: M tokens, K = N = 1024,
  // then thinner outputs, where the collective's share of the time is larger.
  const size_t m = quick ? 512 : 4096;
  for (size_t n : quick ? std::vector<size_t>{64} : std::vector<size_t>{1024, 256, 64}) allGatherGemm(m, 1024, n);
  for (size_t n : quick ? std::vector<size_t>{64} : std::vector<size_t>{1024, 256, 64}) gemmReduceScatter(m, 1024, n);
  CHECK(vigilCommDestroy(comm));
  return 0;
}
