#include "transport/shm_transport.hpp"

#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

namespace vigil {

namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

int64_t nanosUntil(Deadline d) {
  constexpr int64_t kCapNs = 10'000'000'000;  // re-check now and then, whatever happens
  if (d.at() == Clock::time_point::max()) return kCapNs;
  auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(d.at() - Clock::now()).count();
  return std::clamp<int64_t>(left, 0, kCapNs);
}

// Spinning only pays when every rank of the segment has a core: with more
// ranks than cores the rank being waited for needs this core to progress.
int spinIterationsFor(int nranks) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(nranks) <= cores ? 1000 : 16;
}
constexpr int kYields = 16;

}  // namespace

ShmMapping::~ShmMapping() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
}

ShmTransport::ShmTransport(int rank, const shm::Geometry& geometry, ShmMapping mapping)
    : rank_(rank),
      g_(geometry),
      mapping_(std::move(mapping)),
      base_(mapping_.base()),
      bells_(reinterpret_cast<shm::Doorbell*>(base_ + g_.bellsAt())),
      steps_(reinterpret_cast<shm::StepLine*>(base_ + g_.stepsAt())),
      out_(static_cast<size_t>(g_.n)),
      in_(static_cast<size_t>(g_.n)),
      spinIterations_(spinIterationsFor(g_.n)),
      claimed_(2 * static_cast<size_t>(g_.n)) {
  auto* controls = reinterpret_cast<shm::RingControl*>(base_ + g_.ringControlsAt());
  for (int p = 0; p < g_.n; ++p) {
    if (p == rank_) continue;
    for (auto [from, to, ring] : {std::tuple{rank_, p, &out_[p]}, std::tuple{p, rank_, &in_[p]}}) {
      const size_t i = g_.pair(from, to);
      *ring = shm::Ring(controls + i, base_ + g_.ringDataAt() + i * g_.ringBytes, g_.ringBytes);
    }
  }
}

void ShmTransport::post(uint64_t step) {
  steps_[rank_].step.store(step, std::memory_order_release);
  for (int p = 0; p < g_.n; ++p) {
    if (p != rank_) bells_[p].ring();
  }
}

template <class Step, class Needs>
ExchangeFault ShmTransport::waitUntil(Step&& step, Needs&& needs, Deadline deadline, LivenessWatch& watch,
                                      ExchangeWork* work, bool wakeable) {
  ExchangeFault fault;
  bool stalled = false;
  // 1: done, 0: not yet, -1: failed (fault filled in).
  auto finish = [&](int r) { return r > 0 ? ExchangeFault{} : fault; };
  while (true) {
    int r = 0;
    // Work first, between passes: no spinning or sleeping while there is some.
    if (work != nullptr && work->pending()) {
      if ((r = step(fault)) != 0) return finish(r);
      work->runOne();
      continue;
    }
    for (int i = 0; i < spinIterations_; ++i) {
      if ((r = step(fault)) != 0) return finish(r);
      cpuRelax();
    }
    // The peer may be waiting for this core (more runnable threads than
    // cores): give it the core a few times before paying for a sleep.
    for (int i = 0; i < kYields; ++i) {
      if ((r = step(fault)) != 0) return finish(r);
      sched_yield();
    }
    const uint32_t armed = bells_[rank_].arm();
    if ((r = step(fault)) != 0) return finish(r);

    // Nothing moves: before sleeping, look at what happens outside.
    const int changeFd = watch.peerChangeFd();
    const int wakeFd = wakeable ? watch.wakeFd() : -1;
    // Unused entries have fd -1, which poll() skips.
    pollfd pfds[3] = {{watch.fatalFd(), POLLIN, 0}, {changeFd, POLLIN, 0}, {wakeFd, POLLIN, 0}};
    ::poll(pfds, 3, 0);
    if (pfds[0].revents & POLLIN) {
      fault.kind = ExchangeFault::Kind::Fatal;
      return fault;
    }
    if (pfds[2].revents & POLLIN) {
      fault.kind = ExchangeFault::Kind::Woken;
      return fault;
    }
    int gone = -1;
    if (changeFd >= 0) {
      if (pfds[1].revents & POLLIN) gone = watch.checkPeers({});
    } else {
      // Point-to-point: only a peer this exchange still needs matters.
      for (int p = 0; p < g_.n; ++p) {
        if (p != rank_ && needs(p) && !watch.peerAlive(p)) {
          gone = p;
          break;
        }
      }
    }
    if (gone >= 0) {
      // What a peer wrote before it went is still in the segment: use it.
      if ((r = step(fault)) != 0) return finish(r);
      fault.kind = ExchangeFault::Kind::PeerGone;
      fault.peer = gone;
      return fault;
    }
    if (!stalled && watch.stallDeadline().expired()) {
      stalled = true;
      watch.onStall();
      continue;
    }
    if (deadline.expired()) {
      fault.kind = ExchangeFault::Kind::TimedOut;
      return fault;
    }
    bells_[rank_].sleep(armed, nanosUntil(stalled ? deadline : deadline.earlier(watch.stallDeadline())));
  }
}

bool ShmTransport::progressPass(const FrameHeader& header, bool checkFingerprint, ExchangeFault& fault, bool& allDone) {
  std::fill(claimed_.begin(), claimed_.end(), 0);
  allDone = true;
  for (ActiveTransfer& a : active_) {
    if (a.finished) continue;
    const Transfer& t = *a.transfer;
    uint8_t& lane = claimed_[2 * static_cast<size_t>(t.peer) + (t.isSend ? 1 : 0)];
    if (lane) {
      if (!t.drain) allDone = false;
      continue;
    }
    lane = 1;
    if (t.waiting()) {  // its payload is not produced yet
      allDone = false;
      continue;
    }
    size_t total = kHeaderBytes + t.payloadBytes();  // a sink's size is known after its header
    const size_t before = a.done;
    // The payload, piece by piece, until the ring is full or empty.
    auto movePayload = [&](shm::Ring& ring, bool out) {
      while (a.done >= kHeaderBytes && a.done < total) {
        iovec iov[1];
        payloadPieces(a, a.done - kHeaderBytes, iov, 1);
        const size_t n = out ? ring.write(iov[0].iov_base, iov[0].iov_len) : ring.read(iov[0].iov_base, iov[0].iov_len);
        a.done += n;
        if (n < iov[0].iov_len) return;
      }
    };
    if (t.isSend) {
      shm::Ring& ring = out_[static_cast<size_t>(t.peer)];
      if (a.done < kHeaderBytes) {
        a.done += ring.write(reinterpret_cast<const uint8_t*>(&a.header) + a.done, kHeaderBytes - a.done);
      }
      movePayload(ring, true);
    } else {
      shm::Ring& ring = in_[static_cast<size_t>(t.peer)];
      while (true) {
        if (t.drain && a.done == 0) {
          FrameHeader next;
          if (!ring.peek(&next, sizeof next)) break;  // nothing whole yet
          if (!t.sink->wants(next)) {
            a.finished = true;  // left for a later operation: the drain of this peer ends
            break;
          }
        }
        if (a.done < kHeaderBytes) {
          a.done += ring.read(reinterpret_cast<uint8_t*>(&a.header) + a.done, kHeaderBytes - a.done);
          // Judge the header before a single payload byte lands in the user's buffer.
          if (a.done == kHeaderBytes && !acceptHeader(a.header, t, header, checkFingerprint, fault)) return false;
          total = kHeaderBytes + t.payloadBytes();
        }
        movePayload(ring, false);
        if (!t.drain || a.done < kHeaderBytes || a.done != total) break;
        bells_[t.peer].ring();                    // room for more
        a.done = a.segment = a.segmentStart = 0;  // a drain takes the peer's next message, if it is there
      }
    }
    if (a.done != before) bells_[t.peer].ring();  // data for it, or room for more
    if (t.drain) {
      if (a.finished) lane = 0;
      if (a.done > 0) allDone = false;  // holds the exchange only while a message is half-way in
      continue;
    }
    if (a.done == total) {
      a.finished = true;
      lane = 0;  // the next message on this lane may start in this pass
    } else {
      allDone = false;
    }
  }
  return true;
}

ExchangeFault ShmTransport::exchange(std::span<const Transfer> transfers, const FrameHeader& header,
                                     bool checkFingerprint, Deadline deadline, LivenessWatch& watch,
                                     ExchangeWork* work) {
  active_.clear();
  for (const Transfer& t : transfers) {
    ActiveTransfer a{&t, t.header != nullptr ? *t.header : header};
    a.header.bytes = t.bytes;
    active_.push_back(a);
  }
  ExchangeFault fault = waitUntil(
      [&](ExchangeFault& f) {
        bool allDone = false;
        if (!progressPass(header, checkFingerprint, f, allDone)) return -1;
        return allDone ? 1 : 0;
      },
      [&](int peer) {
        for (const ActiveTransfer& a : active_) {
          if (!a.finished && a.transfer->peer == peer && !(a.transfer->drain && a.done == 0)) return true;
        }
        return false;
      },
      deadline, watch, work);
  if (fault.kind == ExchangeFault::Kind::TimedOut) {
    for (const ActiveTransfer& a : active_) {
      if (!a.finished && !(a.transfer->drain && a.done == 0))
        fault.pending.push_back(
            {a.transfer->peer, a.transfer->isSend, kHeaderBytes + a.transfer->payloadBytes() - a.done});
    }
  }
  return fault;
}

ExchangeFault ShmTransport::waitAll(uint64_t step, Deadline deadline, LivenessWatch& watch) {
  involved_.clear();
  for (int p = 0; p < g_.n; ++p) {
    if (p != rank_) involved_.push_back(p);
  }
  ExchangeFault fault = waitUntil(
      [&](ExchangeFault&) {
        for (int p : involved_) {
          if (steps_[p].step.load(std::memory_order_acquire) < step) return 0;
        }
        return 1;
      },
      [&](int peer) { return stepOf(peer) < step; }, deadline, watch, nullptr);
  if (fault.kind == ExchangeFault::Kind::TimedOut) {
    for (int p : involved_) {
      if (stepOf(p) < step) fault.pending.push_back({p, false, 0});
    }
  }
  return fault;
}

ExchangeFault ShmTransport::awaitIncoming(std::span<const int> peers, Deadline deadline, LivenessWatch& watch,
                                          int& from) {
  ExchangeFault fault = waitUntil(
      [&](ExchangeFault&) {
        from = firstWithMessage(*this, peers);
        return from >= 0 ? 1 : 0;
      },
      [&](int peer) { return awaits(peers, peer); }, deadline, watch, nullptr, /*wakeable=*/true);
  markAwaited(fault, peers);
  return fault;
}

}  // namespace vigil
