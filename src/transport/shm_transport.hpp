#pragma once
// The shm transport, for ranks that share a host: frames travel through
// byte rings in a shared segment instead of sockets (same framing, same
// header checks), and the segment's staging buffers and step counters are
// its load/store capability (the load/store rows of the algorithm table).
//
// Waiting: spin briefly (only when every rank of the segment can have a core
// to itself), then sleep on this rank's doorbell. Whatever another rank
// publishes for this one rings that doorbell; so does the control thread
// when the communicator is aborted or a peer's state changes. A sleep never
// outlasts the op's deadline or its stall check.

#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "transport/shm_layout.hpp"
#include "transport/transport.hpp"

namespace vigil {

// A mapping of a segment; unmapped when destroyed.
class ShmMapping {
 public:
  ShmMapping() = default;
  ShmMapping(void* base, size_t bytes) : base_(static_cast<uint8_t*>(base)), bytes_(bytes) {}
  ShmMapping(ShmMapping&& o) noexcept : base_(o.base_), bytes_(o.bytes_) { o.base_ = nullptr; }
  ShmMapping& operator=(ShmMapping&& o) noexcept {
    std::swap(base_, o.base_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~ShmMapping();
  uint8_t* base() const { return base_; }
  size_t bytes() const { return bytes_; }

 private:
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

class ShmTransport final : public Transport, public LoadStoreDomain {
 public:
  ShmTransport(int rank, const shm::Geometry& geometry, ShmMapping mapping);

  // Transport
  const char* name() const override { return "shm"; }
  Capabilities capabilities() const override { return Capability::GatherScatter | Capability::LoadStore; }
  ExchangeFault exchange(std::span<const Transfer> transfers, const FrameHeader& header, bool checkFingerprint,
                         Deadline deadline, LivenessWatch& watch, ExchangeWork* work) override;
  std::optional<FrameHeader> unreceived(int peer) override {
    FrameHeader h;
    if (peer == rank_ || !in_[static_cast<size_t>(peer)].peek(&h, sizeof h)) return std::nullopt;
    return h;
  }
  ExchangeFault awaitIncoming(std::span<const int> peers, Deadline deadline, LivenessWatch& watch, int& from) override;
  // Rings this rank's own doorbell.
  void wakeWaiters() override { bells_[rank_].ring(); }
  RmaDomain* rma() override { return nullptr; }
  LoadStoreDomain* loadStore() override { return this; }
  // Unmapping the segment never waits for a peer.
  void abandon() override {}

  // LoadStoreDomain
  uint8_t* staging(int rank, int buffer) const override {
    return base_ + g_.stagingAt() + (2 * static_cast<size_t>(rank) + static_cast<size_t>(buffer)) * g_.stagingBytes;
  }
  size_t stagingBytes() const override { return g_.stagingBytes; }
  uint8_t* inlineData(int rank, int buffer) const override { return steps_[rank].inlineData[buffer]; }
  size_t inlineBytes() const override { return shm::kInlineBytes; }
  void publishFingerprint(const FrameHeader& h) override {
    steps_[rank_].fingerprint[h.seq & 1] = h;
    steps_[rank_].digest[h.seq & 1] = h.digest();
  }
  // The digest sits in the line of the step counter the waiter just read.
  uint64_t digestOf(int rank, uint64_t seq) const override { return steps_[rank].digest[seq & 1]; }
  const FrameHeader& fingerprintOf(int rank, uint64_t seq) const override { return steps_[rank].fingerprint[seq & 1]; }
  uint64_t nextStep() override { return ++step_; }
  int takeBuffer() override {
    nextBuffer_ ^= 1;
    return nextBuffer_ ^ 1;
  }
  uint64_t freeAt(int buffer) const override { return freeAt_[buffer]; }
  void setFreeAt(int buffer, uint64_t step) override { freeAt_[buffer] = step; }
  void post(uint64_t step) override;
  ExchangeFault waitAll(uint64_t step, Deadline deadline, LivenessWatch& watch) override;

 private:
  uint64_t stepOf(int rank) const { return steps_[rank].step.load(std::memory_order_acquire); }
  // Returns true when `allDone`; false with fault.kind set when it failed.
  bool progressPass(const FrameHeader& header, bool checkFingerprint, ExchangeFault& fault, bool& allDone);
  // The common wait: `step(fault)` makes progress and returns 1 when done,
  // -1 when failed; `needs(peer)`: whether the wait still depends on it;
  // `work` runs between steps while it has some; `wakeable`: the watch's
  // wake fd ends it too (Kind::Woken).
  template <class Step, class Needs>
  ExchangeFault waitUntil(Step&& step, Needs&& needs, Deadline deadline, LivenessWatch& watch, ExchangeWork* work,
                          bool wakeable = false);

  const int rank_;
  const shm::Geometry g_;
  ShmMapping mapping_;
  uint8_t* const base_;
  shm::Doorbell* const bells_;
  shm::StepLine* const steps_;
  std::vector<shm::Ring> out_, in_;  // by peer rank
  const int spinIterations_;
  std::vector<ActiveTransfer> active_;
  std::vector<uint8_t> claimed_;
  std::vector<int> involved_;
  uint64_t step_ = 0;
  int nextBuffer_ = 0;
  uint64_t freeAt_[2] = {0, 0};
};

// Creates (rank 0) or maps (the others) the segment of a communicator whose
// ranks all share this host, and unlinks its name as soon as every rank has
// mapped it: nothing is left behind by a crash after init. The ranks agree
// over their data connections. Throws VG-NET-006 when shared memory is
// unavailable, VG-BOOT-008 when a peer does not answer by the deadline.
std::unique_ptr<ShmTransport> establishShm(int rank, int nranks, const std::string& uniqueName,
                                           std::span<const Fd> dataFds, Deadline deadline);

}  // namespace vigil
