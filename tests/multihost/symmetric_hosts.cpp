// vigil-test-symmetric-hosts: the symmetric heap on several hosts (run by
// test_launch_env.sh on the namespace test bed, 2 ranks per host, ranks of a
// host numbered consecutively):
//  - vigilMemAlloc / vigilMemFree and vigilBarrierAll on the whole communicator;
//  - put-signal, get and peer pointers with the rank on the same host;
//  - over UCX (VIGIL_TRANSPORT=ucx): put-signal (set and add), put, get and
//    quiet with ranks of other hosts, through UCX RMA;
//  - refused with VG-SYM-004 naming the rank, nothing written: a peer pointer
//    to another host, the symmetric allreduce over several hosts, and over
//    TCP (no one-sided access) a put to another host.
// Prints "rank r/n: symmetric across hosts: C checks, F failed"; exit 0 when F is 0.
#include <vigil/vigil.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
  // Nobody writes `data` below before every rank has read its partner's copy.
  expect(vigilBarrierAll(comm, nullptr) == vigilSuccess, std::string("vigilBarrierAll: ") + vigilGetLastError(comm));

  // Across hosts. No load/store path: a peer pointer is refused, naming the rank.
  const std::string remoteText = "rank " + std::to_string(remote) + " runs on another host";
  expect(vigilMemPeerPtr(comm, data, remote, &peer) == vigilInvalidArgument, "vigilMemPeerPtr to another host fails");
  expect(contains(vigilGetLastError(comm), "VG-SYM-004") && contains(vigilGetLastError(comm), remoteText),
         std::string("its message: ") + vigilGetLastError(comm));
  const char* transport = std::getenv("VIGIL_TRANSPORT");
  if (transport != nullptr && std::string(transport) == "ucx") {
    // Over UCX: put, get and put-signal reach the other hosts (UCX RMA and a remote atomic add).
    const int from = (rank + nranks - 2) % nranks;  // who puts into this rank
    auto* counter = signal + 1;
    for (uint64_t round = 1; round <= 20; ++round) {
      std::vector<uint8_t> mine(kBytes);
      for (size_t i = 0; i < kBytes; ++i) mine[i] = static_cast<uint8_t>(rank * 17 + round * 5 + i);
      expect(vigilPutSignal(data, mine.data(), kBytes, signal, 100 + round, vigilSignalSet, remote, comm, nullptr) ==
                 vigilSuccess,
             std::string("vigilPutSignal to another host: ") + vigilGetLastError(comm));
      expect(vigilSignalWaitUntil(signal, vigilCmpEq, 100 + round, from, nullptr, comm, nullptr) == vigilSuccess,
             std::string("vigilSignalWaitUntil from another host: ") + vigilGetLastError(comm));
      bool same = true;
      for (size_t i = 0; i < kBytes; ++i) same &= data[i] == static_cast<uint8_t>(from * 17 + round * 5 + i);
      expect(same, "round " + std::to_string(round) + ": the data put by rank " + std::to_string(from) +
                       " on another host, before its signal");
      expect(vigilBarrierAll(comm, nullptr) == vigilSuccess,
             std::string("vigilBarrierAll: ") + vigilGetLastError(comm));
    }
    std::vector<uint8_t> block(kBytes, static_cast<uint8_t>(rank + 1));
    expect(vigilPut(data, block.data(), kBytes, remote, comm, nullptr) == vigilSuccess,
           std::string("vigilPut to another host: ") + vigilGetLastError(comm));
    expect(vigilQuiet(comm, nullptr) == vigilSuccess, std::string("vigilQuiet: ") + vigilGetLastError(comm));
    expect(vigilBarrierAll(comm, nullptr) == vigilSuccess, std::string("vigilBarrierAll: ") + vigilGetLastError(comm));
    expect(data[0] == static_cast<uint8_t>(from + 1) && data[kBytes - 1] == static_cast<uint8_t>(from + 1),
           "vigilPut from another host arrived by the barrier");
    std::vector<uint8_t> got2(kBytes);
    expect(vigilGet(got2.data(), data, kBytes, remote, comm, nullptr) == vigilSuccess,
           std::string("vigilGet from another host: ") + vigilGetLastError(comm));
    expect(got2[0] == static_cast<uint8_t>(rank + 1) && got2[kBytes - 1] == static_cast<uint8_t>(rank + 1),
           "vigilGet returns the other host's copy (what this rank put there)");
    expect(vigilPutSignal(data, nullptr, 0, counter, static_cast<uint64_t>(rank + 1), vigilSignalAdd, 0, comm,
                          nullptr) == vigilSuccess,
           std::string("vigilPutSignal add to rank 0: ") + vigilGetLastError(comm));
    if (rank == 0) {
      const uint64_t want = static_cast<uint64_t>(nranks) * static_cast<uint64_t>(nranks + 1) / 2;
      expect(vigilSignalWaitUntil(counter, vigilCmpEq, want, -1, nullptr, comm, nullptr) == vigilSuccess,
             std::string("rank 0 sees every rank's add: ") + vigilGetLastError(comm));
    }
    expect(vigilBarrierAll(comm, nullptr) == vigilSuccess, std::string("vigilBarrierAll: ") + vigilGetLastError(comm));
  } else {
    // Without one-sided access (tcp): refused, naming the rank and the transport; nothing written.
    std::vector<uint8_t> junk(kBytes, 0xEE);
    expect(vigilPut(data, junk.data(), kBytes, remote, comm, nullptr) == vigilInvalidArgument,
           "vigilPut to another host fails");
    expect(contains(vigilGetLastError(comm), "VG-SYM-004") && contains(vigilGetLastError(comm), "vigilPut") &&
               contains(vigilGetLastError(comm), "has no one-sided access"),
           std::string("its message: ") + vigilGetLastError(comm));
    expect(vigilBarrierAll(comm, nullptr) == vigilSuccess, "vigilBarrierAll after the refusals");
    expect(data[0] == static_cast<uint8_t>(partner * 31 + 20 * 7), "a refused put wrote nothing");
  }
  expect(vigilAllReduceSymmetric(data, data, 16, vigilUint8, vigilSum, comm, nullptr) == vigilInvalidArgument,
         "the symmetric allreduce over several hosts fails");
  expect(contains(vigilGetLastError(comm), "VG-SYM-004"), std::string("its message: ") + vigilGetLastError(comm));
  if (rank == 0) std::printf("rank 0 sees: %s\n", vigilGetLastError(comm));

  expect(vigilMemFree(comm, heap) == vigilSuccess, std::string("vigilMemFree: ") + vigilGetLastError(comm));
  std::printf("rank %d/%d: symmetric across hosts: %d checks, %d failed\n", rank, nranks, checks, failed);
  vigilCommDestroy(comm);
  return failed == 0 ? 0 : 1;
}
