#pragma once
// The shared-memory segment of a communicator whose ranks share a host, and
// the primitives on it: a doorbell per rank (an event count over a futex),
// a byte ring per ordered pair of ranks (single producer, single consumer)
// and a staging area per rank with a step counter, which the shared-memory
// algorithms read directly.
//
// Every field another rank writes is an atomic on its own cache line; data
// is published with a release store of a counter and read after an acquire
// load of it. Nothing here blocks except Doorbell::sleep, and that only up
// to a timeout: the caller decides how long it may wait.

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "transport/frame.hpp"

namespace vigil::shm {

constexpr size_t kLine = 64;
constexpr uint64_t kSegmentMagic = 0x5649474c53484d31ULL;  // "VIGLSHM1"
// One pipeline chunk per staging buffer: it stays in the caches while it is
// reduced. The size up to 16 ranks (more ranks get smaller buffers); tests
// size messages around it.
constexpr size_t kStagingBytes = 512u << 10;

// An event count: waiters read seq, re-check their condition, then sleep on
// seq unless it moved. Notifiers move seq after publishing and make the
// futex call only when someone sleeps, so the fast path has no syscall.
struct alignas(kLine) Doorbell {
  std::atomic<uint32_t> seq{0};
  std::atomic<uint32_t> sleepers{0};

  uint32_t arm() const { return seq.load(std::memory_order_seq_cst); }
  // Sleeps until rung or `timeoutNs` passed (or a spurious wake-up).
  void sleep(uint32_t armed, int64_t timeoutNs) {
    sleepers.fetch_add(1, std::memory_order_seq_cst);
    if (seq.load(std::memory_order_seq_cst) == armed) {
      timespec ts{static_cast<time_t>(timeoutNs / 1000000000), static_cast<long>(timeoutNs % 1000000000)};
      // Shared futex (no FUTEX_PRIVATE_FLAG): the word lives in memory that
      // several processes map, at different addresses.
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAIT, armed, &ts, nullptr, 0);
    }
    sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
  void ring() {
    seq.fetch_add(1, std::memory_order_seq_cst);
    if (sleepers.load(std::memory_order_seq_cst) != 0) {
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(&seq), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
    }
  }
};
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// A byte stream from one rank to another, like a socket without syscalls.
// Capacity is a power of two; head and tail count bytes ever written/read.
struct RingControl {
  alignas(kLine) std::atomic<uint64_t> head{0};  // written by the producer
  alignas(kLine) std::atomic<uint64_t> tail{0};  // written by the consumer
};

class Ring {
 public:
  Ring() = default;
  Ring(RingControl* control, uint8_t* data, size_t capacity) : c_(control), data_(data), mask_(capacity - 1) {}

  // Copies up to `len` bytes in; returns how many fitted.
  size_t write(const void* src, size_t len) {
    const uint64_t head = c_->head.load(std::memory_order_relaxed);
    const uint64_t tail = c_->tail.load(std::memory_order_acquire);
    const size_t n = std::min<size_t>(len, mask_ + 1 - (head - tail));
    if (n == 0) return 0;
    copyIn(head, static_cast<const uint8_t*>(src), n);
    c_->head.store(head + n, std::memory_order_release);
    return n;
  }
  // Copies `len` bytes out without consuming them; false when fewer are there.
  bool peek(void* dst, size_t len) const {
    const uint64_t tail = c_->tail.load(std::memory_order_relaxed);
    const uint64_t head = c_->head.load(std::memory_order_acquire);
    if (head - tail < len) return false;
    copyOut(tail, static_cast<uint8_t*>(dst), len);
    return true;
  }
  // Copies up to `len` bytes out; returns how many there were.
  size_t read(void* dst, size_t len) {
    const uint64_t tail = c_->tail.load(std::memory_order_relaxed);
    const uint64_t head = c_->head.load(std::memory_order_acquire);
    const size_t n = std::min<size_t>(len, head - tail);
    if (n == 0) return 0;
    copyOut(tail, static_cast<uint8_t*>(dst), n);
    c_->tail.store(tail + n, std::memory_order_release);
    return n;
  }

 private:
  void copyIn(uint64_t pos, const uint8_t* src, size_t n) {
    const size_t at = pos & mask_, first = std::min(n, mask_ + 1 - at);
    std::memcpy(data_ + at, src, first);
    if (first < n) std::memcpy(data_, src + first, n - first);
  }
  void copyOut(uint64_t pos, uint8_t* dst, size_t n) const {
    const size_t at = pos & mask_, first = std::min(n, mask_ + 1 - at);
    std::memcpy(dst, data_ + at, first);
    if (first < n) std::memcpy(dst + first, data_, n - first);
  }

  RingControl* c_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t mask_ = 0;
};

// Messages up to this size travel inside the step line itself: the reader
// gets flag, fingerprint digest and data in one cache-line transfer.
constexpr size_t kInlineBytes = 16;

// What a rank publishes for the shared-memory algorithms: a step counter
// that only grows; the digest and the full fingerprint of its two most
// recent collectives (by seq parity: a peer may start the next op before
// this one read the previous fingerprint); and two inline data slots, used
// like the two staging buffers.
struct alignas(kLine) StepLine {
  std::atomic<uint64_t> step{0};
  uint64_t digest[2] = {0, 0};
  uint8_t inlineData[2][kInlineBytes] = {};
  alignas(kLine) FrameHeader fingerprint[2];
};
static_assert(offsetof(StepLine, fingerprint) == kLine, "step, digests and inline data share one cache line");

struct SegmentHeader {
  uint64_t magic;
  uint32_t nranks;
  uint32_t reserved;
  uint64_t ringBytes;
  uint64_t stagingBytes;
};

// Where everything lives in a segment of `n` ranks. Computed identically by
// every rank from (n, ringBytes, stagingBytes), which the creator also
// writes into the header for the others to check.
struct Geometry {
  int n = 0;
  size_t ringBytes = 0;     // per ordered pair, power of two
  size_t stagingBytes = 0;  // per rank and per buffer (two buffers)

  static size_t roundUp(size_t v, size_t a) { return (v + a - 1) / a * a; }
  size_t bellsAt() const { return roundUp(sizeof(SegmentHeader), kLine); }
  size_t stepsAt() const { return bellsAt() + static_cast<size_t>(n) * sizeof(Doorbell); }
  size_t ringControlsAt() const { return stepsAt() + static_cast<size_t>(n) * sizeof(StepLine); }
  size_t pairs() const { return static_cast<size_t>(n) * static_cast<size_t>(n > 0 ? n - 1 : 0); }
  size_t ringDataAt() const { return roundUp(ringControlsAt() + pairs() * sizeof(RingControl), 4096); }
  size_t stagingAt() const { return ringDataAt() + pairs() * ringBytes; }
  size_t totalBytes() const { return stagingAt() + static_cast<size_t>(n) * 2 * stagingBytes; }
  size_t pair(int from, int to) const {
    return static_cast<size_t>(from) * static_cast<size_t>(n - 1) + static_cast<size_t>(to < from ? to : to - 1);
  }
};

}  // namespace vigil::shm
