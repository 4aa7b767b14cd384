#pragma once
// A communicator's symmetric heap (docs/symmetric.md).
//
// Every rank holds a part of the same size; an allocation is made by every
// rank together, with the same size, and lands at the same offset of every
// part, so a symmetric address names the same bytes in each rank's copy.
// Inside a host the parts are one shared segment that every local rank maps:
// a peer's copy is plain memory (peerPtr), a put is a memcpy into it and a
// signal an atomic store followed by a wake-up of the peer's doorbell if it
// sleeps.
//
// Ordering: a put, get or put-signal is complete when the call returns (the
// copy is done); vigilFence and vigilQuiet therefore have nothing to wait for
// inside a host. putSignal's data is visible to whoever observes its signal
// (release store / acquire load). barrierAll orders everything before it on
// every rank before anything after it.
//
// Waits (signal, barrier) spin briefly when the host's ranks have a core
// each, yield, then sleep on the rank's doorbell; the control thread rings it
// when the communicator stops or a peer changes, so a wait ends with the
// peer's error, the abort, or VG-SYM-005 after the communicator's timeout
// naming the rank it waited for and what that rank was doing.
//
// One thread at a time per heap (as for a communicator's operations); the
// heap keeps its communicator alive and must be dropped before it is freed.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace vigil {

enum class SignalOp : int { Set = 0, Add = 1 };
enum class CmpOp : int { Eq = 0, Ne = 1, Gt = 2, Ge = 3, Lt = 4, Le = 5 };

namespace symm {
struct RankLines;
}

class SymmetricHeap {
 public:
  // Collective over `comm`: the lowest rank of each host creates the host's
  // segment, the others map it. Fails on every rank or on none.
  explicit SymmetricHeap(std::shared_ptr<Communicator> comm);
  ~SymmetricHeap();
  SymmetricHeap(const SymmetricHeap&) = delete;
  SymmetricHeap& operator=(const SymmetricHeap&) = delete;

  Communicator& comm() const { return *comm_; }
  size_t partBytes() const { return heapBytes_; }

  // Collective. bytes 0 on every rank returns null.
  void* alloc(size_t bytes);
  void free(void* ptr);  // collective; null on every rank does nothing

  // `ptr` (this rank's symmetric address) in `peer`'s copy, for loads and stores.
  void* peerPtr(const void* ptr, int peer) const;
  // `dest` / `source` / `signal` are symmetric addresses (this rank's copy).
  void put(void* dest, const void* source, size_t bytes, int peer);
  void get(void* dest, const void* source, size_t bytes, int peer);
  void putSignal(void* dest, const void* source, size_t bytes, uint64_t* signal, uint64_t value, SignalOp op,
                 int peer);
  // Waits until `*signal` (this rank's copy) compares true with `value`;
  // returns what it held then. `fromPeer`: the rank expected to signal (its
  // death ends the wait; -1: any rank's).
  uint64_t waitUntil(uint64_t* signal, CmpOp cmp, uint64_t value, int fromPeer);
  void fence();
  void quiet();
  void barrierAll();

 private:
  struct Allocation {
    size_t offset;
    size_t bytes;  // as asked
    uint64_t id;   // 1 for the first vigilMemAlloc, ...
  };
  enum class Call : uint32_t { None, Alloc, Free, Put, Get, PutSignal, Wait, Barrier };

  // The allocation holding [p, p + bytes) of this rank's copy, or an error naming the overrun.
  const Allocation& locate(const char* call, const void* p, size_t bytes, const char* what) const;
  // `peer`'s copy (ApiBadPeer / VG-SYM-004 when it has none on this host).
  uint8_t* partOf(const char* call, int peer) const;
  void begin(Call call, int peer, size_t offset, uint64_t value) const;
  void end() const;
  void notify(int localPeer) const;
  // Waits until ready(); `lagging()` names the ranks still waited for.
  template <class Ready, class Lagging, class Describe>
  void waitFor(const char* call, Ready&& ready, Lagging&& lagging, Describe&& describe);
  std::string describeRank(int rank) const;
  std::string describeAllocation(const Allocation& a) const;
  void allgather(const void* mine, void* all, size_t bytes);

  const std::shared_ptr<Communicator> comm_;
  const int rank_;
  const int nranks_;
  std::vector<int> localIndex_;  // by rank: index on this host, or -1
  std::vector<int> localRanks_;  // by index: rank
  bool allLocal_ = false;
  size_t heapBytes_ = 0;  // each rank's part
  size_t heapsAt_ = 0;    // offset of part 0 in the segment
  int fd_ = -1;
  uint8_t* base_ = nullptr;  // the segment
  size_t segmentBytes_ = 0;
  uint8_t* mine_ = nullptr;  // this rank's part
  symm::RankLines* lines_ = nullptr;  // by local index
  int spin_ = 16;
  uint64_t waker_ = 0;
  uint64_t barrierEpoch_ = 0;
  uint64_t allocCalls_ = 0;
  std::map<size_t, size_t> free_;          // offset -> bytes (rounded)
  std::map<size_t, Allocation> live_;      // offset -> allocation
};

}  // namespace vigil
