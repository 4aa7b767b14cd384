// Throughput of the reduction kernels: the portable loops against the set
// chosen for this CPU, on the same buffers, alternating sample by sample (the
// machine is noisy; only an alternating comparison is fair). Prints the median
// rate of each in GB/s of one operand reduced per second (dst += src reads two
// arrays and writes one, so the memory traffic is three times that).
//
//   ./build/bench/vigil-bench-reduce [samples]

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "reduce/half.hpp"
#include "reduce/kernels.hpp"
#include "reduce/reduce.hpp"

namespace {

using vigil::reduce::KernelIsa;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per call, over enough calls to last at least 20 ms so that timer
// resolution and one-off interruptions stay small.
double secondsPerCall(const std::function<void()>& call) {
  for (long calls = 1;; calls *= 2) {
    const auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) call();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (s >= 0.02) return s / static_cast<double>(calls);
  }
}

template <typename T>
std::vector<uint8_t> filled(size_t bytes, T value) {
  std::vector<uint8_t> out(bytes);
  for (size_t i = 0; i + sizeof(T) <= bytes; i += sizeof(T)) std::memcpy(&out[i], &value, sizeof(T));
  return out;
}

struct Case {
  const char* name;
  size_t bytes;
  std::function<void()> call;  // the work timed, on one operand of `bytes`
};

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 9;
  const bool vector = vigil::reduce::supportedKernelIsa() == KernelIsa::kAvx2;
  std::printf("kernels for this CPU: %s\n", vector ? "AVX2 + F16C" : "portable loops only");

  // Values that stay normal however often they are summed (denormals would
  // time the FPU's slow path, not the kernels); halves saturate at Inf, which
  // costs nothing extra.
  constexpr size_t kMiB = size_t{1} << 20;
  std::vector<Case> cases;
  std::vector<std::vector<uint8_t>> keep;
  const auto addSum = [&](const char* name, size_t bytes, vigilDataType_t dtype, auto one, auto small) {
    keep.push_back(filled(bytes, one));
    keep.push_back(filled(bytes, small));
    uint8_t* dst = keep[keep.size() - 2].data();
    const uint8_t* src = keep.back().data();
    const size_t count = bytes / sizeof(one);
    cases.push_back({name, bytes, [=] { vigil::reduce::reduceInPlace(dst, src, count, dtype, vigilSum); }});
  };
  for (size_t bytes : {kMiB, 64 * kMiB}) {
    const bool big = bytes > kMiB;
    addSum(big ? "float32 sum   64 MiB" : "float32 sum    1 MiB", bytes, vigilFloat32, 1.0f, 1e-3f);
    addSum(big ? "float16 sum   64 MiB" : "float16 sum    1 MiB", bytes, vigilFloat16, vigil::floatToHalf(1.0f),
           vigil::floatToHalf(1e-3f));
    addSum(big ? "bfloat16 sum  64 MiB" : "bfloat16 sum   1 MiB", bytes, vigilBfloat16, vigil::floatToBfloat16(1.0f),
           vigil::floatToBfloat16(1e-3f));
  }
  keep.push_back(filled(64 * kMiB, 1.0f));
  const uint8_t* scanned = keep.back().data();
  cases.push_back({"float32 NaN scan 64 MiB", 64 * kMiB, [=] {
                     if (vigil::reduce::findNonFinite(scanned, 16 * kMiB, vigilFloat32) != SIZE_MAX) std::abort();
                   }});

  std::printf("%-24s %14s %14s %8s\n", "case", "portable GB/s", "vector GB/s", "ratio");
  const KernelIsa isas[] = {KernelIsa::kScalar, vigil::reduce::supportedKernelIsa()};
  for (const Case& c : cases) {
    std::vector<double> rate[2];
    for (int s = 0; s < samples; ++s) {
      for (int k = 0; k < 2; ++k) {
        const int which = (s + k) % 2;  // alternate which set runs first
        vigil::reduce::setKernelIsaForTesting(isas[which]);
        rate[which].push_back(static_cast<double>(c.bytes) / secondsPerCall(c.call) / 1e9);
      }
    }
    const double portable = median(rate[0]), best = median(rate[1]);
    std::printf("%-24s %14.2f %14.2f %7.2fx\n", c.name, portable, best, best / portable);
  }
  vigil::reduce::setKernelIsaForTesting(vigil::reduce::supportedKernelIsa());
  return 0;
}
