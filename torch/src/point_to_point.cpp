#include "point_to_point.hpp"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace vigil::torchpg {
namespace {

std::string firstLine(const std::string& text) {
  return text.substr(0, text.find('\n'));
}

}  // namespace

PointToPoint::PointToPoint(c10::intrusive_ptr<c10d::Store> store, std::string keyPrefix, std::string commName, int rank,
                           int timeoutMs)
    : store_(std::move(store)),
      keyPrefix_(std::move(keyPrefix)),
      commName_(std::move(commName)),
      rank_(rank),
      timeoutMs_(timeoutMs),
      storeTimeout_(store_->getTimeout()) {
  c10::intrusive_ptr<c10d::Store> inner = store_;
  while (auto* prefixed = dynamic_cast<c10d::PrefixStore*>(inner.get())) inner = prefixed->getUnderlyingStore();
  if (auto* tcp = dynamic_cast<c10d::TCPStore*>(inner.get())) {
    tcpStoreAddress_.emplace(tcp->getHost(), tcp->getPort());
  }
}

PointToPoint::~PointToPoint() {
  std::lock_guard lock(mutex_);
  channels_.clear();  // each drains its queue, then leaves its communicator
}

PointToPoint::Channel& PointToPoint::channel(int peer, Direction direction) {
  std::lock_guard lock(mutex_);
  std::unique_ptr<Channel>& slot = channels_[{peer, direction}];
  if (!slot) slot = std::make_unique<Channel>(*this, peer, direction);
  return *slot;
}

PointToPoint::Channel::Channel(const PointToPoint& owner, int peer, Direction direction)
    : owner_(owner),
      peer_(peer),
      direction_(direction),
      queue_("the queue of this rank's " + std::string(direction == Direction::Send ? "sends to" : "receives from") +
                 " rank " + std::to_string(peer),
             std::chrono::milliseconds(owner.timeoutMs_)) {
  const int src = direction == Direction::Send ? owner.rank_ : peer;
  const int dst = direction == Direction::Send ? peer : owner.rank_;
  commName_ = owner.commName_ + "/p2p" + std::to_string(src) + "to" + std::to_string(dst);
}

std::string PointToPoint::Channel::storeKey() const {
  const int src = direction_ == Direction::Send ? owner_.rank_ : peer_;
  const int dst = direction_ == Direction::Send ? peer_ : owner_.rank_;
  return owner_.keyPrefix_ + "/p2p/" + std::to_string(src) + "-" + std::to_string(dst);
}

c10::intrusive_ptr<c10d::Store> PointToPoint::Channel::rendezvousStore() const {
  if (!owner_.tcpStoreAddress_) return owner_.store_;
  c10d::TCPStoreOptions options;
  options.port = owner_.tcpStoreAddress_->second;
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = owner_.storeTimeout_;
  return c10::make_intrusive<c10d::TCPStore>(owner_.tcpStoreAddress_->first, options);
}

void PointToPoint::Channel::abort() const {
  // A handle stays valid after an abort or destroy: a second one only fails.
  if (vigilComm_t comm = connected_.load()) vigilCommAbortWithReason(comm, kInterruptedReason);
}

vigilComm_t PointToPoint::Channel::comm(const OpSite& site) {
  if (comm_) return comm_->get();
  if (connectError_) std::rethrow_exception(connectError_);
  try {
    c10::intrusive_ptr<c10d::Store> store = rendezvousStore();
    vigil::RootInfo root;
    if (direction_ == Direction::Send) {
      root = vigil::RootInfo::create();
      const std::string text = root.toString();
      store->set(storeKey(), std::vector<uint8_t>(text.begin(), text.end()));
    } else {
      std::vector<uint8_t> text;
      try {
        text = store->get(storeKey());
      } catch (const std::exception& e) {
        raise(site, ids::OpTimeout,
              "rank " + std::to_string(peer_) + " posted no send to this rank within the store's timeout (" +
                  std::to_string(owner_.storeTimeout_.count()) + " ms; the store said: " + firstLine(e.what()) + ")",
              "make rank " + std::to_string(peer_) + " send what this rank receives, in the same order");
      }
      root = vigil::RootInfo::fromString(std::string(text.begin(), text.end()));
    }
    vigilConfig config = VIGIL_CONFIG_INIT;
    config.timeoutMs = owner_.timeoutMs_;
    // Part of the first operation: the peer has the group's timeout to post its side.
    config.connectTimeoutMs = owner_.timeoutMs_;
    config.commName = commName_.c_str();
    config.timeoutName = kTimeoutName;
    // Errors name the channel's two ranks as the group's: "rank 0 (rank 2 of 'torch-...')".
    const int sender = direction_ == Direction::Send ? owner_.rank_ : peer_;
    const int receiver = direction_ == Direction::Send ? peer_ : owner_.rank_;
    const int groupRanks[2] = {sender, receiver};
    config.groupName = owner_.commName_.c_str();
    config.groupRanks = groupRanks;
    comm_.emplace(2, root, direction_ == Direction::Send ? 0 : 1, &config);
    connected_.store(comm_->get());
  } catch (...) {
    connectError_ = std::current_exception();
    throw;
  }
  return comm_->get();
}

}  // namespace vigil::torchpg
