#include "transport/ucx_transport.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/config.hpp"
#include "core/log.hpp"
#include "net/event_fd.hpp"
#include "net/socket.hpp"
#include "transport/ucx_internal.hpp"

namespace vigil {

namespace ucx {

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
  // A setting UCX's own variable (UCX_<name>) leaves alone when the user set it.
  const auto adjust = [&](const char* name, const std::string& value, const char* why) {
    const char* own = std::getenv(cat("UCX_", name).c_str());
    if (value.empty() || (own != nullptr && *own != '\0')) return;
    if (ucs_status_t s = api_.configModify(config, name, value.c_str()); s != UCS_OK) {
      api_.configRelease(config);
      fail(cat("setting UCX_", name, "=", value, " (", why, ")"), s);
    }
    VIGIL_LOG_AT(LogLevel::Info, rank_, "ucx: UCX_", name, "=", value, " (", why, ")");
  };
  const std::vector<std::string> ports = rdmaPorts();
  // VIGIL_SOCKET_IFNAME picks UCX's network interfaces too.
  adjust("NET_DEVICES", ucxNetDevices(processConfig().socketIfname, ports), "from VIGIL_SOCKET_IFNAME");
  // Without an RDMA device UCX moves data over tcp, where its default
  // rendezvous (get_zcopy) reads a large message in fragments, each one a
  // request and a reply; put_zcopy streams it (1 MiB sendrecv between two
  // namespace hosts: 0.86 -> 1.88 GB/s).
  if (ports.empty() && !sharedMemoryOnly_) adjust("RNDV_SCHEME", "put_zcopy", "no RDMA device here");
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | UCP_FEATURE_RMA | UCP_FEATURE_AMO64;
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
    ep.err_mode = sharedMemoryOnly_ && sameHost ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
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
  // A sink's size is known only from its header: its payload receive follows it.
  if (t.sink == nullptr && t.bytes > kEagerBytes) postPayloadReceive(op, payloadTag(t.peer, op.header));
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
    op.payloadReq = api_.tagRecvNbx(worker_, t.payloadDest(), t.payloadBytes(), tag, kFullMask, &param);
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
  const size_t bytes = t.payloadBytes();
  if (bytes <= kEagerBytes) {
    if (length != kHeaderBytes + bytes) {
      fault.kind = ExchangeFault::Kind::Protocol;
      fault.peer = t.peer;
      return false;
    }
    // The header is accepted: now the payload may land in the user's memory.
    const uint8_t* from = op.bounce + kHeaderBytes;
    if (t.segments.empty()) {
      if (bytes > 0) std::memcpy(t.payloadDest(), from, bytes);
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
  if (t.sink != nullptr) {
    postPayloadReceive(op, theirs);
  } else if (theirs != op.payloadTag) {
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

void UcxTransport::failed(ExchangeFault& fault, const char* what, ucs_status_t status) const {
  fault.kind = ExchangeFault::Kind::IoError;
  fault.err = EIO;
  fault.ioErrc = Errc::NetUcx;
  fault.detail = cat(what, what[0] != '\0' ? ": " : "", "UCX says \"", api_.statusString(status), "\"");
}

void UcxTransport::lostPeer(int peer, ucs_status_t status, ExchangeFault& fault) const {
  failed(fault, "", status);
  // Over an endpoint without error handling (shared memory), a failed
  // transfer is a peer whose memory went away: judged as a closed peer.
  const bool unhandled = unhandled_[static_cast<size_t>(peer)] != 0;
  if (peerLost(status) || unhandled) fault.kind = ExchangeFault::Kind::PeerClosed;
  fault.peer = peer;
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
    if (t.drain && op.stage == Op::Stage::Unposted && !takeNext(op)) continue;  // waits for none
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
      if (op.payloadInfo.length != t.payloadBytes()) {
        fault.kind = ExchangeFault::Kind::Protocol;
        fault.peer = t.peer;
        return -1;
      }
      op.stage = Op::Stage::Done;
    }
    if (t.drain && op.stage == Op::Stage::Done) op.stage = Op::Stage::Unposted;  // the peer's next message
  }
  if (!allDone) {
    for (size_t i = 0; i < opCount_; ++i) {
      const Op& op = ops_[i];
      if (op.stage != Op::Stage::Done && !(op.transfer->drain && op.stage == Op::Stage::Unposted)) return 0;
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
    failed(fault, "flushing the sends", s);
    return -1;
  }
  sentSinceFlush_ = false;
  return 1;
}

bool UcxTransport::needs(int peer) const {
  for (size_t i = 0; i < opCount_; ++i) {
    const Op& op = ops_[i];
    const bool waiting = op.stage != Op::Stage::Done && !(op.transfer->drain && op.stage == Op::Stage::Unposted);
    if (waiting && op.transfer->peer == peer) return true;
  }
  return false;
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
      // Every receive at once (tag matching keeps each peer's order); a drain
      // takes only what has come (takeNext, in pass()).
      if (!t.drain) postReceive(op);
    }
  }
  ExchangeFault fault = waitFor([&](ExchangeFault& f) { return pass(header, checkFingerprint, f); },
                                [this](int peer) { return needs(peer); }, deadline, watch, work);
  if (fault.kind != ExchangeFault::Kind::None) {
    faulted_ = true;
    if (fault.kind == ExchangeFault::Kind::TimedOut) {
      for (size_t i = 0; i < opCount_; ++i) {
        const Op& op = ops_[i];
        if (op.stage == Op::Stage::Done || (op.transfer->drain && op.stage == Op::Stage::Unposted)) continue;
        const size_t bytes = op.transfer->payloadBytes();
        const size_t left = op.stage == Op::Stage::Payload ? bytes : kHeaderBytes + bytes;
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

}  // namespace ucx

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
  auto transport = std::make_unique<ucx::UcxTransport>(*api, setup.rank, setup.nranks);
  transport->open(setup);
  return transport;
}

}  // namespace vigil
