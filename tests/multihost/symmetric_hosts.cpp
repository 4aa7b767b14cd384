// vigil-test-symmetric-hosts: the symmetric heap on several hosts (run by
// test_launch_env.sh on the namespace test bed, 2 ranks per host, ranks of a
// host numbered consecutively). What works across hosts today, and what is
// refused, clearly:
//  - vigilMemAlloc / vigilMemFree and vigilBarrierAll on the whole communicator;
//  - put-signal, get and peer pointers with the rank on the same host;
//  - a put, get or peer pointer to a rank on another host, and the symmetric
//    allreduce over ranks of several hosts: VG-SYM-004 naming that rank, and
//    nothing written.
// Prints "rank r/n: symmetric across hosts: C checks, F failed"; exit 0 when F is 0.
#include <vigil/vigil.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace {

int checks = 0, failed = 0;
int rank = 0, nranks = 0;

void expect(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failed;
    std::printf("rank %d: FAILED: %s\n", rank, what.c_str());
  }
}

bool contains(const char* text, const std::string& part) { return std::string(text).find(part) != std::string::npos; }

}  // namespace

int main() {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  vigilComm_t comm = nullptr;
  if (vigilCommInitFromEnv(&comm) != vigilSuccess) {
    std::printf("init failed: %s\n", vigilGetLastError(nullptr));
    return 1;
  }
  vigilCommUserRank(comm, &rank);
  vigilCommCount(comm, &nranks);
  const int partner = rank ^ 1;             // the other rank of this host
  const int remote = (rank + 2) % nranks;   // a rank of the next host
  constexpr size_t kBytes = 64 * 1024;

  void* heap = nullptr;
  expect(vigilMemAlloc(comm, kBytes + 64, &heap) == vigilSuccess, std::string("vigilMemAlloc: ") + vigilGetLastError(comm));
  auto* data = static_cast<uint8_t*>(heap);
  auto* signal = reinterpret_cast<uint64_t*>(data + kBytes);

  // Put-signal, peer pointer and get with the rank of the same host.
  for (uint64_t round = 1; round <= 20; ++round) {
    std::vector<uint8_t> mine(kBytes);
    for (size_t i = 0; i < kBytes; ++i) mine[i] = static_cast<uint8_t>(rank * 31 + round * 7 + i);
    expect(vigilPutSignal(data, mine.data(), kBytes, signal, round, vigilSignalSet, partner, comm, nullptr) == vigilSuccess,
           std::string("vigilPutSignal: ") + vigilGetLastError(comm));
    expect(vigilSignalWaitUntil(signal, vigilCmpGe, round, partner, nullptr, comm, nullptr) == vigilSuccess,
           std::string("vigilSignalWaitUntil: ") + vigilGetLastError(comm));
    bool same = true;
    for (size_t i = 0; i < kBytes; ++i) same &= data[i] == static_cast<uint8_t>(partner * 31 + round * 7 + i);
    expect(same, "round " + std::to_string(round) + ": the partner's data");
    expect(vigilBarrierAll(comm, nullptr) == vigilSuccess, std::string("vigilBarrierAll: ") + vigilGetLastError(comm));
  }
  void* peer = nullptr;
  expect(vigilMemPeerPtr(comm, data, partner, &peer) == vigilSuccess && peer != nullptr, "vigilMemPeerPtr to the partner");
  std::vector<uint8_t> got(16);
  expect(vigilGet(got.data(), data, got.size(), partner, comm, nullptr) == vigilSuccess, "vigilGet from the partner");
  expect(got[0] == static_cast<uint8_t>(rank * 31 + 20 * 7), "vigilGet returns the partner's copy");

  // Across hosts: refused, naming the rank; nothing written.
  const std::string remoteText = "rank " + std::to_string(remote) + " runs on another host";
  expect(vigilMemPeerPtr(comm, data, remote, &peer) == vigilInvalidArgument, "vigilMemPeerPtr to another host fails");
  expect(contains(vigilGetLastError(comm), "VG-SYM-004") && contains(vigilGetLastError(comm), remoteText),
         std::string("its message: ") + vigilGetLastError(comm));
  std::vector<uint8_t> junk(kBytes, 0xEE);
  expect(vigilPut(data, junk.data(), kBytes, remote, comm, nullptr) == vigilInvalidArgument, "vigilPut to another host fails");
  expect(contains(vigilGetLastError(comm), "VG-SYM-004") && contains(vigilGetLastError(comm), "vigilPut"),
         std::string("its message: ") + vigilGetLastError(comm));
  expect(vigilBarrierAll(comm, nullptr) == vigilSuccess, "vigilBarrierAll after the refusals");
  expect(data[0] == static_cast<uint8_t>(partner * 31 + 20 * 7), "a refused put wrote nothing");
  expect(vigilAllReduceSymmetric(data, data, 16, vigilUint8, vigilSum, comm, nullptr) == vigilInvalidArgument,
         "the symmetric allreduce over several hosts fails");
  expect(contains(vigilGetLastError(comm), "VG-SYM-004"), std::string("its message: ") + vigilGetLastError(comm));
  if (rank == 0) std::printf("rank 0 sees: %s\n", vigilGetLastError(comm));

  expect(vigilMemFree(comm, heap) == vigilSuccess, std::string("vigilMemFree: ") + vigilGetLastError(comm));
  std::printf("rank %d/%d: symmetric across hosts: %d checks, %d failed\n", rank, nranks, checks, failed);
  vigilCommDestroy(comm);
  return failed == 0 ? 0 : 1;
}
