// One-sided access windows (comm/rma_window.hpp).
#include <cstring>

#include "comm/communicator.hpp"
#include "comm/rma_window.hpp"

namespace vigil {

namespace {

// What every rank all-gathers about its part of a window.
struct WindowRecord {
  uint64_t address;
  uint64_t bytes;
  uint64_t keyBytes;
};

}  // namespace

RmaWindow::RmaWindow(Communicator& comm, RmaDomain& domain, std::unique_ptr<RmaRegion> mine,
                     std::vector<std::unique_ptr<RmaTarget>> targets)
    : comm_(comm), domain_(domain), mine_(std::move(mine)), targets_(std::move(targets)) {}

void RmaWindow::check(const char* what, int rank, size_t offset, size_t bytes) const {
  const int n = static_cast<int>(targets_.size());
  if (rank < 0 || rank >= n) {
    comm_.error(Errc::ApiBadRank).op(what).cause("rank ", rank, " is not in [0, ", n, ")").raise();
  }
  const size_t limit = targets_[static_cast<size_t>(rank)]->bytes();
  if (offset > limit || bytes > limit - offset) {
    comm_.error(Errc::ApiRmaOutOfWindow)
        .op(what)
        .peer(rank)
        .cause("bytes [", offset, ", ", offset + bytes, ") of rank ", rank, "'s window, which holds ", limit, " bytes")
        .raise();
  }
}

void RmaWindow::put(int rank, size_t offset, const void* source, size_t bytes) {
  check("window put", rank, offset, bytes);
  if (bytes > 0) domain_.put(*targets_[static_cast<size_t>(rank)], offset, source, bytes);
}

void RmaWindow::get(int rank, size_t offset, void* destination, size_t bytes) {
  check("window get", rank, offset, bytes);
  if (bytes > 0) domain_.get(*targets_[static_cast<size_t>(rank)], offset, destination, bytes);
}

void RmaWindow::signal(int rank, size_t offset, uint64_t value, bool add) {
  check("window signal", rank, offset, sizeof(uint64_t));
  domain_.signal(*targets_[static_cast<size_t>(rank)], offset, value, add);
}

void RmaWindow::flush(const char* label) {
  comm_.flushRma(label, /*remote=*/true);
}

void RmaWindow::complete(const char* label) {
  comm_.flushRma(label, /*remote=*/false);
}

bool RmaWindow::progress(int waitMs) {
  return comm_.progressRma(waitMs);
}

std::unique_ptr<RmaWindow> Communicator::createWindow(void* base, size_t bytes) {
  checkUsable();
  RmaDomain* domain = transport_->rma();
  if (domain == nullptr) {
    error(Errc::NetNoRma)
        .op("window")
        .cause("communicator '", name_, "' runs over ", transport_->name(),
               ", which has no one-sided access (one-sided windows need VIGIL_TRANSPORT=ucx)")
        .raise();
  }
  std::unique_ptr<RmaRegion> mine = domain->registerMemory(base, bytes);
  // Each rank's address, size and key length, then the keys (padded to the longest).
  const WindowRecord record{mine->address(), mine->bytes(), mine->packedKey().size()};
  std::vector<WindowRecord> records(static_cast<size_t>(nranks_));
  run(OpDesc{.kind = OpKind::AllGather,
             .send = &record,
             .recv = records.data(),
             .count = sizeof(WindowRecord),
             .dtype = vigilUint8});
  size_t keyBytes = 0;
  for (const WindowRecord& r : records) keyBytes = std::max<size_t>(keyBytes, r.keyBytes);
  std::vector<uint8_t> key(keyBytes), keys(keyBytes * static_cast<size_t>(nranks_));
  std::memcpy(key.data(), mine->packedKey().data(), mine->packedKey().size());
  if (keyBytes > 0) {
    run(OpDesc{
        .kind = OpKind::AllGather, .send = key.data(), .recv = keys.data(), .count = keyBytes, .dtype = vigilUint8});
  }
  std::vector<std::unique_ptr<RmaTarget>> targets;
  for (int r = 0; r < nranks_; ++r) {
    const WindowRecord& w = records[static_cast<size_t>(r)];
    targets.push_back(domain->attach(
        r, w.address, w.bytes, std::span<const uint8_t>(keys.data() + keyBytes * static_cast<size_t>(r), w.keyBytes)));
  }
  return std::make_unique<RmaWindow>(*this, *domain, std::move(mine), std::move(targets));
}

bool Communicator::progressRma(int waitMs) {
  std::unique_lock lock(opMutex_, std::try_to_lock);
  if (!lock.owns_lock() || state_.load() != State::Active) return false;
  const int wake[2] = {stopFd(), peerEventFd()};
  transport_->rma()->progress(waitMs, wake);
  return true;
}

void Communicator::flushRma(const char* label, bool remote) {
  std::lock_guard lock(opMutex_);
  checkUsable();
  beginOp(FrameHeader{}, label, /*watchPeers=*/true);
  ExchangeFault fault = transport_->rma()->flush(op_.deadline, *this, remote);
  if (fault.kind != ExchangeFault::Kind::None) failOp(fault);
}

}  // namespace vigil
