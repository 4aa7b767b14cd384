// vigil demo: start with `vigil-run -n 4 vigil-demo`.
//
// Every rank runs a few collectives and checks the results; then the last
// rank leaves early (as a rank that exits a training loop one iteration too
// soon would), and the others show what vigil reports instead of hanging.

#include <vigil/vigil.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(call)                                                                                            \
  do {                                                                                                         \
    vigilResult_t rc_ = (call);                                                                                \
    if (rc_ != vigilSuccess) {                                                                                 \
      std::fprintf(stderr, "%s failed: %s\n  %s\n", #call, vigilGetErrorString(rc_), vigilGetLastError(comm)); \
      return 1;                                                                                                \
    }                                                                                                          \
  } while (0)

int main() {
  vigilComm_t comm = nullptr;
  CHECK(vigilCommInitFromEnv(&comm));
  int rank = 0, n = 0;
  CHECK(vigilCommUserRank(comm, &rank));
  CHECK(vigilCommCount(comm, &n));

  // AllReduce: every rank contributes rank+1; the sum is n(n+1)/2 everywhere.
  std::vector<float> grad(1 << 20, static_cast<float>(rank + 1));
  CHECK(vigilAllReduce(grad.data(), grad.data(), grad.size(), vigilFloat32, vigilSum, comm, nullptr));
  const float expected = n * (n + 1) / 2.0f;
  bool ok = grad.front() == expected && grad.back() == expected;

  // AllGather: each rank's id, gathered in rank order.
  int mine = rank * 10;
  std::vector<int> all(static_cast<size_t>(n));
  CHECK(vigilAllGather(&mine, all.data(), 1, vigilInt32, comm, nullptr));
  for (int r = 0; r < n; ++r) ok &= all[static_cast<size_t>(r)] == r * 10;

  // Broadcast from rank 0.
  double lr = rank == 0 ? 3e-4 : 0.0;
  CHECK(vigilBroadcast(&lr, &lr, 1, vigilFloat64, 0, comm, nullptr));
  ok &= lr == 3e-4;

  std::printf("rank %d/%d: allreduce of 1M floats = %.0f (expected %.0f), allgather = [", rank, n,
              static_cast<double>(grad.front()), static_cast<double>(expected));
  for (int r = 0; r < n; ++r) std::printf(r ? ", %d" : "%d", all[static_cast<size_t>(r)]);
  std::printf("], broadcast lr = %g: %s\n", lr, ok ? "correct" : "WRONG");
  std::fflush(stdout);
  if (!ok) return 1;

  // The failure: the last rank leaves the loop one step early.
  if (rank == n - 1) {
    std::printf("rank %d: leaving the loop one step early (vigilCommDestroy, then exit)\n", rank);
    std::fflush(stdout);
    vigilCommDestroy(comm);
    return 0;
  }
  auto start = std::chrono::steady_clock::now();
  vigilResult_t rc = vigilAllReduce(grad.data(), grad.data(), grad.size(), vigilFloat32, vigilSum, comm, nullptr);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (rc == vigilSuccess) {
    std::printf("rank %d: the allreduce succeeded without rank %d?!\n", rank, n - 1);
    return 1;
  }
  std::printf("rank %d: allreduce returned '%s' after %.0f ms:\n  %s\n", rank, vigilGetErrorString(rc), ms,
              vigilGetLastError(comm));
  vigilCommDestroy(comm);
  return 0;
}
