// The measurements of the symmetric-memory benchmark, shared by vigil's
// program (bench/symmetric_perf.cpp) and OpenSHMEM's (bench/peers/
// shmem_perf.cpp), so both libraries run exactly the same loops. Two ranks
// (PEs) of one host; rank 0 prints one JSON line per result.
//
// An Api provides: rank(), alloc(bytes) (symmetric, zeroed), put(dest, src,
// bytes, peer), get(dest, src, bytes, peer), putSignal(dest, src, bytes,
// signal, value, peer) (data, then the signal set to value, ordered),
// waitGe(signal, value), quiet(), barrier().
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

namespace symmbench {

inline double nowUs() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Options {
  int repeats = 5;          // each figure: the median of this many timed runs
  int latencyIters = 20000;  // round trips (or barriers) per run
  std::vector<size_t> sizes = {size_t{64} << 10, size_t{1} << 20, size_t{4} << 20, size_t{16} << 20};
};

// Bytes moved per timed run of a bandwidth test: at least 256 MiB, at least 8 transfers.
inline int transfersFor(size_t bytes) {
  return static_cast<int>(std::max<size_t>(8, (size_t{256} << 20) / bytes));
}

template <class Api>
void run(Api& api, const char* lib, const Options& o) {
  const int me = api.rank(), peer = 1 - me;
  const size_t maxBytes = *std::max_element(o.sizes.begin(), o.sizes.end());
  auto* data = static_cast<uint8_t*>(api.alloc(maxBytes));
  auto* signal = static_cast<uint64_t*>(api.alloc(sizeof(uint64_t)));
  std::vector<uint8_t> local(maxBytes, static_cast<uint8_t>(me + 1));
  auto emit = [&](const char* test, size_t bytes, const char* unit, double value) {
    if (me == 0) std::printf("{\"lib\": \"%s\", \"test\": \"%s\", \"bytes\": %zu, \"%s\": %.4f}\n", lib, test, bytes, unit, value);
    std::fflush(stdout);
  };

  // Put-signal ping-pong, 8 bytes: one way = round trip / 2.
  uint64_t seq = 0;
  auto pingPong = [&](int iters) {
    for (int i = 0; i < iters; ++i) {
      ++seq;
      if (me == 0) {
        api.putSignal(data, local.data(), 8, signal, seq, peer);
        api.waitGe(signal, seq);
      } else {
        api.waitGe(signal, seq);
        api.putSignal(data, local.data(), 8, signal, seq, peer);
      }
    }
  };
  pingPong(o.latencyIters / 10);
  std::vector<double> runs;
  for (int r = 0; r < o.repeats; ++r) {
    api.barrier();
    const double t0 = nowUs();
    pingPong(o.latencyIters);
    runs.push_back((nowUs() - t0) / (2.0 * o.latencyIters));
  }
  emit("putsig_pingpong", 8, "us", median(runs));

  // barrier_all.
  runs.clear();
  for (int i = 0; i < o.latencyIters / 10; ++i) api.barrier();
  for (int r = 0; r < o.repeats; ++r) {
    const double t0 = nowUs();
    for (int i = 0; i < o.latencyIters; ++i) api.barrier();
    runs.push_back((nowUs() - t0) / o.latencyIters);
  }
  emit("barrier_all", 0, "us", median(runs));

  // Bandwidth, one direction: rank 0 puts (gets) while rank 1 waits in a barrier.
  for (const char* test : {"put_bw", "get_bw"}) {
    const bool isPut = test[0] == 'p';
    for (size_t bytes : o.sizes) {
      const int n = transfersFor(bytes);
      runs.clear();
      for (int r = 0; r <= o.repeats; ++r) {  // run 0 warms the pages up
        api.barrier();
        const double t0 = nowUs();
        if (me == 0) {
          for (int i = 0; i < n; ++i) {
            if (isPut) {
              api.put(data, local.data(), bytes, peer);
            } else {
              api.get(local.data(), data, bytes, peer);
            }
          }
          api.quiet();
        }
        const double us = nowUs() - t0;
        api.barrier();
        if (r > 0) runs.push_back(static_cast<double>(bytes) * n / us / 1e3);
      }
      emit(test, bytes, "gbps", median(runs));
    }
  }
}

}  // namespace symmbench
