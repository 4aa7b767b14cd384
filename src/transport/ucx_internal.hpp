#pragma once
// The ucx transport's class, shared by its files: ucx_transport.cpp
// (setup, framed messages, teardown), ucx_rma.cpp (one-sided access) and
// ucx_devices.cpp (which devices and protocols UCX is given). Only those
// include it; the rest of vigil sees transport/ucx_transport.hpp.

#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <deque>
#include <thread>

#include "core/strcat.hpp"
#include "transport/transport.hpp"
#include "transport/ucx_api.hpp"
#include "transport/ucx_transport.hpp"

namespace vigil::ucx {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);
// Up to this many payload bytes travel in one send with their header.
constexpr size_t kEagerBytes = 8192;
constexpr size_t kBounceBytes = kHeaderBytes + kEagerBytes;
// How long teardown and cancellation wait for UCX to let go of buffers.
constexpr int kQuiesceMs = 2000;
// How long a wait whose peer is gone still takes what the peer sent before.
constexpr int kPeerGoneGraceMs = 200;

// Before sleeping, a waiter progresses the worker this many times: spinning
// pays only when every rank can have a core (else the awaited rank needs
// this one), then it yields the core a few times.
inline int spinIterationsFor(int nranks) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<unsigned>(nranks) <= cores ? 2000 : 16;
}
constexpr int kYields = 16;

// A tag: the sender's rank (24 bits), then 0 for a header message or, for
// the payload of a large transfer, 1 and 39 bits of a digest of its header
// (the fields that FrameHeader::sameOp compares, and the size). A receiver
// posts a large payload's receive with the header it expects, at once,
// straight into the user's buffer: a payload whose header differs has
// another tag and lands nowhere before its header was judged.
constexpr int kRankBits = 24;
constexpr ucp_tag_t kPayloadBit = ucp_tag_t{1} << (63 - kRankBits);
constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};
constexpr ucp_tag_t senderTag(int sender) {
  return static_cast<ucp_tag_t>(static_cast<uint32_t>(sender)) << (64 - kRankBits);
}
constexpr ucp_tag_t headerTag(int sender) {
  return senderTag(sender);
}
inline ucp_tag_t payloadTag(int sender, const FrameHeader& h) {
  uint64_t d = h.digest();
  d ^= (h.bytes + 0x9e3779b97f4a7c15ULL) * 0xc2b2ae3d27d4eb4fULL;
  return senderTag(sender) | kPayloadBit | (d & (kPayloadBit - 1));
}

// Statuses that mean the peer (or the path to it) is gone.
inline bool peerLost(ucs_status_t s) {
  return s == UCS_ERR_CONNECTION_RESET || s == UCS_ERR_ENDPOINT_TIMEOUT || s == UCS_ERR_UNREACHABLE ||
         s == UCS_ERR_REJECTED || s == UCS_ERR_CANCELED || s == UCS_ERR_NOT_CONNECTED;
}

// Where an endpoint's error handler marks its peer failed.
struct PeerSlot {
  ucs_status_t failed = UCS_OK;
};

class UcxTransport final : public Transport, public RmaDomain {
 public:
  UcxTransport(const ucx::Api& api, int rank, int nranks)
      : api_(api),
        rank_(rank),
        nranks_(nranks),
        spinIterations_(spinIterationsFor(nranks)),
        slots_(static_cast<size_t>(nranks)),
        eps_(static_cast<size_t>(nranks), nullptr),
        stash_(static_cast<size_t>(nranks)),
        laneBlocked_(static_cast<size_t>(nranks)),
        unhandled_(static_cast<size_t>(nranks)) {}
  ~UcxTransport() override;

  // Context, worker, address exchange over the data connections, endpoints,
  // and one message each way with every peer. Throws VG-NET-007.
  void open(TransportSetup& setup);

  const char* name() const override { return "ucx"; }
  Capabilities capabilities() const override { return Capability::GatherScatter | Capability::Rma; }
  ExchangeFault exchange(std::span<const Transfer> transfers, const FrameHeader& header, bool checkFingerprint,
                         Deadline deadline, LivenessWatch& watch, ExchangeWork* work) override;
  std::optional<FrameHeader> unreceived(int peer) override;
  ExchangeFault awaitIncoming(std::span<const int> peers, Deadline deadline, LivenessWatch& watch, int& from) override;
  // Its waits poll the fatal and peer-change eventfds beside the worker's.
  void wakeWaiters() override {}
  // Teardown then closes the endpoints at once instead of flushing them
  // (an aborted job's peers may never progress again).
  void abandon() override { abandoned_.store(true); }
  LoadStoreDomain* loadStore() override { return nullptr; }
  RmaDomain* rma() override { return this; }

  // RmaDomain
  std::unique_ptr<RmaRegion> registerMemory(void* base, size_t bytes) override;
  std::unique_ptr<RmaTarget> attach(int peer, uint64_t address, size_t bytes,
                                    std::span<const uint8_t> packedKey) override;
  void put(RmaTarget& target, size_t offset, const void* source, size_t bytes) override;
  void get(RmaTarget& target, size_t offset, void* destination, size_t bytes) override;
  void signal(RmaTarget& target, size_t offset, uint64_t value, bool add) override;
  void fence() override;
  ExchangeFault flush(Deadline deadline, LivenessWatch& watch, bool remote) override;
  void progress(int waitMs, std::span<const int> wakeFds) override;

 private:
  class Region;
  class Target;
  // A started put or get, until it completes.
  struct RmaRequest {
    void* req;
    int peer;
  };
  void startRma(Target& target, void* req);
  // 1: every started put/get and the flush complete; 0: not yet; -1: failed.
  int rmaPass(ExchangeFault& fault, bool remote);
  // One transfer in flight.
  struct Op {
    const Transfer* transfer = nullptr;
    FrameHeader header{};
    enum class Stage : uint8_t { Unposted, Header, Payload, Done } stage = Stage::Unposted;
    void* headerReq = nullptr;          // the header message (with the payload when eager)
    void* payloadReq = nullptr;         // the payload message of a large transfer
    ucp_tag_recv_info_t info{};         // the header message's
    ucp_tag_recv_info_t payloadInfo{};  // the payload message's
    ucp_tag_t payloadTag = 0;           // a large receive's payload tag
    uint8_t* bounce = nullptr;          // receives: the header and an eager payload land here
    std::vector<ucp_dt_iov_t> iov;
  };

  void createWorker();
  // Every rank sends its worker address to every peer, then reads theirs.
  std::vector<std::vector<uint8_t>> exchangeAddresses(TransportSetup& setup);
  void createEndpoints(const std::vector<std::vector<uint8_t>>& remote, const TransportSetup& setup);
  // One empty message each way with every peer: a path UCX cannot use fails
  // init here, naming the peer, instead of the first operation.
  void greetPeers(Deadline deadline);
  [[noreturn]] void fail(const std::string& what, ucs_status_t status) const;
  static void onEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);
  void progressAll() {
    while (api_.workerProgress(worker_) != 0) {
    }
  }
  // UCS_INPROGRESS while `req` runs; its final status once (then freed).
  ucs_status_t settle(void*& req);
  // Receives: UCX reports the received length through this callback
  // (`user`: the receive's ucp_tag_recv_info_t). Immediate completion is
  // refused: UCX 1.13 leaves recv_info unwritten on that path.
  static void onReceived(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user);
  static ucp_request_param_t receiveParam(ucp_tag_recv_info_t& info, ucp_datatype_t datatype) {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE | UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                         UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.datatype = datatype;
    param.cb.recv = onReceived;
    param.user_data = &info;
    return param;
  }

  // Posts the header's receive and, for a large transfer, the payload's.
  void postReceive(Op& op);
  void postPayloadReceive(Op& op, ucp_tag_t tag);
  void postSend(Op& op);
  // Judges a received header (and copies an eager payload); posts the payload receive.
  bool onHeader(Op& op, size_t length, const FrameHeader& base, bool checkFingerprint, ExchangeFault& fault);
  // A receive's request: 1 complete, 0 still waiting, -1 failed (`fault`
  // set; a waiting receive fails once its peer's endpoint failed).
  int settleReceive(void*& req, int peer, bool peerFailed, ExchangeFault& fault);
  // Once every transfer is done: waits until the sends left this process.
  int flushSends(ExchangeFault& fault);
  // 1: every transfer done; 0: not yet; -1: failed (`fault` set).
  int pass(const FrameHeader& base, bool checkFingerprint, ExchangeFault& fault);
  bool needs(int peer) const;
  // Progresses the worker until step(fault) returns 1 (done) or -1 (failed),
  // asleep when nothing moves; `needs(peer)`: whether a gone peer matters;
  // `wakeable`: the watch's wake fd ends it too (Kind::Woken).
  template <class Step, class Needs>
  ExchangeFault waitFor(Step step, Needs needs, Deadline deadline, LivenessWatch& watch, ExchangeWork* work,
                        bool wakeable = false);
  // A drain that waits for its peer's next message: takes it if it is here
  // (stage Header), else leaves the op unposted and returns false.
  bool takeNext(Op& op);
  // After a failure: cancels what is still posted and waits (bounded) until
  // UCX no longer touches the transfers' buffers.
  void quiesce();
  // Closes every endpoint (force: at once, ending the requests queued on it;
  // else flushed, bounded); they stay closed.
  void closeEndpoints(bool force);
  // Teardown: drops the messages no receive took.
  void discardUnreceived();
  static void fillPayloadIov(const Transfer& t, std::vector<ucp_dt_iov_t>& iov);
  // A UCX call failed during an exchange or flush: VG-NET-007 quoting UCX
  // ("<what>: UCX says ...").
  void failed(ExchangeFault& fault, const char* what, ucs_status_t status) const;
  void lostPeer(int peer, ucs_status_t status, ExchangeFault& fault) const;

  const ucx::Api& api_;
  const int rank_;
  const int nranks_;
  const int spinIterations_;
  // UCX_TLS names shared-memory transports only (sharedMemoryTls).
  const bool sharedMemoryOnly_ = sharedMemoryTls(std::getenv("UCX_TLS"));
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int efd_ = -1;
  std::vector<PeerSlot> slots_;
  std::vector<ucp_ep_h> eps_;
  std::vector<std::deque<std::vector<uint8_t>>> stash_;  // by peer: messages taken by unreceived()
  std::vector<Op> ops_;
  size_t opCount_ = 0;
  std::vector<uint8_t> bounce_;
  std::vector<uint8_t> laneBlocked_;
  std::vector<uint8_t> unhandled_;  // by peer: its endpoint has no error handling (UCX_TLS=sm)
  std::atomic<bool> abandoned_{false};
  bool faulted_ = false;
  bool sentSinceFlush_ = false;
  void* flushReq_ = nullptr;
  std::vector<RmaRequest> rmaRequests_;
  std::deque<uint64_t> signalValues_;  // the operands of signals in flight (stable addresses)
  void* rmaFlushReq_ = nullptr;
  bool rmaFlushPosted_ = false;
};

class UcxTransport::Region final : public RmaRegion {
 public:
  Region(const ucx::Api& api, ucp_context_h context, ucp_mem_h memh, uint64_t address, size_t bytes,
         std::vector<uint8_t> key)
      : api_(api), context_(context), memh_(memh), address_(address), bytes_(bytes), key_(std::move(key)) {}
  ~Region() override {
    if (memh_ != nullptr) api_.memUnmap(context_, memh_);
  }
  uint64_t address() const override { return address_; }
  size_t bytes() const override { return bytes_; }
  std::span<const uint8_t> packedKey() const override { return key_; }

 private:
  const ucx::Api& api_;
  ucp_context_h context_;
  ucp_mem_h memh_;
  uint64_t address_;
  size_t bytes_;
  std::vector<uint8_t> key_;
};

class UcxTransport::Target final : public RmaTarget {
 public:
  Target(const ucx::Api& api, int peer, uint64_t address, size_t bytes, ucp_rkey_h rkey)
      : api_(api), peer_(peer), address_(address), bytes_(bytes), rkey_(rkey) {}
  ~Target() override {
    if (rkey_ != nullptr) api_.rkeyDestroy(rkey_);
  }
  int peer() const override { return peer_; }
  size_t bytes() const override { return bytes_; }
  uint64_t address() const { return address_; }
  ucp_rkey_h rkey() const { return rkey_; }  // null: this rank's own region (a copy)

 private:
  const ucx::Api& api_;
  int peer_;
  uint64_t address_;
  size_t bytes_;
  ucp_rkey_h rkey_;
};

// Defined here: exchanges (ucx_transport.cpp) and RMA flushes (ucx_rma.cpp) wait with it.
template <class Step, class Needs>
inline ExchangeFault UcxTransport::waitFor(Step step, Needs needs, Deadline deadline, LivenessWatch& watch,
                                           ExchangeWork* work, bool wakeable) {
  ExchangeFault fault;
  bool stalled = false;
  while (true) {
    progressAll();
    if (const int r = step(fault); r != 0) return r > 0 ? ExchangeFault{} : fault;
    if (work != nullptr && work->pending()) {
      work->runOne();
      continue;
    }
    int r = 0;
    for (int i = 0; i < spinIterations_ + kYields && r == 0; ++i) {
      if (i >= spinIterations_) sched_yield();
      if (api_.workerProgress(worker_) != 0) r = step(fault);
    }
    if (r != 0) return r > 0 ? ExchangeFault{} : fault;
    // Sleep until the worker has events. Busy (events came in since the last
    // progress): no sleep, but the fatal
    // and peer fds, the stall and the deadline are still looked at, so a
    // worker that stays busy (a peer's transport retrying) cannot hide them.
    const ucs_status_t armed = api_.workerArm(worker_);
    if (armed != UCS_OK && armed != UCS_ERR_BUSY) {
      failed(fault, "arming the UCX worker", armed);
      return fault;
    }
    const int changeFd = watch.peerChangeFd();
    // Unused entries have fd -1, which poll() skips.
    pollfd pfds[4] = {{efd_, POLLIN, 0},
                      {watch.fatalFd(), POLLIN, 0},
                      {changeFd, POLLIN, 0},
                      {wakeable ? watch.wakeFd() : -1, POLLIN, 0}};
    const Deadline until = stalled ? deadline : deadline.earlier(watch.stallDeadline());
    const int sleepMs = armed == UCS_ERR_BUSY ? 0 : until.pollTimeoutMs();
    if (::poll(pfds, 4, sleepMs) < 0 && errno != EINTR) {
      fault.kind = ExchangeFault::Kind::IoError;
      fault.err = errno;
      return fault;
    }
    if (pfds[1].revents & POLLIN) {
      fault.kind = ExchangeFault::Kind::Fatal;
      return fault;
    }
    if (pfds[3].revents & POLLIN) {
      fault.kind = ExchangeFault::Kind::Woken;
      return fault;
    }
    int gone = -1;
    if (changeFd >= 0) {
      if (pfds[2].revents & POLLIN) gone = watch.checkPeers({});
    } else {
      for (int p = 0; p < nranks_ && gone < 0; ++p) {
        if (p != rank_ && needs(p) && !watch.peerAlive(p)) gone = p;
      }
    }
    if (gone >= 0) {
      // What the peer sent before it went may be here already, or still
      // arriving: a large receive completes when the sender's last
      // acknowledgement is processed, which may come after the control
      // plane heard it leave. Events are taken for a short grace.
      const Deadline grace = Deadline::afterMs(kPeerGoneGraceMs);
      while (true) {
        progressAll();
        if (const int r = step(fault); r != 0) return r > 0 ? ExchangeFault{} : fault;
        if (grace.expired()) break;
        if (api_.workerArm(worker_) == UCS_ERR_BUSY) continue;
        pollfd events{efd_, POLLIN, 0};
        if (::poll(&events, 1, grace.pollTimeoutMs()) <= 0) break;  // nothing more came
      }
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
  }
}

}  // namespace vigil::ucx
