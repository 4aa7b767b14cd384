#pragma once
// Moves the messages of one algorithm step: every send and receive of the
// step progresses at once over non-blocking sockets, in the calling thread,
// blocked in poll() when nothing can move (never spinning). Messages to or
// from the same peer keep their order. The wait ends when all are done, at
// the deadline, when the communicator is aborted, or when a peer goes away.

#include <poll.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "core/deadline.hpp"
#include "net/fd.hpp"
#include "transport/frame.hpp"

namespace vigil {

// One piece of a payload that is not contiguous in memory.
struct IoSegment {
  void* data = nullptr;
  size_t bytes = 0;
};

struct Transfer {
  int peer = -1;
  bool isSend = false;
  const void* sendData = nullptr;
  void* recvData = nullptr;
  size_t bytes = 0;
  // Overrides the exchange's header (point-to-point batches mix operations).
  const FrameHeader* header = nullptr;
  // When not empty, the payload is these pieces back to back (their sizes
  // sum to `bytes`): gathered when sent, scattered when received. One
  // message instead of one per piece, and no copy into a contiguous buffer.
  std::span<const IoSegment> segments{};
  // A send whose payload is still being produced by the exchange's work
  // (ExchangeWork): it keeps its place in its peer's lane until *ready.
  const bool* ready = nullptr;

  static Transfer send(int peer, const void* data, size_t bytes) {
    Transfer t;
    t.peer = peer;
    t.isSend = true;
    t.sendData = data;
    t.bytes = bytes;
    return t;
  }
  static Transfer recv(int peer, void* data, size_t bytes) {
    Transfer t;
    t.peer = peer;
    t.recvData = data;
    t.bytes = bytes;
    return t;
  }
  bool waiting() const { return ready != nullptr && !*ready; }
};

// Work that an exchange interleaves with its transfers: whenever the
// transfers cannot move, one unit runs (for MoE dispatch: packing the rows
// of the next destination while those of the previous one travel). Each
// unit marks the sends it produced ready; when no unit is pending, every
// send of the exchange must be ready. Units left when the transfers are
// done are the caller's to run.
class ExchangeWork {
 public:
  virtual ~ExchangeWork() = default;
  virtual bool pending() const = 0;
  virtual void runOne() = 0;
};

// Why an exchange stopped early. The communicator turns it into an Error
// with the full story (it knows the op, the peers' states and the remedy).
struct ExchangeFault {
  enum class Kind {
    None,
    TimedOut,        // deadline passed; `pending` lists what was still moving
    Fatal,           // the communicator's fatal event fired (abort, a peer's error notice)
    PeerGone,        // the liveness watcher decided a needed peer is gone
    PeerClosed,      // a peer's data connection closed (EOF, reset) mid-exchange
    HeaderMismatch,  // a peer's frame header is not the one this rank expected
    Protocol,        // bad magic in a frame header
    IoError,
  } kind = Kind::None;
  int peer = -1;
  FrameHeader expected{};  // for HeaderMismatch / Protocol
  FrameHeader received{};
  size_t expectedBytes = 0;
  int err = 0;
  struct Pending {
    int peer;
    bool isSend;
    size_t bytesLeft;
  };
  std::vector<Pending> pending;
};

// Tells an exchange about events outside its sockets.
class LivenessWatch {
 public:
  virtual ~LivenessWatch() = default;
  // Readable forever once the communicator is aborted or poisoned.
  virtual int fatalFd() const = 0;
  // Readable when some peer's state changed; -1 = do not watch (p2p).
  virtual int peerChangeFd() const = 0;
  // Called after peerChangeFd fired. Returns a peer that makes the exchange
  // impossible (>= 0) or -1 to carry on. `directRecvPeers`
  // are peers whose own sockets will tell their fate.
  virtual int checkPeers(std::span<const int> directRecvPeers) = 0;
  // When the exchange has not finished by stallDeadline(), onStall() is
  // called once (the communicator starts its cross-checks then).
  virtual Deadline stallDeadline() const { return Deadline::never(); }
  virtual void onStall() {}
  // Whether `peer` is still there (transports without a connection per
  // peer ask this for point-to-point exchanges).
  virtual bool peerAlive(int /*peer*/) const { return true; }
};

class ShmDataPlane;

// One transfer in flight, for the data planes.
struct ActiveTransfer {
  const Transfer* transfer;
  FrameHeader header;  // outgoing header, or the incoming one being read
  size_t done = 0;     // bytes of header + payload moved so far
  bool finished = false;
  size_t segment = 0;       // the segment holding the payload's next byte
  size_t segmentStart = 0;  // its offset in the payload
};

// The payload of `a` from byte `offset` on (never behind an earlier call's
// offset), as up to `max` contiguous pieces. Returns how many it filled.
size_t payloadPieces(ActiveTransfer& a, size_t offset, iovec* out, size_t max);

// How the bytes of an exchange travel: sockets, or shared memory.
class DataPath {
 public:
  virtual ~DataPath() = default;
  // Runs `transfers`, each framed with `header` (its `bytes` is set per
  // transfer; a transfer's own header overrides it). Returns a fault with
  // Kind::None on success.
  // `work`, if any, runs whenever the transfers cannot move.
  virtual ExchangeFault exchange(std::span<const Transfer> transfers, const FrameHeader& header, bool checkFingerprint,
                                 Deadline deadline, LivenessWatch& watch, ExchangeWork* work) = 0;
  // The header of a message from `peer` that arrived and that no receive
  // has taken yet (only between operations); nothing if none is waiting.
  virtual std::optional<FrameHeader> unreceived(int peer) = 0;
  // The shared-memory plane, for algorithms that use it directly; null otherwise.
  virtual ShmDataPlane* shm() { return nullptr; }
  virtual const char* name() const = 0;
};

// Judges an incoming header before any payload lands: fills `fault` and
// returns false when it is not the header `t` expects.
bool acceptHeader(const FrameHeader& got, const Transfer& t, const FrameHeader& base, bool checkFingerprint,
                  ExchangeFault& fault);

class SocketDataPlane final : public DataPath {
 public:
  explicit SocketDataPlane(std::vector<Fd> dataFds) : fds_(std::move(dataFds)) {}

  ExchangeFault exchange(std::span<const Transfer> transfers, const FrameHeader& header, bool checkFingerprint,
                         Deadline deadline, LivenessWatch& watch, ExchangeWork* work) override;
  std::optional<FrameHeader> unreceived(int peer) override;
  const char* name() const override { return "tcp"; }

 private:
  enum class Pass { AllDone, Waiting, Failed };
  // Moves every transfer whose lane is free as far as its socket allows; collects in
  // pollFds_ what the rest wait for.
  Pass advance(const FrameHeader& header, bool checkFingerprint, ExchangeFault& fault);
  // One poll() over pollFds_, the fatal eventfd and the peer-change eventfd. False with
  // `fault` set when the op must end (failure, a peer gone, the deadline).
  bool await(Deadline deadline, LivenessWatch& watch, bool& stalled, ExchangeFault& fault);

  std::vector<Fd> fds_;
  std::vector<ActiveTransfer> active_;
  std::vector<uint8_t> claimed_;
  std::vector<pollfd> pollFds_;
  std::vector<int> directRecvPeers_;
};

}  // namespace vigil
