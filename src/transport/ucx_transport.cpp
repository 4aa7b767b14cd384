#include "transport/ucx_transport.hpp"

#include <dirent.h>
#include <poll.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <set>
#include <thread>

#include "core/config.hpp"
#include "core/log.hpp"
#include "core/strcat.hpp"
#include "net/event_fd.hpp"
#include "net/socket.hpp"
#include "transport/ucx_api.hpp"

namespace vigil {

namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);
// Up to this many payload bytes travel in one send with their header.
constexpr size_t kEagerBytes = 8192;
constexpr size_t kBounceBytes = kHeaderBytes + kEagerBytes;
// How long teardown and cancellation wait for UCX to let go of buffers.
constexpr int kQuiesceMs = 2000;

// Before sleeping, a waiter progresses the worker this many times: spinning
// pays only when every rank can have a core (else the awaited rank needs
// this one), then it yields the core a few times.
int spinIterationsFor(int nranks) {
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
ucp_tag_t payloadTag(int sender, const FrameHeader& h) {
  uint64_t d = h.digest();
  d ^= (h.bytes + 0x9e3779b97f4a7c15ULL) * 0xc2b2ae3d27d4eb4fULL;
  return senderTag(sender) | kPayloadBit | (d & (kPayloadBit - 1));
}

// Statuses that mean the peer (or the path to it) is gone.
bool peerLost(ucs_status_t s) {
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
  ExchangeFault flush(Deadline deadline, LivenessWatch& watch) override;

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
  int rmaPass(ExchangeFault& fault);
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
  // asleep when nothing moves; `needs(peer)`: whether a gone peer matters.
  template <class Step, class Needs>
  ExchangeFault waitFor(Step step, Needs needs, Deadline deadline, LivenessWatch& watch, ExchangeWork* work);
  // After a failure: cancels what is still posted and waits (bounded) until
  // UCX no longer touches the transfers' buffers.
  void quiesce();
  // Closes every endpoint (force: at once, ending the requests queued on it;
  // else flushed, bounded); they stay closed.
  void closeEndpoints(bool force);
  // Teardown: drops the messages no receive took.
  void discardUnreceived();
  static void fillPayloadIov(const Transfer& t, std::vector<ucp_dt_iov_t>& iov);
  void lostPeer(int peer, ucs_status_t status, ExchangeFault& fault) const;

  const ucx::Api& api_;
  const int rank_;
  const int nranks_;
  const int spinIterations_;
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

void UcxTransport::fail(const std::string& what, ucs_status_t status) const {
  ErrorBuilder(Errc::NetUcx)
      .rank(rank_, nranks_)
      .op("init")
      .cause(what, ": UCX says \"", api_.statusString(status), "\"")
      .raise();
}

void UcxTransport::onEndpointError(void* arg, ucp_ep_h, ucs_status_t status) {
  auto* slot = static_cast<PeerSlot*>(arg);
  if (slot->failed == UCS_OK) slot->failed = status;
}

ucs_status_t UcxTransport::settle(void*& req) {
  if (req == nullptr) return UCS_OK;
  if (UCS_PTR_IS_ERR(req)) {
    const ucs_status_t s = UCS_PTR_STATUS(req);
    req = nullptr;
    return s;
  }
  const ucs_status_t s = api_.requestCheckStatus(req);
  if (s == UCS_INPROGRESS) return s;
  api_.requestFree(req);
  req = nullptr;
  return s;
}

void UcxTransport::onReceived(void*, ucs_status_t, const ucp_tag_recv_info_t* info, void* user) {
  *static_cast<ucp_tag_recv_info_t*>(user) = *info;
}

void UcxTransport::open(TransportSetup& setup) {
  if (nranks_ > (1 << kRankBits)) {
    fail(cat("a communicator of ", nranks_, " ranks (UCX tags carry at most ", 1 << kRankBits, ")"),
         UCS_ERR_UNSUPPORTED);
  }
  createWorker();
  createEndpoints(exchangeAddresses(setup), setup);
  greetPeers(setup.deadline);
}

void UcxTransport::createWorker() {
  ucp_config_t* config = nullptr;
  if (ucs_status_t s = api_.configRead(nullptr, nullptr, &config); s != UCS_OK) fail("reading UCX's configuration", s);
  // VIGIL_SOCKET_IFNAME picks UCX's network interfaces too, unless UCX_NET_DEVICES does.
  const char* ucxDevices = std::getenv("UCX_NET_DEVICES");
  const std::string mapped = ucxNetDevices(processConfig().socketIfname, rdmaPorts());
  if ((ucxDevices == nullptr || *ucxDevices == '\0') && !mapped.empty()) {
    if (ucs_status_t s = api_.configModify(config, "NET_DEVICES", mapped.c_str()); s != UCS_OK) {
      api_.configRelease(config);
      fail(cat("setting UCX_NET_DEVICES=", mapped, " from VIGIL_SOCKET_IFNAME"), s);
    }
    VIGIL_LOG_AT(LogLevel::Info, rank_, "ucx: UCX_NET_DEVICES=", mapped, " (from VIGIL_SOCKET_IFNAME)");
  }
  // Without an RDMA device UCX moves data over tcp, where its default
  // rendezvous (get_zcopy) reads a large message in fragments, each one a
  // request and a reply; put_zcopy streams it (1 MiB sendrecv between two
  // namespace hosts: 0.86 -> 1.88 GB/s). UCX_RNDV_SCHEME, when set, wins.
  const char* scheme = std::getenv("UCX_RNDV_SCHEME");
  if ((scheme == nullptr || *scheme == '\0') && rdmaPorts().empty() && !sharedMemoryTls(std::getenv("UCX_TLS"))) {
    if (ucs_status_t s = api_.configModify(config, "RNDV_SCHEME", "put_zcopy"); s != UCS_OK) {
      api_.configRelease(config);
      fail("setting UCX_RNDV_SCHEME=put_zcopy (no RDMA device: UCX runs over tcp)", s);
    }
    VIGIL_LOG_AT(LogLevel::Info, rank_, "ucx: UCX_RNDV_SCHEME=put_zcopy (no RDMA device here)");
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | UCP_FEATURE_RMA;
  params.estimated_num_eps = static_cast<size_t>(nranks_);
  const ucs_status_t initStatus = api_.initVersion(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &context_);
  api_.configRelease(config);
  if (initStatus != UCS_OK) fail("creating the UCX context", initStatus);

  ucp_worker_params_t wp{};
  wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  wp.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // one thread at a time: the op's caller, then the destroyer
  if (ucs_status_t s = api_.workerCreate(context_, &wp, &worker_); s != UCS_OK) fail("creating the UCX worker", s);
  if (ucs_status_t s = api_.workerGetEfd(worker_, &efd_); s != UCS_OK) {
    fail("getting the UCX worker's event fd (a transport in UCX_TLS cannot wake a sleeping waiter)", s);
  }
}

std::vector<std::vector<uint8_t>> UcxTransport::exchangeAddresses(TransportSetup& setup) {
  ucp_address_t* address = nullptr;
  size_t addressBytes = 0;
  if (ucs_status_t s = api_.workerGetAddress(worker_, &address, &addressBytes); s != UCS_OK) {
    fail("getting the UCX worker's address", s);
  }
  // Every rank sends its address to every peer, then reads theirs: a few
  // hundred bytes, which the sockets buffer, so nobody waits on another's order.
  std::vector<std::vector<uint8_t>> remote(static_cast<size_t>(nranks_));
  std::vector<int> silent;
  const uint32_t length = static_cast<uint32_t>(addressBytes);
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const int fd = setup.dataFds[static_cast<size_t>(p)].get();
    if (sendAll(fd, &length, sizeof length, setup.deadline) != IoStatus::Done ||
        sendAll(fd, address, addressBytes, setup.deadline) != IoStatus::Done) {
      silent.push_back(p);
    }
  }
  api_.workerReleaseAddress(worker_, address);
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    const int fd = setup.dataFds[static_cast<size_t>(p)].get();
    uint32_t theirs = 0;
    if (recvAll(fd, &theirs, sizeof theirs, setup.deadline) != IoStatus::Done || theirs == 0 || theirs > (1u << 20)) {
      silent.push_back(p);
      continue;
    }
    remote[static_cast<size_t>(p)].resize(theirs);
    if (recvAll(fd, remote[static_cast<size_t>(p)].data(), theirs, setup.deadline) != IoStatus::Done) {
      silent.push_back(p);
    }
  }
  if (!silent.empty()) {
    ErrorBuilder(Errc::NetUcx)
        .rank(rank_, nranks_)
        .op("init")
        .cause("rank(s) ", joinRanks(silent),
               " did not exchange UCX worker addresses over their data connections before the connect timeout")
        .raise();
  }
  return remote;
}

void UcxTransport::createEndpoints(const std::vector<std::vector<uint8_t>>& remote, const TransportSetup& setup) {
  const bool sharedMemoryOnly = sharedMemoryTls(std::getenv("UCX_TLS"));
  const std::string& host = setup.peers[static_cast<size_t>(rank_)].hostId;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    PeerSlot& slot = slots_[static_cast<size_t>(p)];
    slot.failed = UCS_OK;
    ucp_ep_params_t ep{};
    ep.field_mask =
        UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep.address = reinterpret_cast<const ucp_address_t*>(remote[static_cast<size_t>(p)].data());
    // A dead peer is an endpoint error (never a hang) where UCX can report
    // one. UCX 1.13's shared-memory transports cannot: with UCX_TLS naming
    // only those, a peer on this host gets an endpoint without error
    // handling, and its death reaches this rank through the control plane
    // (its connection closes), which ends the wait as on every transport.
    const bool sameHost = setup.peers[static_cast<size_t>(p)].hostId == host;
    ep.err_mode = sharedMemoryOnly && sameHost ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    unhandled_[static_cast<size_t>(p)] = ep.err_mode == UCP_ERR_HANDLING_MODE_NONE ? 1 : 0;
    ep.err_handler.cb = onEndpointError;
    ep.err_handler.arg = &slot;
    if (ucs_status_t s = api_.epCreate(worker_, &ep, &eps_[static_cast<size_t>(p)]); s != UCS_OK) {
      fail(cat("creating the UCX endpoint to rank ", p, " (host ", setup.peers[static_cast<size_t>(p)].hostname, ")"),
           s);
    }
  }
}

void UcxTransport::greetPeers(Deadline deadline) {
  class InitWatch final : public LivenessWatch {
   public:
    int fatalFd() const override { return never_.fd(); }
    int peerChangeFd() const override { return -1; }
    int checkPeers(std::span<const int>) override { return -1; }

   private:
    EventFd never_;
  } watch;
  std::vector<Transfer> hello;
  for (int p = 0; p < nranks_; ++p) {
    if (p == rank_) continue;
    hello.push_back(Transfer::send(p, nullptr, 0));
    hello.push_back(Transfer::recv(p, nullptr, 0));
  }
  // Two rounds. A rank's first round ends with a flush, which completes only
  // once UCX finished wiring its endpoints up, and that needs every peer to
  // progress its worker: the peers are then still in their second round,
  // which cannot end before this rank's second message. (With one round, a
  // rank whose peers had all left the greeting waited for them forever.)
  for (uint64_t round = 0; round < 2; ++round) {
    FrameHeader h;
    h.kind = static_cast<uint8_t>(FrameKind::Collective);
    h.seq = round;
    ExchangeFault f = exchange(hello, h, true, deadline, watch, nullptr);
    if (f.kind == ExchangeFault::Kind::None) continue;
    std::vector<int> unreached;
    for (const auto& pending : f.pending) unreached.push_back(pending.peer);
    if (f.peer >= 0) unreached.push_back(f.peer);
    std::sort(unreached.begin(), unreached.end());
    unreached.erase(std::unique(unreached.begin(), unreached.end()), unreached.end());
    ErrorBuilder(Errc::NetUcx)
        .rank(rank_, nranks_)
        .op("init")
        .cause(unreached.empty() ? std::string("UCX did not finish connecting this rank's endpoints")
                                 : cat("UCX could not reach rank(s) ", joinRanks(unreached)),
               f.kind == ExchangeFault::Kind::TimedOut ? " before the connect timeout" : "",
               f.detail.empty() ? std::string() : cat(": ", f.detail))
        .raise();
  }
}

UcxTransport::~UcxTransport() {
  if (worker_ != nullptr) {
    quiesce();
    discardUnreceived();
    // Flush: what this rank sent still reaches the peer (a dead peer fails the
    // flush; a stuck one is given up on). After an abort: at once.
    closeEndpoints(abandoned_.load());
    api_.workerDestroy(worker_);
  }
  if (context_ != nullptr) api_.cleanup(context_);
}

void UcxTransport::discardUnreceived() {
  // Messages that arrived and that no receive took (a failed op's peers went
  // on sending): taken and dropped, so that UCX does not warn about each one
  // on the application's stdout when the worker goes. Bounded: a large
  // message from a gone peer cannot be fetched.
  const Deadline until = Deadline::afterMs(kQuiesceMs);
  std::vector<uint8_t> sink;
  while (!until.expired()) {
    progressAll();
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = api_.tagProbeNb(worker_, 0, 0, 1, &info);
    if (msg == nullptr) return;
    sink.resize(std::max<size_t>(sink.size(), info.length));
    ucp_request_param_t param = receiveParam(info, ucp_dt_make_contig(1));
    void* req = api_.tagMsgRecvNbx(worker_, sink.data(), info.length, msg, &param);
    while (settle(req) == UCS_INPROGRESS && !until.expired()) progressAll();
    if (req != nullptr) {
      api_.requestFree(req);
      return;
    }
  }
}

void UcxTransport::closeEndpoints(bool force) {
  std::vector<void*> closing;
  for (ucp_ep_h& ep : eps_) {
    if (ep == nullptr) continue;
    ucp_request_param_t param{};
    if (force) {
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;  // also ends every request queued on it
    }
    void* req = api_.epCloseNbx(ep, &param);
    if (req != nullptr && !UCS_PTR_IS_ERR(req)) closing.push_back(req);
    ep = nullptr;
  }
  const Deadline until = Deadline::afterMs(kQuiesceMs);
  for (void*& req : closing) {
    while (settle(req) == UCS_INPROGRESS && !until.expired()) progressAll();
    if (req != nullptr) api_.requestFree(req);  // released: the worker's destruction ends it
  }
}

void UcxTransport::fillPayloadIov(const Transfer& t, std::vector<ucp_dt_iov_t>& iov) {
  if (t.segments.empty()) {
    iov.push_back({t.isSend ? const_cast<void*>(t.sendData) : t.recvData, t.bytes});
    return;
  }
  for (const IoSegment& s : t.segments) {
    if (s.bytes > 0) iov.push_back({s.data, s.bytes});
  }
}

void UcxTransport::postReceive(Op& op) {
  const Transfer& t = *op.transfer;
  op.stage = Op::Stage::Header;
  if (t.bytes > kEagerBytes) postPayloadReceive(op, payloadTag(t.peer, op.header));
  auto& stashed = stash_[static_cast<size_t>(t.peer)];
  if (!stashed.empty()) {  // taken by unreceived(): it comes first
    std::memcpy(op.bounce, stashed.front().data(), std::min(stashed.front().size(), kBounceBytes));
    op.info.length = stashed.front().size();
    stashed.pop_front();
    op.headerReq = nullptr;  // complete
    return;
  }
  ucp_request_param_t param = receiveParam(op.info, ucp_dt_make_contig(1));
  op.headerReq = api_.tagRecvNbx(worker_, op.bounce, kBounceBytes, headerTag(t.peer), kFullMask, &param);
}

void UcxTransport::postPayloadReceive(Op& op, ucp_tag_t tag) {
  const Transfer& t = *op.transfer;
  // A large receive answers its sender when its data has come (UCX's
  // rendezvous): the exchange's flush sees that answer out too, so the sender
  // need not wait for this rank's next call into UCX.
  sentSinceFlush_ = true;
  op.payloadTag = tag;
  op.payloadInfo.length = 0;
  if (t.segments.empty()) {  // contiguous: UCX's zero-copy protocols apply
    ucp_request_param_t param = receiveParam(op.payloadInfo, ucp_dt_make_contig(1));
    op.payloadReq = api_.tagRecvNbx(worker_, t.recvData, t.bytes, tag, kFullMask, &param);
    return;
  }
  op.iov.clear();
  fillPayloadIov(t, op.iov);
  ucp_request_param_t param = receiveParam(op.payloadInfo, ucp_dt_make_iov());
  op.payloadReq = api_.tagRecvNbx(worker_, op.iov.data(), op.iov.size(), tag, kFullMask, &param);
}

void UcxTransport::postSend(Op& op) {
  sentSinceFlush_ = true;
  const Transfer& t = *op.transfer;
  ucp_ep_h ep = eps_[static_cast<size_t>(t.peer)];
  op.stage = Op::Stage::Header;
  op.iov.clear();
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  if (t.bytes <= kEagerBytes) {
    op.iov.push_back({&op.header, kHeaderBytes});
    if (t.bytes > 0) fillPayloadIov(t, op.iov);
    param.datatype = ucp_dt_make_iov();
    op.headerReq = api_.tagSendNbx(ep, op.iov.data(), op.iov.size(), headerTag(rank_), &param);
    return;
  }
  param.datatype = ucp_dt_make_contig(1);
  op.headerReq = api_.tagSendNbx(ep, &op.header, kHeaderBytes, headerTag(rank_), &param);
  const ucp_tag_t tag = payloadTag(rank_, op.header);
  if (t.segments.empty()) {  // contiguous: UCX's zero-copy protocols apply
    op.payloadReq = api_.tagSendNbx(ep, t.sendData, t.bytes, tag, &param);
  } else {
    fillPayloadIov(t, op.iov);
    param.datatype = ucp_dt_make_iov();
    op.payloadReq = api_.tagSendNbx(ep, op.iov.data(), op.iov.size(), tag, &param);
  }
  op.stage = Op::Stage::Payload;
}

bool UcxTransport::onHeader(Op& op, size_t length, const FrameHeader& base, bool checkFingerprint,
                            ExchangeFault& fault) {
  const Transfer& t = *op.transfer;
  if (length < kHeaderBytes) {
    fault.kind = ExchangeFault::Kind::Protocol;
    fault.peer = t.peer;
    return false;
  }
  std::memcpy(&op.header, op.bounce, kHeaderBytes);
  if (!acceptHeader(op.header, t, base, checkFingerprint, fault)) return false;
  if (t.bytes <= kEagerBytes) {
    if (length != kHeaderBytes + t.bytes) {
      fault.kind = ExchangeFault::Kind::Protocol;
      fault.peer = t.peer;
      return false;
    }
    // The header is accepted: now the payload may land in the user's memory.
    const uint8_t* from = op.bounce + kHeaderBytes;
    if (t.segments.empty()) {
      if (t.bytes > 0) std::memcpy(t.recvData, from, t.bytes);
    } else {
      for (const IoSegment& s : t.segments) {
        if (s.bytes > 0) std::memcpy(s.data, from, s.bytes);
        from += s.bytes;
      }
    }
    op.stage = Op::Stage::Done;
    return true;
  }
  // The payload's receive was posted with the header this rank expected. A
  // header that agrees without being the same (VIGIL_FINGERPRINT=0 compares
  // the shape only) came with another payload tag: the receive moves to it.
  const ucp_tag_t theirs = payloadTag(t.peer, op.header);
  if (theirs != op.payloadTag) {
    if (op.payloadReq != nullptr && !UCS_PTR_IS_ERR(op.payloadReq)) api_.requestCancel(worker_, op.payloadReq);
    progressAll();
    if (settle(op.payloadReq) == UCS_INPROGRESS) {  // taken by a message after all: cannot be moved
      api_.requestFree(op.payloadReq);
      op.payloadReq = nullptr;
      fault.kind = ExchangeFault::Kind::Protocol;
      fault.peer = t.peer;
      return false;
    }
    postPayloadReceive(op, theirs);
  }
  op.stage = Op::Stage::Payload;
  return true;
}

void UcxTransport::lostPeer(int peer, ucs_status_t status, ExchangeFault& fault) const {
  // Over an endpoint without error handling (shared memory), a failed
  // transfer is a peer whose memory went away: judged as a closed peer.
  const bool unhandled = unhandled_[static_cast<size_t>(peer)] != 0;
  fault.kind = peerLost(status) || unhandled ? ExchangeFault::Kind::PeerClosed : ExchangeFault::Kind::IoError;
  fault.peer = peer;
  fault.err = EIO;
  fault.ioErrc = Errc::NetUcx;
  fault.detail = cat("UCX says \"", api_.statusString(status), "\"");
}

int UcxTransport::settleReceive(void*& req, int peer, bool peerFailed, ExchangeFault& fault) {
  const ucs_status_t s = settle(req);
  if (s == UCS_OK) return 1;
  if (s == UCS_INPROGRESS && !peerFailed) return 0;
  lostPeer(peer, s == UCS_INPROGRESS ? slots_[static_cast<size_t>(peer)].failed : s, fault);
  return -1;
}

int UcxTransport::pass(const FrameHeader& base, bool checkFingerprint, ExchangeFault& fault) {
  bool allDone = true;
  std::fill(laneBlocked_.begin(), laneBlocked_.end(), 0);
  for (size_t i = 0; i < opCount_; ++i) {
    Op& op = ops_[i];
    const Transfer& t = *op.transfer;
    const auto peer = static_cast<size_t>(t.peer);
    if (op.stage == Op::Stage::Done) continue;
    allDone = false;
    if (op.stage == Op::Stage::Unposted) {  // a send whose lane or payload is not ready
      if (laneBlocked_[peer] || t.waiting()) {
        laneBlocked_[peer] = 1;
        continue;
      }
      postSend(op);
    }
    if (t.isSend) {
      const ucs_status_t h = settle(op.headerReq);
      const ucs_status_t p = settle(op.payloadReq);
      for (ucs_status_t s : {h, p}) {
        if (s != UCS_OK && s != UCS_INPROGRESS) {
          lostPeer(t.peer, s, fault);
          return -1;
        }
      }
      if (h == UCS_OK && p == UCS_OK) {
        op.stage = Op::Stage::Done;
      } else if (slots_[peer].failed != UCS_OK) {
        lostPeer(t.peer, slots_[peer].failed, fault);
        return -1;
      }
      continue;
    }
    // What the peer sent before its endpoint failed still counts: a failure
    // matters only to a receive that is still waiting.
    const bool peerFailed = slots_[peer].failed != UCS_OK;
    if (op.stage == Op::Stage::Header) {
      const int got = settleReceive(op.headerReq, t.peer, peerFailed, fault);
      if (got < 0) return -1;
      if (got == 0) continue;
      if (!onHeader(op, op.info.length, base, checkFingerprint, fault)) return -1;
    }
    if (op.stage == Op::Stage::Payload) {
      const int got = settleReceive(op.payloadReq, t.peer, peerFailed, fault);
      if (got < 0) return -1;
      if (got == 0) continue;
      if (op.payloadInfo.length != t.bytes) {
        fault.kind = ExchangeFault::Kind::Protocol;
        fault.peer = t.peer;
        return -1;
      }
      op.stage = Op::Stage::Done;
    }
  }
  if (!allDone) {
    for (size_t i = 0; i < opCount_; ++i) {
      if (ops_[i].stage != Op::Stage::Done) return 0;
    }
  }
  return flushSends(fault);
}

int UcxTransport::flushSends(ExchangeFault& fault) {
  // A send is complete for UCX once its buffer may be reused, which may be
  // before its bytes left this process (an eager send still queued in the
  // transport). As over TCP, where a completed send is in the kernel, the
  // exchange returns only when they left: a rank stopped or killed right
  // after an op must not take its last message with it.
  if (!sentSinceFlush_) return 1;
  if (flushReq_ == nullptr) {
    ucp_request_param_t param{};
    flushReq_ = api_.workerFlushNbx(worker_, &param);
    if (flushReq_ == nullptr) {
      sentSinceFlush_ = false;
      return 1;
    }
  }
  const ucs_status_t s = settle(flushReq_);
  if (s == UCS_INPROGRESS) return 0;
  if (s != UCS_OK) {
    fault.kind = ExchangeFault::Kind::IoError;
    fault.err = EIO;
    fault.ioErrc = Errc::NetUcx;
    fault.detail = cat("flushing the sends: UCX says \"", api_.statusString(s), "\"");
    return -1;
  }
  sentSinceFlush_ = false;
  return 1;
}

bool UcxTransport::needs(int peer) const {
  for (size_t i = 0; i < opCount_; ++i) {
    if (ops_[i].stage != Op::Stage::Done && ops_[i].transfer->peer == peer) return true;
  }
  return false;
}

template <class Step, class Needs>
ExchangeFault UcxTransport::waitFor(Step step, Needs needs, Deadline deadline, LivenessWatch& watch,
                                    ExchangeWork* work) {
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
      fault.kind = ExchangeFault::Kind::IoError;
      fault.err = EIO;
      fault.ioErrc = Errc::NetUcx;
      fault.detail = cat("arming the UCX worker: UCX says \"", api_.statusString(armed), "\"");
      return fault;
    }
    const int changeFd = watch.peerChangeFd();
    pollfd pfds[3] = {{efd_, POLLIN, 0}, {watch.fatalFd(), POLLIN, 0}, {changeFd, POLLIN, 0}};
    const Deadline until = stalled ? deadline : deadline.earlier(watch.stallDeadline());
    const int sleepMs = armed == UCS_ERR_BUSY ? 0 : until.pollTimeoutMs();
    if (::poll(pfds, changeFd >= 0 ? 3 : 2, sleepMs) < 0 && errno != EINTR) {
      fault.kind = ExchangeFault::Kind::IoError;
      fault.err = errno;
      return fault;
    }
    if (pfds[1].revents & POLLIN) {
      fault.kind = ExchangeFault::Kind::Fatal;
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
      // What the peer sent before it went may be here already: use it.
      progressAll();
      if (const int r = step(fault); r != 0) return r > 0 ? ExchangeFault{} : fault;
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

ExchangeFault UcxTransport::exchange(std::span<const Transfer> transfers, const FrameHeader& header,
                                     bool checkFingerprint, Deadline deadline, LivenessWatch& watch,
                                     ExchangeWork* work) {
  opCount_ = transfers.size();
  if (ops_.size() < opCount_) ops_.resize(opCount_);  // kept: their iov vectors keep their capacity
  size_t receives = 0;
  for (const Transfer& t : transfers) receives += t.isSend ? 0 : 1;
  if (bounce_.size() < receives * kBounceBytes) bounce_.resize(receives * kBounceBytes);
  size_t nextBounce = 0;
  for (size_t i = 0; i < opCount_; ++i) {
    Op& op = ops_[i];
    const Transfer& t = transfers[i];
    op.transfer = &t;
    op.header = t.header != nullptr ? *t.header : header;
    op.header.bytes = t.bytes;
    op.stage = Op::Stage::Unposted;
    op.headerReq = op.payloadReq = nullptr;
    op.info = op.payloadInfo = {};
    op.bounce = nullptr;
    if (!t.isSend) {
      op.bounce = bounce_.data() + kBounceBytes * nextBounce++;
      postReceive(op);  // every receive at once: tag matching keeps each peer's order
    }
  }
  ExchangeFault fault = waitFor([&](ExchangeFault& f) { return pass(header, checkFingerprint, f); },
                                [this](int peer) { return needs(peer); }, deadline, watch, work);
  if (fault.kind != ExchangeFault::Kind::None) {
    faulted_ = true;
    if (fault.kind == ExchangeFault::Kind::TimedOut) {
      for (size_t i = 0; i < opCount_; ++i) {
        const Op& op = ops_[i];
        if (op.stage == Op::Stage::Done) continue;
        const size_t left = op.stage == Op::Stage::Payload ? op.transfer->bytes : kHeaderBytes + op.transfer->bytes;
        fault.pending.push_back({op.transfer->peer, op.transfer->isSend, left});
      }
    }
    quiesce();
  }
  opCount_ = 0;
  return fault;
}

void UcxTransport::quiesce() {
  // A flush touches no user buffer: released to UCX at once (waiting for it
  // would add its time, to a peer that may be gone, to the op's report).
  if (flushReq_ != nullptr && !UCS_PTR_IS_ERR(flushReq_)) api_.requestFree(flushReq_);
  flushReq_ = nullptr;
  sentSinceFlush_ = false;
  // Cancelled requests complete (UCS_ERR_CANCELED) in a later progress.
  for (size_t i = 0; i < opCount_; ++i) {
    for (void* req : {ops_[i].headerReq, ops_[i].payloadReq}) {
      if (req != nullptr && !UCS_PTR_IS_ERR(req)) api_.requestCancel(worker_, req);
    }
  }
  // A failed exchange stops the communicator for good (it keeps the error),
  // and a transfer already under way with a peer that is unreachable cannot
  // be cancelled: closing the endpoints at once ends those too, so the op
  // returns without waiting on a gone peer and nothing lands in its buffers
  // afterwards.
  if (faulted_) closeEndpoints(/*force=*/true);
  // Sends are released at once: UCX only reads their buffers, and one to a
  // dead peer over an endpoint without error handling (UCX_TLS=sm) never
  // completes. Receives are waited for (bounded): UCX may write theirs.
  const Deadline until = Deadline::afterMs(kQuiesceMs);
  for (size_t i = 0; i < opCount_; ++i) {
    const bool send = ops_[i].transfer->isSend;
    for (void** req : {&ops_[i].headerReq, &ops_[i].payloadReq}) {
      while (!send && settle(*req) == UCS_INPROGRESS && !until.expired()) progressAll();
      if (send) settle(*req);
      if (*req != nullptr) {  // UCX would not let go in time: released to it, never touched again here
        api_.requestFree(*req);
        *req = nullptr;
      }
    }
  }
}

std::optional<FrameHeader> UcxTransport::unreceived(int peer) {
  auto& stashed = stash_[static_cast<size_t>(peer)];
  if (stashed.empty()) {
    progressAll();
    ucp_tag_recv_info_t info{};
    ucp_tag_message_h msg = api_.tagProbeNb(worker_, headerTag(peer), kFullMask, 1, &info);
    if (msg == nullptr) return std::nullopt;
    std::vector<uint8_t> bytes(info.length);
    ucp_request_param_t param = receiveParam(info, ucp_dt_make_contig(1));
    void* req = api_.tagMsgRecvNbx(worker_, bytes.data(), bytes.size(), msg, &param);
    const Deadline until = Deadline::afterMs(kQuiesceMs);
    ucs_status_t s;
    while ((s = settle(req)) == UCS_INPROGRESS && !until.expired()) progressAll();
    if (s != UCS_OK || bytes.size() < kHeaderBytes) return std::nullopt;
    stashed.push_back(std::move(bytes));
  }
  FrameHeader h;
  std::memcpy(&h, stashed.front().data(), kHeaderBytes);
  return h;
}

std::unique_ptr<RmaRegion> UcxTransport::registerMemory(void* base, size_t bytes) {
  ucp_mem_map_params_t mp{};
  mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  mp.address = base;
  mp.length = bytes;
  ucp_mem_h memh = nullptr;
  const auto raise = [&](const char* what, ucs_status_t status) {
    ErrorBuilder(Errc::NetUcx)
        .rank(rank_, nranks_)
        .op("window")
        .cause(what, " ", bytes, " bytes at ", base, " for one-sided access: UCX says \"", api_.statusString(status),
               "\"")
        .raise();
  };
  if (ucs_status_t st = api_.memMap(context_, &mp, &memh); st != UCS_OK) raise("registering", st);
  void* packed = nullptr;
  size_t packedBytes = 0;
  if (ucs_status_t st = api_.rkeyPack(context_, memh, &packed, &packedBytes); st != UCS_OK) {
    api_.memUnmap(context_, memh);
    raise("packing the remote key of", st);
  }
  std::vector<uint8_t> key(static_cast<uint8_t*>(packed), static_cast<uint8_t*>(packed) + packedBytes);
  api_.rkeyBufferRelease(packed);
  return std::make_unique<Region>(api_, context_, memh, reinterpret_cast<uint64_t>(base), bytes, std::move(key));
}

std::unique_ptr<RmaTarget> UcxTransport::attach(int peer, uint64_t address, size_t bytes,
                                                std::span<const uint8_t> packedKey) {
  ucp_rkey_h rkey = nullptr;
  if (peer != rank_) {
    ucp_ep_h ep = eps_[static_cast<size_t>(peer)];
    const ucs_status_t st = ep == nullptr ? UCS_ERR_NOT_CONNECTED : api_.epRkeyUnpack(ep, packedKey.data(), &rkey);
    if (st != UCS_OK) {
      ErrorBuilder(Errc::NetUcx)
          .rank(rank_, nranks_)
          .op("window")
          .peer(peer)
          .cause("attaching rank ", peer, "'s window (", bytes, " bytes): UCX says \"", api_.statusString(st), "\"")
          .raise();
    }
  }
  return std::make_unique<Target>(api_, peer, address, bytes, rkey);
}

void UcxTransport::startRma(Target& target, void* req) {
  if (req == nullptr) return;  // complete already
  rmaRequests_.push_back({req, target.peer()});
}

void UcxTransport::put(RmaTarget& target, size_t offset, const void* source, size_t bytes) {
  auto& t = static_cast<Target&>(target);
  if (t.rkey() == nullptr) {  // this rank's own window
    std::memcpy(reinterpret_cast<void*>(t.address() + offset), source, bytes);
    return;
  }
  ucp_request_param_t param{};
  startRma(t, api_.putNbx(eps_[static_cast<size_t>(t.peer())], source, bytes, t.address() + offset, t.rkey(), &param));
}

void UcxTransport::get(RmaTarget& target, size_t offset, void* destination, size_t bytes) {
  auto& t = static_cast<Target&>(target);
  if (t.rkey() == nullptr) {
    std::memcpy(destination, reinterpret_cast<const void*>(t.address() + offset), bytes);
    return;
  }
  ucp_request_param_t param{};
  startRma(
      t, api_.getNbx(eps_[static_cast<size_t>(t.peer())], destination, bytes, t.address() + offset, t.rkey(), &param));
}

int UcxTransport::rmaPass(ExchangeFault& fault) {
  for (size_t i = 0; i < rmaRequests_.size();) {
    RmaRequest& r = rmaRequests_[i];
    const ucs_status_t st = settle(r.req);
    if (st == UCS_INPROGRESS) {
      if (slots_[static_cast<size_t>(r.peer)].failed != UCS_OK) {
        lostPeer(r.peer, slots_[static_cast<size_t>(r.peer)].failed, fault);
        return -1;
      }
      ++i;
      continue;
    }
    if (st != UCS_OK) {
      lostPeer(r.peer, st, fault);
      return -1;
    }
    rmaRequests_[i] = rmaRequests_.back();
    rmaRequests_.pop_back();
  }
  if (!rmaRequests_.empty()) return 0;
  // A put is complete for UCX once its source may be reused; the flush
  // waits until it is in the target's memory.
  if (!rmaFlushPosted_) {
    ucp_request_param_t param{};
    rmaFlushReq_ = api_.workerFlushNbx(worker_, &param);
    rmaFlushPosted_ = true;
  }
  const ucs_status_t st = settle(rmaFlushReq_);
  if (st == UCS_INPROGRESS) return 0;
  rmaFlushPosted_ = false;
  if (st != UCS_OK) {
    fault.kind = ExchangeFault::Kind::IoError;
    fault.err = EIO;
    fault.ioErrc = Errc::NetUcx;
    fault.detail = cat("flushing one-sided accesses: UCX says \"", api_.statusString(st), "\"");
    return -1;
  }
  return 1;
}

ExchangeFault UcxTransport::flush(Deadline deadline, LivenessWatch& watch) {
  ExchangeFault fault = waitFor([this](ExchangeFault& f) { return rmaPass(f); },
                                [this](int peer) {
                                  for (const RmaRequest& r : rmaRequests_) {
                                    if (r.peer == peer) return true;
                                  }
                                  return false;
                                },
                                deadline, watch, nullptr);
  if (fault.kind != ExchangeFault::Kind::None) {
    // Puts and gets cannot be cancelled: the endpoints close at once, which
    // ends them, and the communicator keeps the error.
    faulted_ = true;
    closeEndpoints(/*force=*/true);
    const Deadline until = Deadline::afterMs(kQuiesceMs);
    for (RmaRequest& r : rmaRequests_) {
      while (settle(r.req) == UCS_INPROGRESS && !until.expired()) progressAll();
      if (r.req != nullptr) api_.requestFree(r.req);
    }
    rmaRequests_.clear();
    if (rmaFlushReq_ != nullptr && !UCS_PTR_IS_ERR(rmaFlushReq_)) api_.requestFree(rmaFlushReq_);
    rmaFlushReq_ = nullptr;
    rmaFlushPosted_ = false;
  }
  return fault;
}

}  // namespace

bool ucxAvailable(std::string* why) {
  return ucx::load(why) != nullptr;
}

namespace {

std::vector<std::string> entriesOf(const std::string& path) {
  std::vector<std::string> names;
  DIR* dir = ::opendir(path.c_str());
  if (dir == nullptr) return names;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') names.emplace_back(e->d_name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::vector<std::string> rdmaPorts() {
  std::vector<std::string> ports;
  for (const std::string& device : entriesOf("/sys/class/infiniband")) {
    for (const std::string& port : entriesOf("/sys/class/infiniband/" + device + "/ports")) {
      ports.push_back(device + ":" + port);
    }
  }
  return ports;
}

bool rdmaDevicePresent() {
  return !entriesOf("/sys/class/infiniband").empty();
}

bool sharedMemoryTls(const char* tls) {
  if (tls == nullptr || *tls == '\0' || *tls == '^') return false;
  static const std::set<std::string> kSharedMemory = {"sm", "shm", "posix", "sysv", "cma", "knem", "xpmem", "self"};
  std::string list = tls;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t comma = std::min(list.find(',', start), list.size());
    if (!kSharedMemory.contains(list.substr(start, comma - start))) return false;
    start = comma + 1;
  }
  return true;
}

std::string ucxNetDevices(const std::string& ifnameSpec, const std::vector<std::string>& rdmaPorts) {
  if (ifnameSpec.empty() || ifnameSpec[0] == '^') return {};
  std::string devices = ifnameSpec;
  for (const std::string& port : rdmaPorts) devices += "," + port;
  return devices;
}

std::unique_ptr<Transport> connectUcx(TransportSetup& setup) {
  std::string why;
  const ucx::Api* api = ucx::load(&why);
  if (api == nullptr) {
    ErrorBuilder(Errc::NetUcx)
        .rank(setup.rank, setup.nranks)
        .op("init")
        .cause("VIGIL_TRANSPORT=ucx, but ", why)
        .raise();
  }
  auto transport = std::make_unique<UcxTransport>(*api, setup.rank, setup.nranks);
  transport->open(setup);
  return transport;
}

}  // namespace vigil
