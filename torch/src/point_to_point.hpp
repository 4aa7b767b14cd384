#pragma once
// Point-to-point traffic of one process group. Each direction to each peer
// has its own two-rank vigil communicator and worker thread, made on first
// use: a pending receive then never holds up a send (irecv followed by send
// on both ranks completes). Messages carry their tag (vigilSendTag) and a
// receive takes the first message of its peer with its tag (vigilRecvTag:
// recv(tag=2) before recv(tag=1) gets the right messages whatever order they
// were sent in, as in gloo; a message that comes before its receive waits at
// the receiver), and messages with one tag match in the order they were
// issued. Tags are unlimited: a tag costs nothing.
//
// The communicator's root info travels through the c10d store: the sender
// publishes it, the receiver waits for it. A TCPStore holds its connection
// while it waits, so each channel rendezvouses over a connection of its own
// there instead of the group's.

#include <atomic>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <utility>

#include "errors.hpp"
#include "op_queue.hpp"
#include "vigil/vigil.hpp"

namespace vigil::torchpg {

class PointToPoint {
 public:
  enum class Direction { Send, Recv };

  // One peer and direction: its communicator (sender = rank 0, receiver =
  // rank 1) and the queue its operations run on.
  class Channel {
   public:
    Channel(const PointToPoint& owner, int peer, Direction direction);
    // The connected communicator; connects on first use. Call it from jobs
    // on queue() only.
    vigilComm_t comm(const OpSite& site);
    // The other end's rank inside the channel's communicator.
    int peerInChannel() const { return direction_ == Direction::Send ? 1 : 0; }
    OpQueue& queue() { return queue_; }
    // Aborts the communicator, if connected, for Ctrl-C in Work.wait() (any thread).
    void abort() const;

   private:
    std::string storeKey() const;
    c10::intrusive_ptr<c10d::Store> rendezvousStore() const;

    const PointToPoint& owner_;
    int peer_;
    Direction direction_;
    std::string commName_;
    std::optional<vigil::Communicator> comm_;
    std::atomic<vigilComm_t> connected_ = nullptr;  // comm_'s handle, for abort() from other threads
    std::exception_ptr connectError_;               // a failed connect fails every later operation
    OpQueue queue_;                                 // last: drains before the communicator goes
  };

  // `keyPrefix` is unique to the group (its communicator's root info);
  // `timeoutMs` is the group's timeout.
  PointToPoint(c10::intrusive_ptr<c10d::Store> store, std::string keyPrefix, std::string commName, int rank,
               int timeoutMs);
  PointToPoint(const PointToPoint&) = delete;
  PointToPoint& operator=(const PointToPoint&) = delete;
  ~PointToPoint();

  // The channel of a peer and direction.
  Channel& channel(int peer, Direction direction);

 private:
  c10::intrusive_ptr<c10d::Store> store_;
  std::string keyPrefix_;
  std::string commName_;
  int rank_;
  int timeoutMs_;
  // Set when the store is a TCPStore (under prefixes): where to open the
  // channels' own connections.
  std::optional<std::pair<std::string, uint16_t>> tcpStoreAddress_;
  std::chrono::milliseconds storeTimeout_;

  std::mutex mutex_;
  std::map<std::pair<int, Direction>, std::unique_ptr<Channel>> channels_;
};

}  // namespace vigil::torchpg
