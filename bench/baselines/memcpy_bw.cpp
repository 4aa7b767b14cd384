// The memory limit a shared-memory collective works against, on one thread:
//   coll "memcpy": memcpy(dst, src, bytes)        -> bytes / time
//   coll "sum":    dst[i] = a[i] + b[i] (float32) -> bytes / time
// A 2-rank allreduce over shared memory has to read both inputs and write
// the result, so these bound it from above; perf.md asks for ≥ 50 % of
// memcpy. Same command line and JSON as vigil-perf (lib "memcpy").
#include <vector>

#include "../common/perf_common.hpp"

namespace {

// Keeps the compiler from merging or dropping the repeated identical copies.
inline void Clobber() {
  asm volatile("" ::: "memory");
}

// Plain loop, vectorised by the compiler at -O2/-O3: what a straightforward
// reduction kernel gets, without library-specific tuning.
__attribute__((noinline)) void SumArrays(float* __restrict out, const float* __restrict a, const float* __restrict b,
                                         size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

perf::Stats Measure(const perf::Options& o, const std::function<void()>& call) {
  for (int i = 0; i < o.warmup; ++i) call();
  std::vector<double> times;
  for (int s = 0; s < o.samples; ++s) {
    const double t0 = perf::Now();
    for (int i = 0; i < o.iters; ++i) call();
    times.push_back((perf::Now() - t0) / o.iters);
  }
  return perf::Summarize(times);
}

}  // namespace

int main(int argc, char** argv) {
  const perf::Options o = perf::ParseArgs(argc, argv, /*collectives=*/false, /*fork_ranks=*/false);
  const std::vector<size_t> sizes = perf::Sizes(o);
  const size_t max_bytes = std::max<size_t>(sizes.back(), 4);
  char* src = perf::AllocTouched<char>(max_bytes);
  char* dst = perf::AllocTouched<char>(max_bytes);
  float* a = perf::AllocTouched<float>(max_bytes / 4 + 1);
  float* b = perf::AllocTouched<float>(max_bytes / 4 + 1);
  float* c = perf::AllocTouched<float>(max_bytes / 4 + 1);
  for (size_t i = 0; i < max_bytes; ++i) src[i] = static_cast<char>(i * 7);
  for (size_t i = 0; i < max_bytes / 4; ++i) {
    a[i] = static_cast<float>(i % 13);
    b[i] = static_cast<float>(i % 7);
  }

  perf::PrintHeader(o.json);
  int64_t total_wrong = 0;
  for (size_t bytes : sizes) {
    perf::Record r;
    r.lib = "memcpy";
    r.coll = "memcpy";
    r.bytes = bytes;
    r.count = bytes;
    r.dtype = "uint8";
    r.op = "none";
    r.time_s = Measure(o, [&] {
      std::memcpy(dst, src, bytes);
      Clobber();
    });
    r.wrong = std::memcmp(dst, src, bytes) == 0 ? 0 : 1;
    total_wrong += r.wrong;
    perf::PrintRecord(r, o.json);
  }
  for (size_t bytes : sizes) {
    const size_t n = std::max<size_t>(bytes / 4, 1);
    perf::Record r;
    r.lib = "memcpy";
    r.coll = "sum";
    r.bytes = n * 4;
    r.count = n;
    r.dtype = "float32";
    r.op = "sum";
    r.time_s = Measure(o, [&] {
      SumArrays(c, a, b, n);
      Clobber();
    });
    for (size_t i = 0; i < n; ++i) r.wrong += c[i] != a[i] + b[i];
    total_wrong += r.wrong;
    perf::PrintRecord(r, o.json);
  }
  std::free(src);
  std::free(dst);
  std::free(a);
  std::free(b);
  std::free(c);
  return total_wrong == 0 ? 0 : 1;
}
