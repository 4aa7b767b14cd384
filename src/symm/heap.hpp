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
// Ordering: inside a host a put, get or put-signal is complete when the call
// returns (the copy is done); vigilFence and vigilQuiet therefore have nothing
// to wait for there. A rank on another host is reached through the
// transport's one-sided access (window_: UCX put, get, atomic add); such a
// put returns when its source may be reused and is at its target by the
// next quiet or barrierAll, which flush. putSignal's data is visible to whoever observes its signal
// (release store / acquire load). barrierAll orders everything before it on
// every rank before anything after it.
//
// Waits (signal, barrier) spin briefly when the host's ranks have a core
// each, yield, then sleep on the rank's doorbell; the control thread rings it
// when the communicator stops or a peer changes, so a wait ends with the
// peer's error, the abort, or VG-SYM-005 after the communicator's timeout
// naming the rank it waited for and what that rank was doing.
//
// One thread at a time per heap (as for a communicator's operations). The
// heap is its communicator's extension: it lives and dies with it.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/communicator.hpp"

namespace vigil {

class RmaWindow;

enum class SignalOp : int { Set = 0, Add = 1 };
enum class CmpOp : int { Eq = 0, Ne = 1, Gt = 2, Ge = 3, Lt = 4, Le = 5 };

namespace symm {
struct RankLines;

// What a kernel's ranks must agree on, hashed (FNV-1a over the values).
inline uint64_t fingerprintOf(std::initializer_list<uint64_t> values) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (uint64_t v : values) h = (h ^ v) * 0x100000001b3ULL;
  return h;
}
}  // namespace symm

class SymmetricHeap : public Communicator::Extension {
 public:
  // Collective over `comm`: the lowest rank of each host creates the host's
  // segment, the others map it. Fails on every rank or on none.
  explicit SymmetricHeap(Communicator& comm);
  ~SymmetricHeap() override;
  // `comm`'s heap, made (collectively) if `create`; else null when it has none.
  static SymmetricHeap* of(Communicator& comm, bool create);
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

  // ---- Kernels on symmetric buffers (symm/allreduce.cpp) ----
  // Allreduce of `count` elements from every rank's `send` into every rank's
  // `recv` (symmetric addresses; in place allowed): rank q reduces slice q
  // straight from every rank's copy, in rank order (the bits of vigil's
  // allreduce), and writes it into every rank's `recv`. Ranks of one host.
  void allReduce(const void* send, void* recv, size_t count, vigilDataType_t dtype, vigilRedOp_t op);

  // ---- GEMM kernels (symm/gemm.cpp), row-major, float32 or float64 ----
  // out[(nranks * rows) x n] = allgather(x)[(nranks * rows) x k] @ w[k x n]:
  // `x` (symmetric, rows x k) is this rank's block of rows; a peer's block is
  // multiplied straight from its copy as soon as the peer has entered.
  void allGatherGemm(const void* x, const void* w, void* out, size_t rows, size_t k, size_t n, vigilDataType_t dtype);
  // out[rows x n] = this rank's block of rows of sum over ranks of
  // a_r[(nranks * rows) x k] @ w_r[k x n]. `workspace` (symmetric, nranks *
  // rows x n) takes this rank's partial product, block by block; the owner
  // of a block reduces it from every rank's copy, in rank order, as soon as
  // the ranks have computed it.
  void gemmReduceScatter(const void* a, const void* w, void* out, void* workspace, size_t rows, size_t k, size_t n,
                         vigilDataType_t dtype);

  // ---- For collective kernels built outside the heap (MoE: moe/dispatch.cpp, moe/combine.cpp) ----
  // Whether every rank of the communicator is on this host (peers' copies are then plain memory).
  bool allLocal() const { return allLocal_; }
  struct Place {
    size_t offset;  // heap offset of the first byte
    size_t room;    // bytes from there to the end of its allocation (the same on every rank)
  };
  // Where [p, p + bytes) lies, if inside one live allocation of this rank; else nothing.
  std::optional<Place> placeOf(const void* p, size_t bytes) const;
  // `rank`'s copy of heap offset `offset`; `rank` must be on this host.
  uint8_t* at(int rank, size_t offset) const { return part(localIndex_[static_cast<size_t>(rank)]) + offset; }
  enum class KernelStage : uint8_t { MoeDispatchExit = 8, MoeCombineEntry = 9, MoeCombineExit = 10 };
  // Marks this rank as in `call` (MoE dispatch or combine number `number`)
  // for the wait messages of its peers, until destroyed.
  class KernelScope;  // defined below the class
  // A barrier of every rank (all on this host) at a kernel's `stage`: every
  // rank must be at the same stage with the same `fingerprint` (else
  // VG-SYM-001); `number` names the call (the dispatch number).
  void kernelBarrier(const char* call, KernelStage stage, uint64_t fingerprint, uint64_t number) {
    localBarrier(call, static_cast<BarrierKind>(stage), fingerprint, number);
  }

 private:
  struct Allocation {
    size_t offset;
    size_t bytes;  // as asked
    uint64_t id;   // 1 for the first vigilMemAlloc, ...
  };
  enum class Call : uint32_t {
    None,
    Alloc,
    Free,
    Put,
    Get,
    PutSignal,
    Wait,
    Barrier,
    AllReduce,
    AllGatherGemm,
    GemmReduceScatter,
    MoeDispatch,
    MoeCombine,
    Quiet
  };

  // The allocation holding [p, p + bytes) of this rank's copy, or an error naming the overrun.
  const Allocation& locate(const char* call, const void* p, size_t bytes, const char* what) const;
  // `peer`'s copy (ApiBadPeer / VG-SYM-004 when it has none on this host).
  uint8_t* partOf(const char* call, int peer) const;
  void begin(Call call, int peer, size_t offset, uint64_t value) const;
  void end() const;
  void notify(int localPeer) const;
  // Stores a signal or barrier word that a peer may sleep on; notify() next.
  // (std::atomic<uint64_t>& or std::atomic_ref<uint64_t>)
  template <class Word>
  void publish(Word&& word, uint64_t value) const;
  // The barrier among this host's ranks (every rank of the communicator on it).
  // What a rank runs when it reaches a barrier (4 bits of its barrier word).
  enum class BarrierKind : uint8_t {
    BarrierAll = 1,
    AllReduceEntry = 2,
    AllReduceExit = 3,
    AllGatherGemmEntry = 4,
    AllGatherGemmExit = 5,
    GemmReduceScatterEntry = 6,
    GemmReduceScatterExit = 7,
    MoeDispatchExit = static_cast<uint8_t>(KernelStage::MoeDispatchExit),
    MoeCombineEntry = static_cast<uint8_t>(KernelStage::MoeCombineEntry),
    MoeCombineExit = static_cast<uint8_t>(KernelStage::MoeCombineExit),
  };
  static const char* barrierName(BarrierKind kind);
  // Every rank at this barrier must be in the same kind of call with the same
  // fingerprint (a kernel's arguments; `count` names them), else VG-SYM-001.
  void localBarrier(const char* call, BarrierKind kind, uint64_t fingerprint, uint64_t count);
  // The halves of a barrier, for kernels that start on a peer's data as soon
  // as that peer arrives: arrive() announces this rank and returns the
  // barrier's number; awaitArrival() waits for the rank at local `index` and
  // checks that it runs the same (VG-SYM-001, `unwritten` saying what that
  // leaves unwritten).
  uint64_t arrive(BarrierKind kind, uint64_t fingerprint, uint64_t count);
  void awaitArrival(const char* call, uint64_t epoch, BarrierKind kind, uint64_t fingerprint, uint64_t count,
                    size_t index, const char* unwritten);
  bool runsOther(size_t index, uint64_t epoch, BarrierKind kind, uint64_t fingerprint) const;
  [[noreturn]] void raiseMismatch(const char* call, uint64_t epoch, BarrierKind kind, uint64_t count, size_t index,
                                  const char* unwritten) const;
  // A kernel's pieces: the rank publishes how many it has done since the
  // barrier `epoch`; a peer waits for a count of them.
  void publishProgress(uint64_t epoch, uint64_t pieces);
  void awaitProgress(const char* call, uint64_t epoch, size_t index, uint64_t pieces, const char* what);
  // Reduces `count` elements at offset `at` of every local rank's part, in
  // rank order (vigilAvg divided at the end), in cache-sized chunks, into
  // `out`, or into scratch_ when `out` is null; `sink` (if any) gets each
  // chunk with its byte offset and size as soon as it is reduced
  // (symm/allreduce.cpp).
  using ChunkSink = std::function<void(const uint8_t* chunk, size_t at, size_t bytes)>;
  void reduceParts(size_t at, size_t count, vigilDataType_t dtype, vigilRedOp_t op, void* out,
                   const ChunkSink& sink = {});
  uint8_t* part(int localIndex) const;  // local rank's part of the segment
  // Marks this rank as in a one-sided call (for its peers' wait messages) until destroyed.
  struct CallScope {
    CallScope(const SymmetricHeap& h, Call call, int peer, size_t offset, uint64_t value) : heap(h) {
      heap.begin(call, peer, offset, value);
    }
    ~CallScope() { heap.end(); }
    CallScope(const CallScope&) = delete;
    CallScope& operator=(const CallScope&) = delete;
    const SymmetricHeap& heap;
  };
  // Whether `peer` (checked: in range) runs on another host; then its copy is
  // reached over window_ (VG-SYM-004 naming the transport when there is none).
  bool remote(const char* call, int peer) const;
  [[noreturn]] void raiseRemote(const char* call, int peer, bool loadStore) const;
  void requireAllLocal(const char* call) const;
  // Waits until ready(); `lagging()` names the ranks still waited for.
  template <class Ready, class Lagging, class Describe>
  void waitFor(const char* call, Ready&& ready, Lagging&& lagging, Describe&& describe);
  std::string describeRank(int rank) const;
  std::string describeAllocation(const Allocation& a) const;
  void allgather(const void* mine, void* all, size_t bytes);

  Communicator* const comm_;
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
  // Ranks on other hosts: this rank's part registered for the transport's
  // one-sided access (UCX), every rank's attached; null when all ranks are
  // on this host or the transport has none.
  std::unique_ptr<RmaWindow> window_;
  int spin_ = 16;
  bool sleeperBarrier_ = false;  // see lightSignals() in heap.cpp
  bool lightStores_ = false;
  uint64_t waker_ = 0;
  uint64_t barrierEpoch_ = 0;
  uint64_t allocCalls_ = 0;
  std::map<size_t, size_t> free_;          // offset -> bytes (rounded)
  std::map<size_t, Allocation> live_;      // offset -> allocation
  std::vector<uint8_t> scratch_;           // kernels' chunk buffer
  mutable const Allocation* lastFound_ = nullptr;  // locate()'s last answer (cleared by free)
};

// A one-sided call scope (CallScope) for the MoE calls.
class SymmetricHeap::KernelScope {
 public:
  KernelScope(const SymmetricHeap& heap, bool combine, uint64_t number)
      : scope_(heap, combine ? Call::MoeCombine : Call::MoeDispatch, -1, 0, number) {}

 private:
  CallScope scope_;
};

}  // namespace vigil
