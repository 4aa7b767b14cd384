// The collective checks over real processes: run as `vigil-run -n N
// vigil-collective-suite`. Each rank prints its failures and the number of
// checks; the exit code is non-zero if any check failed.

#include <cstdio>

#include "common/collective_checks.hpp"

int main() {
  vigilComm_t comm = nullptr;
  if (vigilCommInitFromEnv(&comm) != vigilSuccess) {
    std::fprintf(stderr, "init failed: %s\n", vigilGetLastError(nullptr));
    return 1;
  }
  int rank = 0, n = 0;
  vigilCommUserRank(comm, &rank);
  vigilCommCount(comm, &n);
  int failures = 0;
  vigil::test::Report report{[&](const std::string& what) {
    if (++failures <= 20) std::fprintf(stderr, "FAIL %s\n", what.c_str());
  }};
  vigil::test::checkAll(rank, n, comm, report);
  std::printf("rank %d/%d: %d checks, %d failed\n", rank, n, report.checks, failures);
  if (vigilCommDestroy(comm) != vigilSuccess) return 1;
  return failures == 0 ? 0 : 1;
}
