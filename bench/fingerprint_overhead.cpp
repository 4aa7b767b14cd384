// Cost of the always-on fingerprint checks: the same allreduce on two
// communicators of the same 2 thread-ranks, one with fingerprints on and one
// with them off, alternating sample by sample in one run (the machine is
// noisy; only an alternating comparison is fair). Prints the median time per
// call of each and their ratio, for 8 bytes and 1 MiB.
//
//   VIGIL_SOCKET_IFNAME=lo ./build/bench/vigil-bench-fingerprint [samples] [calls-per-sample]

#include <vigil/vigil.h>

#include <algorithm>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace {

constexpr int kRanks = 2;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 21;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 200;
  vigilRootInfo rootOn{}, rootOff{};
  if (vigilGetRootInfo(&rootOn) != vigilSuccess || vigilGetRootInfo(&rootOff) != vigilSuccess) {
    std::fprintf(stderr, "%s\n", vigilGetLastError(nullptr));
    return 1;
  }
  const size_t sizes[] = {8, 1 << 20};
  // times[size][on/off][sample], as seen by rank 0 after a barrier (max over
  // ranks would need another collective; rank 0 ends last in a ring anyway).
  std::vector<double> times[2][2];
  std::barrier sync(kRanks);
  std::vector<std::thread> ranks;
  for (int r = 0; r < kRanks; ++r) {
    ranks.emplace_back([&, r] {
      vigilComm_t comms[2];
      for (int on = 0; on < 2; ++on) {
        vigilConfig cfg = VIGIL_CONFIG_INIT;
        cfg.fingerprint = on;
        if (vigilCommInitRootInfoConfig(kRanks, on ? &rootOn : &rootOff, r, &cfg, &comms[on]) != vigilSuccess) {
          std::fprintf(stderr, "%s\n", vigilGetLastError(nullptr));
          std::exit(1);
        }
      }
      for (size_t s = 0; s < 2; ++s) {
        std::vector<float> buf(sizes[s] / sizeof(float), 1.0f);
        for (int i = 0; i < samples + 2; ++i) {  // two warm-up samples
          // Which goes first alternates too, so neither always runs on a warmer cache.
          const int order[2] = {i % 2, 1 - i % 2};
          for (int on : order) {
            vigilBarrier(comms[on], nullptr);
            auto start = std::chrono::steady_clock::now();
            for (int c = 0; c < calls; ++c) {
              if (vigilAllReduce(buf.data(), buf.data(), buf.size(), vigilFloat32, vigilSum, comms[on], nullptr) !=
                  vigilSuccess) {
                std::fprintf(stderr, "%s\n", vigilGetLastError(comms[on]));
                std::exit(1);
              }
            }
            double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
            if (r == 0 && i >= 2) times[s][on].push_back(us / calls);
            sync.arrive_and_wait();
          }
        }
      }
      for (vigilComm_t c : comms) vigilCommDestroy(c);
    });
  }
  for (auto& t : ranks) t.join();
  std::printf(
      "fingerprint overhead, %d ranks (threads; transport per VIGIL_TRANSPORT, shm by default), %d samples x %d calls, "
      "alternating on/off\n",
      kRanks, samples, calls);
  // The ratio of each adjacent on/off pair shares that moment's noise; its
  // median is the steadier estimate of the overhead.
  std::printf("%10s %14s %14s %10s %16s\n", "bytes", "on (us/call)", "off (us/call)", "on/off", "median pair ratio");
  for (size_t s = 0; s < 2; ++s) {
    const double on = median(times[s][1]), off = median(times[s][0]);
    std::vector<double> ratios;
    for (size_t i = 0; i < times[s][1].size(); ++i) ratios.push_back(times[s][1][i] / times[s][0][i]);
    std::printf("%10zu %14.2f %14.2f %10.3f %16.3f\n", sizes[s], on, off, on / off, median(ratios));
  }
  return 0;
}
