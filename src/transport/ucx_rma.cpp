// The ucx transport's one-sided access (Capability::Rma): UCP memory
// mapping, packed remote keys, put/get and worker flushes.
#include <poll.h>

#include <atomic>
#include <cstring>

#include "transport/ucx_internal.hpp"

namespace vigil::ucx {

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

void UcxTransport::signal(RmaTarget& target, size_t offset, uint64_t value, bool add) {
  auto& t = static_cast<Target&>(target);
  if (t.rkey() == nullptr) {
    std::atomic_ref<uint64_t> word(*reinterpret_cast<uint64_t*>(t.address() + offset));
    if (add) {
      word.fetch_add(value, std::memory_order_seq_cst);
    } else {
      word.store(value, std::memory_order_seq_cst);
    }
    return;
  }
  ucp_ep_h ep = eps_[static_cast<size_t>(t.peer())];
  // The operand must stay valid until its request completes (the next flush).
  const uint64_t* operand = &signalValues_.emplace_back(value);
  ucp_request_param_t param{};
  if (!add) {
    startRma(t, api_.putNbx(ep, operand, sizeof(uint64_t), t.address() + offset, t.rkey(), &param));
    return;
  }
  param.op_attr_mask = UCP_OP_ATTR_FIELD_DATATYPE;
  param.datatype = ucp_dt_make_contig(sizeof(uint64_t));
  startRma(t, api_.atomicOpNbx(ep, UCP_ATOMIC_OP_ADD, operand, 1, t.address() + offset, t.rkey(), &param));
}

void UcxTransport::fence() {
  if (const ucs_status_t st = api_.workerFence(worker_); st != UCS_OK) {
    ErrorBuilder(Errc::NetUcx)
        .rank(rank_, nranks_)
        .op("window fence")
        .cause("ordering one-sided accesses: UCX says \"", api_.statusString(st), "\"")
        .raise();
  }
}

void UcxTransport::progress(int waitMs, std::span<const int> wakeFds) {
  if (api_.workerProgress(worker_) != 0) {
    progressAll();
    return;
  }
  if (waitMs <= 0) return;
  // Nothing moved: sleep until the worker has events, a wake fd fires, or
  // the time is up. Busy (events came in since the progress): no sleep.
  const ucs_status_t armed = api_.workerArm(worker_);
  if (armed != UCS_ERR_BUSY) {
    pollfd pfds[4];
    nfds_t n = 0;
    if (armed == UCS_OK) pfds[n++] = {efd_, POLLIN, 0};  // else (a failed arm): sleep on the others alone
    for (int fd : wakeFds) {
      if (fd >= 0 && n < 4) pfds[n++] = {fd, POLLIN, 0};
    }
    ::poll(pfds, n, waitMs);
  }
  progressAll();
}

int UcxTransport::rmaPass(ExchangeFault& fault, bool remote) {
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
  signalValues_.clear();  // every signal's operand was sent
  if (!remote) return 1;
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
    failed(fault, "flushing one-sided accesses", st);
    return -1;
  }
  return 1;
}

ExchangeFault UcxTransport::flush(Deadline deadline, LivenessWatch& watch, bool remote) {
  ExchangeFault fault = waitFor([this, remote](ExchangeFault& f) { return rmaPass(f, remote); },
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
    signalValues_.clear();
    if (rmaFlushReq_ != nullptr && !UCS_PTR_IS_ERR(rmaFlushReq_)) api_.requestFree(rmaFlushReq_);
    rmaFlushReq_ = nullptr;
    rmaFlushPosted_ = false;
  }
  return fault;
}

}  // namespace vigil::ucx
