// The symmetric heap (symm/heap.hpp).
#include "symm/heap.hpp"

#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "comm/rma_window.hpp"
#include "core/config.hpp"
#include "core/strcat.hpp"
#include "transport/shm_layout.hpp"

namespace vigil {

namespace symm {

constexpr uint64_t kMagic = 0x5649474c53594d31ULL;  // "VIGLSYM1"
constexpr size_t kLine = shm::kLine;
constexpr size_t kPage = 4096;

struct alignas(kLine) Header {
  uint64_t magic;
  uint64_t nlocal;
  uint64_t heapBytes;
};

// What a rank is doing, for the others' timeout reports. Written by its
// owner only (relaxed: a report reads a snapshot, not a synchronisation).
struct alignas(kLine) Status {
  std::atomic<uint32_t> call{0};
  std::atomic<uint32_t> active{0};  // inside the call now
  std::atomic<int32_t> peer{-1};
  std::atomic<uint32_t> cmp{0};
  std::atomic<uint64_t> offset{0};
  std::atomic<uint64_t> value{0};
  std::atomic<uint64_t> calls{0};  // one-sided calls completed
};

// Per local rank: its doorbell, its barrier line, its status; each on its own line.
struct RankLines {
  shm::Doorbell bell;
  // (barrier number << 4) | kind, and what the rank runs at that barrier
  // (by the number's parity: a peer is at most one barrier ahead).
  alignas(kLine) std::atomic<uint64_t> barrier{0};
  std::atomic<uint64_t> fingerprint[2] = {0, 0};
  std::atomic<uint64_t> count[2] = {0, 0};
  // A kernel's progress: (barrier number of its entry << 20) | pieces done.
  std::atomic<uint64_t> progress{0};
  Status status;
};
static_assert(sizeof(RankLines) == 3 * kLine);

size_t roundUp(size_t v, size_t to) { return (v + to - 1) / to * to; }

}  // namespace symm

namespace {

using symm::RankLines;

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// A full fence. ThreadSanitizer does not model std::atomic_thread_fence (GCC
// rejects it under -fsanitize=thread), so its build takes a sequentially
// consistent read-modify-write instead, which it does model; on x86 the
// locked instruction is the fence the plain build emits.
inline void fullFence() {
#if defined(__SANITIZE_THREAD__)
  static std::atomic<uint32_t> order{0};
  order.fetch_add(1, std::memory_order_seq_cst);
#else
  std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
}

// Light signals. A signal or barrier store followed by the check for a
// sleeping peer is Dekker's pattern: it needs a store-load fence, and on x86
// a sequentially consistent store (xchg) stalls until the line arrives from
// the peer that spins on it, 0.15 µs of a 0.4 µs one-way latency here. The
// fence is moved to the side that is about to sleep (rare, and slow anyway):
// it calls membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), which runs a full
// fence on every CPU that runs a registered process, so either the sleeper
// sees the signal or the signaller sees the sleeper. A process whose
// registration failed stores with seq_cst as before; sleepers issue the
// membarrier whenever the kernel has it. ThreadSanitizer builds keep the
// seq_cst stores (it does not know membarrier).
struct LightSignals {
  bool sleeperBarrier = false;  // GLOBAL_EXPEDITED is there: sleepers call it
  bool lightStores = false;     // this process is registered: its stores may be release stores
};

const LightSignals& lightSignals() {
  static const LightSignals modes = [] {
    LightSignals m;
#if !defined(__SANITIZE_THREAD__)
    const long cmds = ::syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds > 0 && (cmds & MEMBARRIER_CMD_GLOBAL_EXPEDITED) != 0) {
      m.sleeperBarrier = true;
      m.lightStores = (cmds & MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) != 0 &&
                      ::syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
    }
#endif
    return m;
  }();
  return modes;
}

constexpr int kYields = 16;
constexpr int64_t kSleepCapNs = 100'000'000;  // a sleep re-checks the clock at least this often
// A rank with peers on this host and on others sleeps on the transport's
// events at most this long before it looks at its doorbell's signals.
constexpr int64_t kMixedSleepCapMs = 1;

const char* callName(uint32_t call) {
  switch (call) {
    case 1: return "vigilMemAlloc";
    case 2: return "vigilMemFree";
    case 3: return "vigilPut";
    case 4: return "vigilGet";
    case 5: return "vigilPutSignal";
    case 6: return "vigilSignalWaitUntil";
    case 7: return "vigilBarrierAll";
    case 8: return "vigilAllReduceSymmetric";
    case 9: return "vigilAllGatherGemm";
    case 10: return "vigilGemmReduceScatter";
    case 11: return "vigilMoeDispatch";
    case 12: return "vigilMoeCombine";
    case 13: return "vigilQuiet";
    default: return "no one-sided call";
  }
}

}  // namespace

const char* SymmetricHeap::barrierName(BarrierKind kind) {
  switch (kind) {
    case BarrierKind::BarrierAll: return "vigilBarrierAll";
    case BarrierKind::AllReduceEntry: return "vigilAllReduceSymmetric (its entry barrier)";
    case BarrierKind::AllReduceExit: return "vigilAllReduceSymmetric (its exit barrier)";
    case BarrierKind::AllGatherGemmEntry: return "vigilAllGatherGemm (its entry)";
    case BarrierKind::AllGatherGemmExit: return "vigilAllGatherGemm (its exit barrier)";
    case BarrierKind::GemmReduceScatterEntry: return "vigilGemmReduceScatter (its entry)";
    case BarrierKind::GemmReduceScatterExit: return "vigilGemmReduceScatter (its exit barrier)";
    case BarrierKind::MoeDispatchExit: return "vigilMoeDispatch on symmetric buffers (its exit barrier)";
    case BarrierKind::MoeCombineEntry: return "vigilMoeCombine on symmetric buffers (its entry barrier)";
    case BarrierKind::MoeCombineExit: return "vigilMoeCombine on symmetric buffers (its exit barrier)";
  }
  return "another call";
}

namespace {

const char* cmpText(CmpOp cmp) {
  switch (cmp) {
    case CmpOp::Eq: return "==";
    case CmpOp::Ne: return "!=";
    case CmpOp::Gt: return ">";
    case CmpOp::Ge: return ">=";
    case CmpOp::Lt: return "<";
    case CmpOp::Le: return "<=";
  }
  return "?";
}

bool compare(uint64_t have, CmpOp cmp, uint64_t want) {
  switch (cmp) {
    case CmpOp::Eq: return have == want;
    case CmpOp::Ne: return have != want;
    case CmpOp::Gt: return have > want;
    case CmpOp::Ge: return have >= want;
    case CmpOp::Lt: return have < want;
    case CmpOp::Le: return have <= want;
  }
  return false;
}

// What each rank contributes when the heap is set up.
struct SetupRecord {
  int32_t failed = 0;
  uint32_t pad = 0;
  uint64_t heapBytes = 0;
  char name[48] = {};
  char what[176] = {};
};

void setWhat(SetupRecord& r, const std::string& what) {
  r.failed = 1;
  std::snprintf(r.what, sizeof r.what, "%s", what.c_str());
}

std::atomic<uint64_t> segmentsMade{0};

}  // namespace

void SymmetricHeap::allgather(const void* mine, void* all, size_t bytes) {
  comm_->run(OpDesc{.kind = OpKind::AllGather, .send = mine, .recv = all, .count = bytes, .dtype = vigilUint8});
}

SymmetricHeap* SymmetricHeap::of(Communicator& comm, bool create) {
  if (Communicator::Extension* e = comm.extension()) return static_cast<SymmetricHeap*>(e);
  if (!create) return nullptr;
  return static_cast<SymmetricHeap*>(comm.installExtension([&] { return std::make_unique<SymmetricHeap>(comm); }));
}

SymmetricHeap::SymmetricHeap(Communicator& comm) : comm_(&comm), rank_(comm.rank()), nranks_(comm.nranks()) {
  const std::vector<PeerInfo>& peers = comm_->peerInfo();
  localIndex_.assign(static_cast<size_t>(nranks_), -1);
  for (int r = 0; r < nranks_; ++r) {
    if (peers[static_cast<size_t>(r)].hostId == peers[static_cast<size_t>(rank_)].hostId) {
      localIndex_[static_cast<size_t>(r)] = static_cast<int>(localRanks_.size());
      localRanks_.push_back(r);
    }
  }
  allLocal_ = static_cast<int>(localRanks_.size()) == nranks_;
  const int leader = localRanks_.front();
  const size_t nlocal = localRanks_.size();
  heapBytes_ = symm::roundUp(processConfig().symmetricHeapBytes, symm::kPage);
  heapsAt_ = symm::roundUp(sizeof(symm::Header) + nlocal * sizeof(RankLines), symm::kPage);
  segmentBytes_ = heapsAt_ + nlocal * heapBytes_;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  spin_ = nlocal <= cores ? 1000 : 16;
  sleeperBarrier_ = lightSignals().sleeperBarrier;
  lightStores_ = lightSignals().lightStores;

  std::vector<SetupRecord> all(static_cast<size_t>(nranks_));
  SetupRecord mine;
  mine.heapBytes = heapBytes_;
  std::string created;  // the name, while this rank must unlink it
  auto fail = [&](const std::string& what) { setWhat(mine, cat(what, ": ", std::strerror(errno))); };

  // 1. The host's lowest rank creates the segment and reserves its control lines.
  if (rank_ == leader) {
    std::snprintf(mine.name, sizeof mine.name, "/vigil-symm-%d-%llu", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(segmentsMade.fetch_add(1)));
    fd_ = ::shm_open(mine.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd_ < 0) {
      fail(cat("shm_open(", mine.name, ")"));
    } else {
      created = mine.name;
      if (::ftruncate(fd_, static_cast<off_t>(segmentBytes_)) != 0) {
        fail(cat("ftruncate to ", segmentBytes_, " bytes"));
      } else if (int e = ::posix_fallocate(fd_, 0, static_cast<off_t>(heapsAt_)); e != 0) {
        errno = e;
        fail(cat("reserving ", heapsAt_, " bytes of /dev/shm"));
      }
    }
  }
  auto undo = [&] {
    if (base_ != nullptr) ::munmap(base_, segmentBytes_);
    base_ = nullptr;
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
    if (!created.empty()) ::shm_unlink(created.c_str());
    created.clear();
  };
  auto raiseIfAnyFailed = [&](const char* stage) {
    for (int r = 0; r < nranks_; ++r) {
      const SetupRecord& rec = all[static_cast<size_t>(r)];
      if (rec.heapBytes != heapBytes_) {
        undo();
        comm_->error(Errc::SymMismatch)
            .op("vigilMemAlloc")
            .peer(r)
            .cause("this rank's symmetric heap part is ", heapBytes_, " bytes (VIGIL_SYMMETRIC_HEAP) and rank ", r,
                   "'s is ", rec.heapBytes)
            .raise();
      }
      if (rec.failed) {
        undo();
        comm_->error(Errc::SymShmFailed)
            .op("vigilMemAlloc")
            .peer(r)
            .cause("rank ", r, " could not ", stage, " the symmetric heap's shared segment (", rec.what,
                   "); nothing was allocated on any rank")
            .raise();
      }
    }
  };
  allgather(&mine, all.data(), sizeof(SetupRecord));
  raiseIfAnyFailed("create");

  // 2. Everyone maps its host's segment.
  if (rank_ != leader) {
    std::memcpy(mine.name, all[static_cast<size_t>(leader)].name, sizeof mine.name);
    fd_ = ::shm_open(mine.name, O_RDWR, 0600);
    if (fd_ < 0) fail(cat("shm_open(", mine.name, ")"));
  }
  if (fd_ >= 0) {
    void* p = ::mmap(nullptr, segmentBytes_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
    if (p == MAP_FAILED) {
      fail(cat("mmap of ", segmentBytes_, " bytes"));
    } else {
      base_ = static_cast<uint8_t*>(p);
      if (rank_ == leader) {
        auto* h = new (base_) symm::Header{symm::kMagic, nlocal, heapBytes_};
        lines_ = reinterpret_cast<RankLines*>(base_ + sizeof(symm::Header));
        for (size_t i = 0; i < nlocal; ++i) new (&lines_[i]) RankLines();
        (void)h;  // the allgather below publishes the lines to the other ranks
      }
    }
  }
  allgather(&mine, all.data(), sizeof(SetupRecord));  // also: the leader's lines are initialised
  // 3. Mapped everywhere (or failed): the name goes, the segment lives while mapped.
  if (!created.empty()) {
    ::shm_unlink(created.c_str());
    created.clear();
  }
  raiseIfAnyFailed("map");
  const auto* h = reinterpret_cast<const symm::Header*>(base_);
  if (h->magic != symm::kMagic || h->nlocal != nlocal || h->heapBytes != heapBytes_) {
    undo();
    comm_->error(Errc::Internal)
        .op("vigilMemAlloc")
        .cause("the symmetric heap's segment holds another layout (", h->nlocal, " ranks of ", h->heapBytes,
               " bytes) than this rank expects (", nlocal, " of ", heapBytes_, ")")
        .raise();
  }
  lines_ = reinterpret_cast<RankLines*>(base_ + sizeof(symm::Header));
  mine_ = base_ + heapsAt_ + static_cast<size_t>(localIndex_[static_cast<size_t>(rank_)]) * heapBytes_;
  free_.emplace(0, heapBytes_);
  RankLines* lines = lines_;
  const int me = localIndex_[static_cast<size_t>(rank_)];
  waker_ = comm_->addWaker([lines, me] { lines[me].bell.ring(); });
  // 4. Ranks on other hosts are reached over the transport's one-sided
  // access, when it has one: this rank's part, registered, and every
  // rank's key (collective, like everything here).
  if (!allLocal_ && comm_->hasRma()) {
    try {
      window_ = comm_->createWindow(mine_, heapBytes_);
    } catch (...) {
      comm_->removeWaker(waker_);
      undo();
      throw;
    }
  }
}

SymmetricHeap::~SymmetricHeap() {
  window_.reset();  // unregistered while still mapped
  comm_->removeWaker(waker_);
  if (base_ != nullptr) ::munmap(base_, segmentBytes_);
  if (fd_ >= 0) ::close(fd_);
}

// ---- Allocation ---------------------------------------------------------

void* SymmetricHeap::alloc(size_t bytes) {
  const uint64_t call = ++allocCalls_;
  begin(Call::Alloc, -1, 0, bytes);
  std::vector<uint64_t> sizes(static_cast<size_t>(nranks_));
  const uint64_t mine = bytes;
  allgather(&mine, sizes.data(), sizeof mine);
  for (int r = 0; r < nranks_; ++r) {
    if (sizes[static_cast<size_t>(r)] != bytes) {
      end();
      comm_->error(Errc::SymMismatch)
          .op("vigilMemAlloc")
          .peer(r)
          .cause("vigilMemAlloc call ", call, " asks for ", bytes, " bytes on this rank and ",
                 sizes[static_cast<size_t>(r)], " on rank ", r, "; every rank must pass the same size; nothing was allocated")
          .raise();
    }
  }
  if (bytes == 0) {
    end();
    return nullptr;
  }
  const size_t align = bytes < symm::kPage ? symm::kLine : symm::kPage;
  const size_t rounded = symm::roundUp(bytes, align);
  // First fit; every rank holds the same free list, so every rank picks the same offset.
  size_t at = SIZE_MAX;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    const size_t start = symm::roundUp(it->first, align);
    if (start - it->first + rounded <= it->second) {
      at = start;
      const size_t holeStart = it->first, holeEnd = it->first + it->second;
      free_.erase(it);
      if (start > holeStart) free_.emplace(holeStart, start - holeStart);
      if (start + rounded < holeEnd) free_.emplace(start + rounded, holeEnd - start - rounded);
      break;
    }
  }
  if (at == SIZE_MAX) {
    size_t used = 0, largest = 0;
    for (const auto& [off, a] : live_) used += a.bytes;
    for (const auto& [off, n] : free_) largest = std::max(largest, n);
    end();
    comm_->error(Errc::SymHeapExhausted)
        .op("vigilMemAlloc")
        .cause("vigilMemAlloc call ", call, " asks for ", bytes, " bytes; the symmetric heap holds ", heapBytes_,
               " bytes per rank (VIGIL_SYMMETRIC_HEAP), ", used, " in ", live_.size(),
               " live allocations, and its largest free range is ", largest, " bytes; nothing was allocated")
        .raise();
  }
  // Reserve this rank's pages now: a full /dev/shm is an error here on every rank, not a SIGBUS later.
  const off_t fileAt = static_cast<off_t>(static_cast<size_t>(mine_ - base_) + at);
  int32_t status = ::posix_fallocate(fd_, fileAt, static_cast<off_t>(rounded));
  std::vector<int32_t> statuses(static_cast<size_t>(nranks_));
  allgather(&status, statuses.data(), sizeof status);
  for (int r = 0; r < nranks_; ++r) {
    if (statuses[static_cast<size_t>(r)] != 0) {
      if (status == 0) ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, fileAt, static_cast<off_t>(rounded));
      // Give the range back, merging it with its free neighbours.
      auto [it, inserted] = free_.emplace(at, rounded);
      (void)inserted;
      if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
        it->second += next->second;
        free_.erase(next);
      }
      if (it != free_.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
          prev->second += it->second;
          free_.erase(it);
        }
      }
      end();
      comm_->error(Errc::SymShmFailed)
          .op("vigilMemAlloc")
          .peer(r)
          .cause("rank ", r, " could not reserve ", rounded, " bytes of /dev/shm for vigilMemAlloc call ", call, " (",
                 std::strerror(statuses[static_cast<size_t>(r)]), "); nothing was allocated on any rank")
          .raise();
    }
  }
  live_.emplace(at, Allocation{at, bytes, call});
  end();
  return mine_ + at;
}

void SymmetricHeap::free(void* ptr) {
  // Every rank says what it frees (an offset, kNull, or kNotOurs), then all decide alike.
  constexpr uint64_t kNull = UINT64_MAX, kNotOurs = UINT64_MAX - 1;
  uint64_t mine = kNull;
  if (ptr != nullptr) {
    const auto* p = static_cast<const uint8_t*>(ptr);
    const bool inside = p >= mine_ && p < mine_ + heapBytes_ && live_.contains(static_cast<size_t>(p - mine_));
    mine = inside ? static_cast<uint64_t>(p - mine_) : kNotOurs;
  }
  begin(Call::Free, -1, mine, 0);
  std::vector<uint64_t> all(static_cast<size_t>(nranks_));
  allgather(&mine, all.data(), sizeof mine);
  end();
  auto name = [&](uint64_t v) {
    if (v == kNull) return std::string("NULL");
    if (v == kNotOurs) return std::string("an address that is not a live symmetric allocation");
    return cat("allocation #", live_.at(v).id, " (offset ", v, ")");
  };
  if (mine == kNotOurs) {
    comm_->error(Errc::SymBadAddress)
        .op("vigilMemFree")
        .cause(ptr, " is not the start of a live symmetric allocation of this communicator; nothing was freed")
        .raise();
  }
  for (int r = 0; r < nranks_; ++r) {
    const uint64_t theirs = all[static_cast<size_t>(r)];
    if (theirs == mine) continue;
    comm_->error(Errc::SymMismatch)
        .op("vigilMemFree")
        .peer(r)
        .cause("this rank frees ", name(mine), " and rank ", r, " frees ",
               theirs == kNotOurs || theirs == kNull || !live_.contains(theirs) ? std::string(theirs == kNull ? "NULL" : "something else")
                                                                                  : name(theirs),
               "; every rank must free the same allocation; nothing was freed")
        .raise();
  }
  if (mine == kNull) return;
  const size_t at = static_cast<size_t>(mine);
  const Allocation a = live_.at(at);
  lastFound_ = nullptr;
  live_.erase(at);
  const size_t align = a.bytes < symm::kPage ? symm::kLine : symm::kPage;
  const size_t rounded = symm::roundUp(a.bytes, align);
  // The pages go back to the system and read as zero when allocated again.
  // Sub-page allocations share pages: only whole free pages are punched, the rest is zeroed.
  auto [it, inserted] = free_.emplace(at, rounded);
  (void)inserted;
  if (auto next = std::next(it); next != free_.end() && it->first + it->second == next->first) {
    it->second += next->second;
    free_.erase(next);
  }
  if (it != free_.begin()) {
    auto prev = std::prev(it);
    if (prev->first + prev->second == it->first) {
      prev->second += it->second;
      free_.erase(it);
      it = prev;
    }
  }
  std::memset(mine_ + at, 0, rounded);
  const size_t pageStart = symm::roundUp(it->first, symm::kPage);
  const size_t pageEnd = (it->first + it->second) / symm::kPage * symm::kPage;
  if (pageEnd > pageStart) {
    ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                static_cast<off_t>(static_cast<size_t>(mine_ - base_) + pageStart),
                static_cast<off_t>(pageEnd - pageStart));
  }
}

// ---- Addresses ----------------------------------------------------------

const SymmetricHeap::Allocation& SymmetricHeap::locate(const char* call, const void* p, size_t bytes,
                                                       const char* what) const {
  const auto* q = static_cast<const uint8_t*>(p);
  if (const Allocation* a = lastFound_) {  // calls mostly repeat their allocations
    const size_t off = static_cast<size_t>(q - mine_);
    if (q >= mine_ && off >= a->offset && off < a->offset + a->bytes && bytes <= a->offset + a->bytes - off) return *a;
  }
  if (q == nullptr) {
    comm_->error(Errc::ApiNullArgument).op(call).cause(what, " is NULL").raise();
  }
  const bool inHeap = q >= mine_ && q < mine_ + heapBytes_;
  auto it = inHeap ? live_.upper_bound(static_cast<size_t>(q - mine_)) : live_.begin();
  if (!inHeap || it == live_.begin() ||
      static_cast<size_t>(q - mine_) >= std::prev(it)->second.offset + std::prev(it)->second.bytes) {
    comm_->error(Errc::SymBadAddress)
        .op(call)
        .cause(what, " ", p, " is not inside a live symmetric allocation of this rank (vigilMemAlloc on this communicator",
               inHeap ? "; it lies in a freed or unallocated range of the heap" : "", "); nothing was transferred")
        .raise();
  }
  const Allocation& a = std::prev(it)->second;
  lastFound_ = &a;
  const size_t offset = static_cast<size_t>(q - mine_) - a.offset;
  if (bytes > a.bytes - offset) {
    comm_->error(Errc::SymBadAddress)
        .op(call)
        .cause(what, " covers bytes [", offset, ", ", offset + bytes, ") of ", describeAllocation(a), ": ",
               offset + bytes - a.bytes, " bytes past its end; nothing was transferred")
        .raise();
  }
  return a;
}

std::optional<SymmetricHeap::Place> SymmetricHeap::placeOf(const void* p, size_t bytes) const {
  const auto* q = static_cast<const uint8_t*>(p);
  if (q == nullptr || q < mine_ || q >= mine_ + heapBytes_) return std::nullopt;
  const auto offset = static_cast<size_t>(q - mine_);
  auto it = live_.upper_bound(offset);
  if (it == live_.begin()) return std::nullopt;
  const Allocation& a = std::prev(it)->second;
  const size_t end = a.offset + a.bytes;
  if (offset >= end || bytes > end - offset) return std::nullopt;
  return Place{offset, end - offset};
}

std::string SymmetricHeap::describeAllocation(const Allocation& a) const {
  return cat("symmetric allocation #", a.id, " (", a.bytes, " bytes at heap offset ", a.offset, ")");
}

uint8_t* SymmetricHeap::partOf(const char* call, int peer) const {
  if (peer < 0 || peer >= nranks_) {
    comm_->error(Errc::ApiBadPeer).op(call).cause("peer ", peer, " is not in [0, ", nranks_, ")").raise();
  }
  const int li = localIndex_[static_cast<size_t>(peer)];
  if (li < 0) raiseRemote(call, peer, /*loadStore=*/true);
  return base_ + heapsAt_ + static_cast<size_t>(li) * heapBytes_;
}

bool SymmetricHeap::remote(const char* call, int peer) const {
  if (peer < 0 || peer >= nranks_) {
    comm_->error(Errc::ApiBadPeer).op(call).cause("peer ", peer, " is not in [0, ", nranks_, ")").raise();
  }
  if (localIndex_[static_cast<size_t>(peer)] >= 0) return false;
  if (window_ == nullptr) raiseRemote(call, peer, /*loadStore=*/false);
  return true;
}

void SymmetricHeap::raiseRemote(const char* call, int peer, bool loadStore) const {
  const PeerInfo& info = comm_->peerInfo()[static_cast<size_t>(peer)];
  const PeerInfo& mine = comm_->peerInfo()[static_cast<size_t>(rank_)];
  // Containers and network namespaces share a hostname: then the host ids tell them apart.
  const bool sameName = info.hostname == mine.hostname;
  std::string why;
  if (loadStore) {
    why = window_ != nullptr ? "; there is no load/store path to it (vigilPut, vigilGet and vigilPutSignal reach it)"
                             : std::string();
  } else {
    why = cat(", and this communicator's transport, ", comm_->transportName(),
              ", has no one-sided access to reach it (VIGIL_TRANSPORT=ucx has)");
  }
  comm_->error(Errc::SymRemotePeer)
      .op(call)
      .peer(peer)
      .cause("rank ", peer, " runs on another host, '", info.hostname,
             sameName ? cat("' (host id ", info.hostId, ")") : std::string("'"), ", not on this rank's host '",
             mine.hostname, sameName ? cat("' (host id ", mine.hostId, ")") : std::string("'"),
             ": its copy of the symmetric heap is not in this host's memory", why)
      .raise();
}

void* SymmetricHeap::peerPtr(const void* ptr, int peer) const {
  const Allocation& a = locate("vigilMemPeerPtr", ptr, 0, "ptr");
  (void)a;
  return partOf("vigilMemPeerPtr", peer) + (static_cast<const uint8_t*>(ptr) - mine_);
}

// ---- One-sided operations -----------------------------------------------

void SymmetricHeap::begin(Call call, int peer, size_t offset, uint64_t value) const {
  symm::Status& s = lines_[localIndex_[static_cast<size_t>(rank_)]].status;
  s.call.store(static_cast<uint32_t>(call), std::memory_order_relaxed);
  s.peer.store(peer, std::memory_order_relaxed);
  s.offset.store(offset, std::memory_order_relaxed);
  s.value.store(value, std::memory_order_relaxed);
  s.active.store(1, std::memory_order_relaxed);
}

void SymmetricHeap::end() const {
  symm::Status& s = lines_[localIndex_[static_cast<size_t>(rank_)]].status;
  s.active.store(0, std::memory_order_relaxed);
  s.calls.store(s.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

template <class Word>
void SymmetricHeap::publish(Word&& word, uint64_t value) const {
  if (lightStores_) {
    word.store(value, std::memory_order_release);
    asm volatile("" ::: "memory");  // the caller's notify() loads after it, in program order
  } else {
    word.store(value, std::memory_order_seq_cst);
  }
}

void SymmetricHeap::notify(int localPeer) const {
  // The caller's store (publish) precedes this load; a waiter raises
  // `sleepers` and fences both sides (see waitFor) before its last look, so
  // one of the two sees the other.
  shm::Doorbell& bell = lines_[localPeer].bell;
  if (bell.sleepers.load(std::memory_order_seq_cst) != 0) bell.ring();
}

void SymmetricHeap::put(void* dest, const void* source, size_t bytes, int peer) {
  constexpr const char* kCall = "vigilPut";
  locate(kCall, dest, bytes, "dest");
  const bool far = remote(kCall, peer);
  const size_t offset = static_cast<size_t>(static_cast<uint8_t*>(dest) - mine_);
  if (bytes > 0 && source == nullptr) comm_->error(Errc::ApiNullArgument).op(kCall).cause("source is NULL").raise();
  const CallScope scope(*this, Call::Put, peer, offset, bytes);
  if (far) {
    // Returns when `source` may be reused; the data is at the target by this
    // rank's next vigilQuiet or vigilBarrierAll.
    if (bytes > 0) window_->put(peer, offset, source, bytes);
    window_->complete(kCall);
  } else if (bytes > 0) {
    std::memcpy(partOf(kCall, peer) + offset, source, bytes);
  }
}

void SymmetricHeap::get(void* dest, const void* source, size_t bytes, int peer) {
  constexpr const char* kCall = "vigilGet";
  locate(kCall, source, bytes, "source");
  const bool far = remote(kCall, peer);
  const size_t offset = static_cast<size_t>(static_cast<const uint8_t*>(source) - mine_);
  if (bytes > 0 && dest == nullptr) comm_->error(Errc::ApiNullArgument).op(kCall).cause("dest is NULL").raise();
  const CallScope scope(*this, Call::Get, peer, offset, bytes);
  if (far) {
    if (bytes > 0) window_->get(peer, offset, dest, bytes);
    window_->complete(kCall);  // the data is here
  } else if (bytes > 0) {
    std::memcpy(dest, partOf(kCall, peer) + offset, bytes);
  }
}

void SymmetricHeap::putSignal(void* dest, const void* source, size_t bytes, uint64_t* signal, uint64_t value,
                              SignalOp op, int peer) {
  constexpr const char* kCall = "vigilPutSignal";
  if (op != SignalOp::Set && op != SignalOp::Add) {
    comm_->error(Errc::SymBadOp).op(kCall).cause("sigOp ", static_cast<int>(op), " is not vigilSignalSet (0) or vigilSignalAdd (1)").raise();
  }
  if (bytes > 0) locate(kCall, dest, bytes, "dest");
  locate(kCall, signal, sizeof(uint64_t), "signal");
  if (reinterpret_cast<uintptr_t>(signal) % alignof(uint64_t) != 0) {
    comm_->error(Errc::SymBadAddress).op(kCall).cause("signal ", static_cast<void*>(signal), " is not 8-byte aligned").raise();
  }
  const bool far = remote(kCall, peer);
  if (bytes > 0 && source == nullptr) comm_->error(Errc::ApiNullArgument).op(kCall).cause("source is NULL").raise();
  const size_t sigOffset = static_cast<size_t>(reinterpret_cast<uint8_t*>(signal) - mine_);
  const CallScope scope(*this, Call::PutSignal, peer, sigOffset, value);
  if (far) {
    // The data, then (ordered after it by the fence) the signal: a put, or a
    // remote atomic add. Returns when `source` may be reused; whoever sees
    // the signal sees the data.
    if (bytes > 0) window_->put(peer, static_cast<size_t>(static_cast<uint8_t*>(dest) - mine_), source, bytes);
    window_->fence();
    window_->signal(peer, sigOffset, value, op == SignalOp::Add);
    window_->complete(kCall);
    return;
  }
  uint8_t* part = partOf(kCall, peer);
  if (bytes > 0) std::memcpy(part + (static_cast<uint8_t*>(dest) - mine_), source, bytes);
  std::atomic_ref<uint64_t> sig(*reinterpret_cast<uint64_t*>(part + sigOffset));
  if (op == SignalOp::Set) {
    publish(sig, value);
  } else {
    sig.fetch_add(value, std::memory_order_seq_cst);
  }
  notify(localIndex_[static_cast<size_t>(peer)]);
}

void SymmetricHeap::fence() {
  // Puts inside a host are complete when they return; this orders this
  // thread's stores for the other ranks' loads all the same.
  fullFence();
  if (window_ != nullptr) window_->fence();  // and those to other hosts
}

void SymmetricHeap::quiet() {
  fullFence();
  if (window_ != nullptr) {
    const CallScope scope(*this, Call::Quiet, -1, 0, 0);
    window_->flush("vigilQuiet");  // every put to another host is at its target
  }
}

template <class Ready, class Lagging, class Describe>
void SymmetricHeap::waitFor(const char* call, Ready&& ready, Lagging&& lagging, Describe&& describe) {
  // Ranks on other hosts put into this rank's part through the transport,
  // which (UCX over TCP) writes only while this rank progresses it.
  RmaWindow* const window = window_.get();
  for (int i = 0; i < spin_; ++i) {
    if (ready()) return;
    if (window != nullptr) window->progress(0);
    cpuRelax();
  }
  for (int i = 0; i < kYields; ++i) {
    if (ready()) return;
    if (window != nullptr) window->progress(0);
    sched_yield();
  }
  const CommConfig& config = comm_->config();
  const Clock::time_point start = Clock::now();
  const Deadline deadline(start + std::chrono::milliseconds(config.timeoutMs));
  shm::Doorbell& bell = lines_[localIndex_[static_cast<size_t>(rank_)]].bell;
  struct Sleeper {
    shm::Doorbell& bell;
    ~Sleeper() { bell.sleepers.fetch_sub(1, std::memory_order_seq_cst); }
  };
  while (true) {
    const uint32_t armed = bell.seq.load(std::memory_order_seq_cst);
    bell.sleepers.fetch_add(1, std::memory_order_seq_cst);
    Sleeper sleeper{bell};
    // Then ready()'s load: a notifier sees us or we see it (lightSignals()).
    if (sleeperBarrier_) {
      ::syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
    } else {
      fullFence();
    }
    if (ready()) return;
    pollfd pfds[2] = {{comm_->stopFd(), POLLIN, 0}, {comm_->peerEventFd(), POLLIN, 0}};
    ::poll(pfds, 2, 0);
    if (pfds[0].revents & POLLIN) {
      if (ready()) return;
      throw comm_->stoppedError(call);
    }
    if (pfds[1].revents & POLLIN) comm_->clearPeerEvents();
    for (int r : lagging()) {
      if (r != rank_ && !comm_->peerIsAlive(r)) {
        if (ready()) return;  // what it did before it went counts
        throw comm_->peerLostError(r, call);
      }
    }
    if (deadline.expired()) {
      std::vector<int> waited = lagging();
      ErrorBuilder b = comm_->error(Errc::SymWaitTimeout);
      b.op(call);
      if (waited.size() == 1) b.peer(waited.front());
      std::string who;
      for (int r : waited) who += cat(who.empty() ? "" : "; ", describeRank(r));
      b.cause("waited ", config.timeoutMs, " ms (", config.timeoutSource, ") ", describe(), ". ",
              who.empty() ? std::string("No rank was named as the one to signal") : who)
          .raise();
    }
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(deadline.at() - Clock::now()).count();
    const int64_t ns = std::clamp<int64_t>(left, 0, kSleepCapNs);
    if (window != nullptr) {
      // Asleep on the transport's events (a peer's put or signal over the
      // fabric wakes it), the stop and the peer-change fds; a rank of this
      // host rings the doorbell instead, which this sleep cannot watch, so
      // it looks again after a short one.
      const int64_t capMs = localRanks_.size() > 1 ? kMixedSleepCapMs : ns / 1000000;
      if (window->progress(static_cast<int>(std::clamp<int64_t>(ns / 1000000, 1, std::max<int64_t>(capMs, 1))))) {
        continue;
      }
      // Another thread runs an operation (and progresses the transport):
      // the doorbell below, briefly.
    }
    const int64_t sleepNs = window != nullptr ? std::min<int64_t>(ns, kMixedSleepCapMs * 1000000) : ns;
    timespec ts{static_cast<time_t>(sleepNs / 1000000000), static_cast<long>(sleepNs % 1000000000)};
    if (bell.seq.load(std::memory_order_seq_cst) == armed) {
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&bell.seq), FUTEX_WAIT, armed, &ts, nullptr, 0);
    }
  }
}

std::string SymmetricHeap::describeRank(int r) const {
  const PeerInfo& info = comm_->peerInfo()[static_cast<size_t>(r)];
  std::string who = cat("rank ", r, " (pid ", info.pid, " on ", info.hostname, ")");
  const int li = localIndex_[static_cast<size_t>(r)];
  if (li < 0) return cat(who, " runs on another host");
  const symm::Status& s = lines_[li].status;
  const uint32_t call = s.call.load(std::memory_order_relaxed);
  const bool active = s.active.load(std::memory_order_relaxed) != 0;
  const uint64_t calls = s.calls.load(std::memory_order_relaxed);
  const int peer = s.peer.load(std::memory_order_relaxed);
  const uint64_t offset = s.offset.load(std::memory_order_relaxed);
  const uint64_t value = s.value.load(std::memory_order_relaxed);
  std::string what;
  switch (static_cast<Call>(call)) {
    case Call::Put:
    case Call::Get: what = cat(callName(call), " with rank ", peer, " at heap offset ", offset, " (", value, " bytes)"); break;
    case Call::PutSignal: what = cat(callName(call), " to rank ", peer, ", signal at heap offset ", offset, ", value ", value); break;
    case Call::Wait:
      what = cat(callName(call), " on its signal at heap offset ", offset, " for ",
                 cmpText(static_cast<CmpOp>(s.cmp.load(std::memory_order_relaxed))), " ", value,
                 peer >= 0 ? cat(" from rank ", peer) : std::string());
      break;
    case Call::Barrier: what = cat(callName(call), " number ", value); break;
    case Call::Alloc: what = cat(callName(call), " of ", value, " bytes"); break;
    case Call::Free:
    case Call::Quiet: what = callName(call); break;
    case Call::AllReduce: what = cat(callName(call), " of ", value, " elements"); break;
    case Call::AllGatherGemm:
    case Call::GemmReduceScatter: what = cat(callName(call), " of ", value, " rows per rank"); break;
    case Call::MoeDispatch:
    case Call::MoeCombine: what = cat(callName(call), " on symmetric buffers (dispatch number ", value, ")"); break;
    case Call::None: break;
  }
  if (what.empty()) return cat(who, " has made no one-sided call on this heap");
  return active ? cat(who, " is in ", what, " (after ", calls, " completed one-sided calls)")
                : cat(who, " is in no one-sided call; its last one (number ", calls, ") was ", what);
}

uint64_t SymmetricHeap::waitUntil(uint64_t* signal, CmpOp cmp, uint64_t value, int fromPeer) {
  constexpr const char* kCall = "vigilSignalWaitUntil";
  if (static_cast<int>(cmp) < 0 || static_cast<int>(cmp) > 5) {
    comm_->error(Errc::SymBadOp).op(kCall).cause("cmp ", static_cast<int>(cmp), " is not a vigilCmpOp_t (0 to 5)").raise();
  }
  const Allocation& a = locate(kCall, signal, sizeof(uint64_t), "signal");
  if (reinterpret_cast<uintptr_t>(signal) % alignof(uint64_t) != 0) {
    comm_->error(Errc::SymBadAddress).op(kCall).cause("signal ", static_cast<void*>(signal), " is not 8-byte aligned").raise();
  }
  if (fromPeer < -1 || fromPeer >= nranks_) {
    comm_->error(Errc::ApiBadPeer).op(kCall).cause("fromPeer ", fromPeer, " is neither -1 (any rank) nor in [0, ", nranks_, ")").raise();
  }
  const size_t offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(signal) - mine_);
  begin(Call::Wait, fromPeer, offset, value);
  lines_[localIndex_[static_cast<size_t>(rank_)]].status.cmp.store(static_cast<uint32_t>(cmp), std::memory_order_relaxed);
  std::atomic_ref<uint64_t> sig(*signal);
  uint64_t seen = 0;
  auto ready = [&] {
    seen = sig.load(std::memory_order_acquire);
    return compare(seen, cmp, value);
  };
  std::vector<int> expected;
  if (fromPeer >= 0) {
    expected.push_back(fromPeer);
  } else {
    for (int r = 0; r < nranks_; ++r) {
      if (r != rank_) expected.push_back(r);
    }
  }
  try {
    waitFor(
        kCall, ready, [&] { return fromPeer >= 0 ? expected : std::vector<int>(expected); },
        [&] {
          return cat("for the signal at byte ", offset - a.offset, " of ", describeAllocation(a), " to become ",
                     cmpText(cmp), " ", value, "; it holds ", seen,
                     fromPeer >= 0 ? cat("; the rank expected to signal is ", fromPeer) : std::string());
        });
  } catch (...) {
    end();
    throw;
  }
  end();
  return seen;
}

void SymmetricHeap::barrierAll() {
  constexpr const char* kCall = "vigilBarrierAll";
  begin(Call::Barrier, -1, 0, barrierEpoch_ + 1);
  try {
    if (allLocal_) {
      localBarrier(kCall, BarrierKind::BarrierAll, 0, 0);
    } else {
      // Ranks on several hosts: this rank's puts to other hosts reach their
      // targets, then the communicator's barrier over its own transport,
      // whose waits progress the one-sided accesses of the others' flushes.
      ++barrierEpoch_;
      if (window_ != nullptr) window_->flush(kCall);
      comm_->run(OpDesc{.kind = OpKind::Barrier, .flat = true});
    }
  } catch (...) {
    end();
    throw;
  }
  end();
}

// A barrier word is (barrier number << 4) | the kind of call, and beside it
// the call's fingerprint (a kernel's arguments): a rank that reaches barrier e
// in another call, or with other arguments, is a mismatch that both see.
uint64_t SymmetricHeap::arrive(BarrierKind kind, uint64_t fingerprint, uint64_t count) {
  const uint64_t epoch = ++barrierEpoch_;
  RankLines& mine = lines_[localIndex_[static_cast<size_t>(rank_)]];
  mine.fingerprint[epoch & 1].store(fingerprint, std::memory_order_relaxed);
  mine.count[epoch & 1].store(count, std::memory_order_relaxed);
  publish(mine.barrier, epoch << 4 | static_cast<uint64_t>(kind));
  const int me = localIndex_[static_cast<size_t>(rank_)];
  for (size_t i = 0; i < localRanks_.size(); ++i) {
    if (static_cast<int>(i) != me) notify(static_cast<int>(i));
  }
  return epoch;
}

bool SymmetricHeap::runsOther(size_t index, uint64_t epoch, BarrierKind kind, uint64_t fingerprint) const {
  const uint64_t w = lines_[index].barrier.load(std::memory_order_acquire);
  return ((w >> 4) == epoch && (w & 15) != static_cast<uint64_t>(kind)) ||
         lines_[index].fingerprint[epoch & 1].load(std::memory_order_relaxed) != fingerprint;
}

void SymmetricHeap::raiseMismatch(const char* call, uint64_t epoch, BarrierKind kind, uint64_t count, size_t index,
                                  const char* unwritten) const {
  const int r = localRanks_[index];
  const uint64_t w = lines_[index].barrier.load(std::memory_order_acquire);
  const bool sameCall = (w >> 4) > epoch || (w & 15) == static_cast<uint64_t>(kind);
  ErrorBuilder b = comm_->error(Errc::SymMismatch);
  b.op(call).peer(r);
  if (sameCall && kind >= BarrierKind::MoeDispatchExit) {
    b.cause("this rank runs ", call, " number ", count, " on symmetric buffers and rank ", r, " runs number ",
            lines_[index].count[epoch & 1].load(std::memory_order_relaxed), " (or with another config); ", unwritten);
  } else if (sameCall) {
    const char* unit = kind == BarrierKind::AllReduceEntry || kind == BarrierKind::AllReduceExit
                           ? " elements"
                           : " rows per rank";
    b.cause("this rank runs ", call, " of ", count, unit, " and rank ", r, " runs it with other arguments (",
            lines_[index].count[epoch & 1].load(std::memory_order_relaxed), unit,
            ", or another data type, reduction or shape); ", unwritten);
  } else {
    b.cause("this rank reached barrier number ", epoch, " in ", call, " and rank ", r, " reached it in ",
            barrierName(static_cast<BarrierKind>((w >> 4) == epoch ? (w & 15) : 0)),
            "; every rank must make the same sequence of collective symmetric calls");
  }
  b.raise();
}

void SymmetricHeap::awaitArrival(const char* call, uint64_t epoch, BarrierKind kind, uint64_t fingerprint,
                                 uint64_t count, size_t index, const char* unwritten) {
  auto ready = [&] { return (lines_[index].barrier.load(std::memory_order_acquire) >> 4) >= epoch; };
  auto lagging = [&] { return std::vector<int>{localRanks_[index]}; };
  waitFor(call, ready, lagging, [&] { return cat("for rank ", localRanks_[index], " to enter ", call); });
  if (runsOther(index, epoch, kind, fingerprint)) raiseMismatch(call, epoch, kind, count, index, unwritten);
}

void SymmetricHeap::awaitProgress(const char* call, uint64_t epoch, size_t index, uint64_t pieces,
                                  const char* what) {
  const uint64_t target = epoch << 20 | pieces;
  auto ready = [&] { return lines_[index].progress.load(std::memory_order_acquire) >= target; };
  auto lagging = [&] { return std::vector<int>{localRanks_[index]}; };
  waitFor(call, ready, lagging, [&] { return cat("for rank ", localRanks_[index], " to finish ", what); });
}

void SymmetricHeap::publishProgress(uint64_t epoch, uint64_t pieces) {
  const int me = localIndex_[static_cast<size_t>(rank_)];
  publish(lines_[me].progress, epoch << 20 | pieces);
  for (size_t i = 0; i < localRanks_.size(); ++i) {
    if (static_cast<int>(i) != me) notify(static_cast<int>(i));
  }
}

void SymmetricHeap::localBarrier(const char* call, BarrierKind kind, uint64_t fingerprint, uint64_t count) {
  const uint64_t epoch = arrive(kind, fingerprint, count);
  size_t next = 0;  // ranks before it have arrived
  int other = -1;   // a local index at this barrier in another call
  auto ready = [&] {
    while (next < localRanks_.size()) {
      if ((lines_[next].barrier.load(std::memory_order_acquire) >> 4) < epoch) return false;
      if (other < 0 && runsOther(next, epoch, kind, fingerprint)) other = static_cast<int>(next);
      ++next;
    }
    return true;
  };
  auto lagging = [&] {
    std::vector<int> late;
    for (size_t i = 0; i < localRanks_.size(); ++i) {
      if ((lines_[i].barrier.load(std::memory_order_acquire) >> 4) < epoch) late.push_back(localRanks_[i]);
    }
    return late;
  };
  waitFor(call, ready, lagging, [&] { return cat("for every rank to reach barrier number ", epoch); });
  if (other >= 0) raiseMismatch(call, epoch, kind, count, static_cast<size_t>(other), "nothing was written");
}

void SymmetricHeap::requireAllLocal(const char* call) const {
  if (allLocal_) return;
  for (int r = 0; r < nranks_; ++r) {
    if (localIndex_[static_cast<size_t>(r)] < 0) (void)partOf(call, r);  // raises VG-SYM-004 naming it
  }
}

}  // namespace vigil
