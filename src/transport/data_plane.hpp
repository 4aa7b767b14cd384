#pragma once
// Moves the messages of one algorithm step: every send and receive of the
// step progresses at once over non-blocking sockets, in the calling thread,
// blocked in poll() when nothing can move (never spinning). Messages to or
// from the same peer keep their order. The wait ends when all are done, at
// the deadline, when the communicator is aborted, or when a peer goes away.

#include <poll.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/deadline.hpp"
#include "net/fd.hpp"
#include "transport/frame.hpp"

namespace vigil {

struct Transfer {
  int peer = -1;
  bool isSend = false;
  const void* sendData = nullptr;
  void* recvData = nullptr;
  size_t bytes = 0;
  // Overrides the exchange's header (point-to-point batches mix operations).
  const FrameHeader* header = nullptr;

  static Transfer send(int peer, const void* data, size_t bytes) { return {peer, true, data, nullptr, bytes, nullptr}; }
  static Transfer recv(int peer, void* data, size_t bytes) { return {peer, false, nullptr, data, bytes, nullptr}; }
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
};

// How the bytes of an exchange travel: sockets, or shared memory.
class DataPath {
 public:
  virtual ~DataPath() = default;
  // Runs `transfers`, each framed with `header` (its `bytes` is set per
  // transfer; a transfer's own header overrides it). Returns a fault with
  // Kind::None on success.
  virtual ExchangeFault exchange(std::span<const Transfer> transfers, const FrameHeader& header, bool checkFingerprint,
                                 Deadline deadline, LivenessWatch& watch) = 0;
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
                         Deadline deadline, LivenessWatch& watch) override;
  const char* name() const override { return "tcp"; }

 private:
  std::vector<Fd> fds_;
  std::vector<ActiveTransfer> active_;
  std::vector<uint8_t> claimed_;
  std::vector<pollfd> pollFds_;
  std::vector<int> directRecvPeers_;
};

}  // namespace vigil
