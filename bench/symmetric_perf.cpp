// vigil-bench-symmetric: vigil's symmetric memory, two ranks of one host
// (launch with vigil-run -n 2). The loops are bench/common/symm_driver.hpp's,
// shared with OpenSHMEM's program (bench/peers/shmem_perf.cpp); then the same
// transfers with vigil's two-sided calls (send/recv ping-pong and stream).
//   vigil-run -n 2 build/bench/vigil-bench-symmetric [--repeats N] [--iters N]
#include <vigil/vigil.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "symm_driver.hpp"

namespace {

[[noreturn]] void fail(const char* what, vigilComm_t comm) {
  std::fprintf(stderr, "vigil-bench-symmetric: %s: %s\n", what, vigilGetLastError(comm));
  std::exit(1);
}

#define CHECK(call, comm) \
  if ((call) != vigilSuccess) fail(#call, comm)

struct VigilApi {
  vigilComm_t comm = nullptr;
  int me = 0;
  int rank() const { return me; }
  void* alloc(size_t bytes) {
    void* p = nullptr;
    CHECK(vigilMemAlloc(comm, bytes, &p), comm);
    return p;
  }
  void put(void* dest, const void* src, size_t bytes, int peer) { CHECK(vigilPut(dest, src, bytes, peer, comm, nullptr), comm); }
  void get(void* dest, const void* src, size_t bytes, int peer) { CHECK(vigilGet(dest, src, bytes, peer, comm, nullptr), comm); }
  void putSignal(void* dest, const void* src, size_t bytes, uint64_t* signal, uint64_t value, int peer) {
    CHECK(vigilPutSignal(dest, src, bytes, signal, value, vigilSignalSet, peer, comm, nullptr), comm);
  }
  void waitGe(uint64_t* signal, uint64_t value) {
    CHECK(vigilSignalWaitUntil(signal, vigilCmpGe, value, 1 - me, nullptr, comm, nullptr), comm);
  }
  void quiet() { CHECK(vigilQuiet(comm, nullptr), comm); }
  void barrier() { CHECK(vigilBarrierAll(comm, nullptr), comm); }
};

}  // namespace

int main(int argc, char** argv) {
  symmbench::Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--repeats") o.repeats = std::atoi(argv[i + 1]);
    if (a == "--iters") o.latencyIters = std::atoi(argv[i + 1]);
  }
  VigilApi api;
  CHECK(vigilCommInitFromEnv(&api.comm), nullptr);
  int n = 0;
  CHECK(vigilCommUserRank(api.comm, &api.me), api.comm);
  CHECK(vigilCommCount(api.comm, &n), api.comm);
  if (n != 2) {
    std::fprintf(stderr, "vigil-bench-symmetric: run with 2 ranks (vigil-run -n 2)\n");
    return 2;
  }
  symmbench::run(api, "vigil", o);

  // vigil's two-sided calls over the same bytes: 8 B ping-pong and a one-direction stream.
  const int me = api.me, peer = 1 - me;
  vigilComm_t comm = api.comm;
  std::vector<uint8_t> buf(o.sizes.back());
  auto emit = [&](const char* test, size_t bytes, const char* unit, double value) {
    if (me == 0) std::printf("{\"lib\": \"vigil\", \"test\": \"%s\", \"bytes\": %zu, \"%s\": %.4f}\n", test, bytes, unit, value);
    std::fflush(stdout);
  };
  std::vector<double> runs;
  auto pingPong = [&](int iters) {
    for (int i = 0; i < iters; ++i) {
      if (me == 0) {
        CHECK(vigilSend(buf.data(), 8, vigilUint8, peer, comm, nullptr), comm);
        CHECK(vigilRecv(buf.data(), 8, vigilUint8, peer, comm, nullptr), comm);
      } else {
        CHECK(vigilRecv(buf.data(), 8, vigilUint8, peer, comm, nullptr), comm);
        CHECK(vigilSend(buf.data(), 8, vigilUint8, peer, comm, nullptr), comm);
      }
    }
  };
  pingPong(o.latencyIters / 10);
  for (int r = 0; r < o.repeats; ++r) {
    CHECK(vigilBarrier(comm, nullptr), comm);
    const double t0 = symmbench::nowUs();
    pingPong(o.latencyIters);
    runs.push_back((symmbench::nowUs() - t0) / (2.0 * o.latencyIters));
  }
  emit("sendrecv_pingpong", 8, "us", symmbench::median(runs));
  for (size_t bytes : o.sizes) {
    const int n2 = symmbench::transfersFor(bytes);
    runs.clear();
    for (int r = 0; r <= o.repeats; ++r) {
      CHECK(vigilBarrier(comm, nullptr), comm);
      const double t0 = symmbench::nowUs();
      for (int i = 0; i < n2; ++i) {
        if (me == 0) {
          CHECK(vigilSend(buf.data(), bytes, vigilUint8, peer, comm, nullptr), comm);
        } else {
          CHECK(vigilRecv(buf.data(), bytes, vigilUint8, peer, comm, nullptr), comm);
        }
      }
      CHECK(vigilBarrier(comm, nullptr), comm);
      const double us = symmbench::nowUs() - t0;
      if (r > 0) runs.push_back(static_cast<double>(bytes) * n2 / us / 1e3);
    }
    emit("send_bw", bytes, "gbps", symmbench::median(runs));
  }
  CHECK(vigilCommDestroy(comm), nullptr);
  return 0;
}
