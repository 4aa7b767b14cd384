#pragma once
// The transport interface: how the bytes of an algorithm step travel
// between the ranks of a communicator. A transport is one row of the
// transport table (transport.cpp): its name, its capabilities, whether it
// reaches a given set of ranks, and how it connects them. The algorithms
// never see a transport: they hand a step's transfers to their StepRunner,
// which hands them to the communicator's transport; rows of the algorithm
// table that need more than messages (loads and stores into the peers'
// memory) ask for that capability, never for a transport by name.
//
// Every transport moves framed messages (the 40-byte FrameHeader, checked
// before a payload byte lands), each one buffer or a list of pieces; every
// send and receive of a step progresses at once, in the calling thread,
// asleep when nothing can move (never spinning for long). Messages to or
// from the same peer keep their order. A wait ends when all are done, at
// the deadline, when the communicator is aborted, or when a peer goes away.

#include <poll.h>
#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bootstrap/rendezvous.hpp"
#include "core/config.hpp"
#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "net/fd.hpp"
#include "transport/frame.hpp"

namespace vigil {

// One piece of a payload that is not contiguous in memory.
class Transport;

struct IoSegment {
  void* data = nullptr;
  size_t bytes = 0;
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
    Woken,  // awaitIncoming: the watch's wake fd fired (nothing failed)
  } kind = Kind::None;
  int peer = -1;
  FrameHeader expected{};  // for HeaderMismatch / Protocol
  FrameHeader received{};
  size_t expectedBytes = 0;
  int err = 0;
  // IoError: its id, and the transport library's own words when it has them
  // (`UCX says "Endpoint timeout"`); empty: errnoText(err) says it.
  Errc ioErrc = Errc::NetSyscall;
  std::string detail;
  struct Pending {
    int peer;
    bool isSend;
    size_t bytesLeft;
  };
  std::vector<Pending> pending;
};

// A receive whose message is not known in advance (tagged point-to-point):
// its header, once judged, decides where the payload lands and how long it
// is. The transports call accept() instead of comparing headers.
class RecvSink {
 public:
  virtual ~RecvSink() = default;
  // `got` has vigil's magic. Sets dest and bytes (the payload's length,
  // got.bytes) and returns true, or fills `fault` and returns false.
  virtual bool accept(const FrameHeader& got, ExchangeFault& fault) = 0;
  // A drain shows each next header here before it takes the message: one
  // it does not want (it belongs to a later operation) stays, and the drain
  // of that peer ends.
  virtual bool wants(const FrameHeader& /*next*/) const { return true; }
  void* dest = nullptr;
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
  // A receive whose header decides its buffer and size (recvData and bytes
  // unused); it takes exactly one message.
  RecvSink* sink = nullptr;
  // With a sink: takes every message of `peer` that starts while the
  // exchange runs (each through the sink, if sink->wants() it), but waits
  // for none. The exchange ends when the other transfers are done and no
  // drained message is half-way in; the next message then stays for a
  // later receive.
  bool drain = false;

  // What a receive's payload is once its header is in (a sink's choice).
  size_t payloadBytes() const { return sink != nullptr ? sink->bytes : bytes; }
  void* payloadDest() const { return sink != nullptr ? sink->dest : recvData; }

  static Transfer send(int peer, const void* data, size_t bytes) {
    Transfer t;
    t.peer = peer;
    t.isSend = true;
    t.sendData = data;
    t.bytes = bytes;
    return t;
  }
  static Transfer recvInto(int peer, RecvSink* sink) {
    Transfer t;
    t.peer = peer;
    t.sink = sink;
    return t;
  }
  static Transfer drainFrom(int peer, RecvSink* sink) {
    Transfer t = recvInto(peer, sink);
    t.drain = true;
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
  // What the transfers did not wait for: the caller's, after the exchange.
  void runRest() {
    while (pending()) runOne();
  }
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
  // Readable when another thread wants the wait back (it posted work):
  // awaitIncoming then returns Kind::Woken; -1 = none. Transports that
  // sleep on something else are woken by wakeWaiters() as well.
  virtual int wakeFd() const { return -1; }
};

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

// awaitIncoming's helpers: whether `peer` is one of `peers`, and a timeout's
// `pending`: a header from each.
bool awaits(std::span<const int> peers, int peer);
// The first of `peers` with a message unreceived() sees, or -1.
int firstWithMessage(Transport& transport, std::span<const int> peers);
void markAwaited(ExchangeFault& fault, std::span<const int> peers);

// Judges an incoming header before any payload lands: fills `fault` and
// returns false when it is not the header `t` expects.
bool acceptHeader(const FrameHeader& got, const Transfer& t, const FrameHeader& base, bool checkFingerprint,
                  ExchangeFault& fault);

// What a transport can do beyond framed messages to every peer.
enum class Capability : uint32_t {
  // A message may be a list of pieces (IoSegment), gathered when sent and
  // scattered when received, without a copy into one buffer.
  GatherScatter = 1u << 0,
  // Every rank can load and store into the others' staging memory
  // (loadStore() is not null): the load/store rows of the algorithm table run.
  LoadStore = 1u << 1,
  // One-sided put/get into registered memory of a peer, without the peer's
  // participation (rma() is not null).
  Rma = 1u << 2,
};
using Capabilities = uint32_t;
constexpr Capabilities operator|(Capability a, Capability b) {
  return static_cast<uint32_t>(a) | static_cast<uint32_t>(b);
}
constexpr bool has(Capabilities caps, Capability c) {
  return (caps & static_cast<uint32_t>(c)) != 0;
}

// The load/store capability: staging memory that every rank maps, and a
// step protocol over it. A rank writes into its own staging buffer, posts
// the next step, waits until every rank posted it, then reads the others'
// buffers in place; a buffer is written again only after every rank posted
// a step past the last one after which it was read.
class LoadStoreDomain {
 public:
  virtual ~LoadStoreDomain() = default;
  // Two staging buffers per rank (`buffer` 0 or 1), each stagingBytes() long.
  virtual uint8_t* staging(int rank, int buffer) const = 0;
  virtual size_t stagingBytes() const = 0;
  // inlineBytes() per rank and buffer that travel with the rank's step
  // counter (one cache-line transfer for flag, digest and data).
  virtual uint8_t* inlineData(int rank, int buffer) const = 0;
  virtual size_t inlineBytes() const = 0;
  // This rank's fingerprint of the collective `h.seq`, before its first post.
  virtual void publishFingerprint(const FrameHeader& h) = 0;
  // Another rank's fingerprint digest and fingerprint for `seq`.
  virtual uint64_t digestOf(int rank, uint64_t seq) const = 0;
  virtual const FrameHeader& fingerprintOf(int rank, uint64_t seq) const = 0;
  // The step numbering and buffer rotation; they advance identically on
  // every rank as long as the ranks run the same operations.
  virtual uint64_t nextStep() = 0;
  virtual int takeBuffer() = 0;
  virtual uint64_t freeAt(int buffer) const = 0;
  virtual void setFreeAt(int buffer, uint64_t step) = 0;
  // Publishes `step` (after this rank's staging writes) and wakes the peers.
  virtual void post(uint64_t step) = 0;
  // Waits until every other rank posted `step` or later; on a timeout the
  // fault's `pending` lists the ranks that had not.
  virtual ExchangeFault waitAll(uint64_t step, Deadline deadline, LivenessWatch& watch) = 0;
};

// The one-sided capability: memory a rank registers for its peers, and puts
// and gets into the peers' registered memory that the peers take no part in.
//
// A rank registers a region and hands its description (address, size and
// packed key) to the peers by other means (the communicator all-gathers
// them); a peer attaches it and then reads and writes it. Puts and gets
// only start; flush() waits until every one this rank started is complete
// at its target (a put's bytes are in the target's memory, a get's in this
// rank's). Until then their source and destination buffers stay the
// caller's to keep.
class RmaRegion {
 public:
  virtual ~RmaRegion() = default;
  virtual uint64_t address() const = 0;
  virtual size_t bytes() const = 0;
  // What a peer needs beside the address and size to reach it.
  virtual std::span<const uint8_t> packedKey() const = 0;
};
class RmaTarget {  // a peer's region, attached
 public:
  virtual ~RmaTarget() = default;
  virtual int peer() const = 0;
  virtual size_t bytes() const = 0;
};
class RmaDomain {
 public:
  virtual ~RmaDomain() = default;
  // Registers [base, base + bytes). Throws vigil::Error (the transport's id).
  virtual std::unique_ptr<RmaRegion> registerMemory(void* base, size_t bytes) = 0;
  // Attaches `peer`'s region from its description. Throws vigil::Error.
  virtual std::unique_ptr<RmaTarget> attach(int peer, uint64_t address, size_t bytes,
                                            std::span<const uint8_t> packedKey) = 0;
  // Start a transfer of `bytes` at `offset` into (put) or out of (get) the
  // target; the caller checked the bounds. A failure to start (a gone peer)
  // is reported by the next flush.
  virtual void put(RmaTarget& target, size_t offset, const void* source, size_t bytes) = 0;
  virtual void get(RmaTarget& target, size_t offset, void* destination, size_t bytes) = 0;
  // Starts the update of the aligned 64-bit word at `offset` of the target:
  // set to `value` (a put) or, with `add`, added to it (a remote atomic).
  virtual void signal(RmaTarget& target, size_t offset, uint64_t value, bool add) = 0;
  // The puts, gets and signals started before it reach their targets before
  // those started after it (ordering, not completion).
  virtual void fence() = 0;
  // Waits until every put, get and signal started since the last flush
  // completed: at their targets (`remote`), or only here (a get's data
  // arrived, a put's source may be reused) - which over UCX's TCP emulation
  // needs no further progress of the target.
  virtual ExchangeFault flush(Deadline deadline, LivenessWatch& watch, bool remote) = 0;
  // Some fabrics (UCX over TCP) carry out an access on its target only while
  // the target progresses: a rank that waits for a peer's put calls this.
  // Returns at once when something progressed, else after up to `waitMs`
  // of waiting for activity or for one of `wakeFds` to become readable (0:
  // no wait).
  virtual void progress(int waitMs, std::span<const int> wakeFds) = 0;
};

// A communicator's connection to its peers over one transport.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual Capabilities capabilities() const = 0;
  // Runs `transfers`, each framed with `header` (its `bytes` is set per
  // transfer; a transfer's own header overrides it). Returns a fault with
  // Kind::None on success. `work`, if any, runs whenever the transfers
  // cannot move.
  virtual ExchangeFault exchange(std::span<const Transfer> transfers, const FrameHeader& header, bool checkFingerprint,
                                 Deadline deadline, LivenessWatch& watch, ExchangeWork* work) = 0;
  // The header of a message from `peer` that arrived and that no receive
  // has taken yet (only between operations); nothing if none is waiting.
  virtual std::optional<FrameHeader> unreceived(int peer) = 0;
  // Waits (between operations) until a message from one of `peers` has
  // arrived that no receive has taken, and sets `from` to that peer (the
  // first such in `peers`' order): unreceived(from) then has its header.
  // On a timeout the fault's `pending` lists every peer as a receive; when
  // the watch's wakeFd() fires first, the fault is Kind::Woken.
  virtual ExchangeFault awaitIncoming(std::span<const int> peers, Deadline deadline, LivenessWatch& watch,
                                      int& from) = 0;
  // Ends the sleep of a rank waiting in exchange() or waitAll() so that it
  // looks at the watch's fatal and peer-change state now (the control
  // thread calls it after signalling them).
  virtual void wakeWaiters() = 0;
  // The communicator was aborted (any thread may call this, once an op may
  // still run): its teardown need not deliver what is still on its way.
  virtual void abandon() = 0;
  // The load/store capability: not null exactly when capabilities() has LoadStore.
  virtual LoadStoreDomain* loadStore() = 0;
  // The one-sided capability: not null exactly when capabilities() has Rma.
  virtual RmaDomain* rma() = 0;
};

// What a transport's connection setup gets: the ranks (from the
// rendezvous), the job token, and the mesh's data connections, which the
// transport keeps (tcp) or uses to agree on its own setup (shm).
struct TransportSetup {
  int rank = 0;
  int nranks = 1;
  const std::vector<PeerInfo>& peers;
  const JobToken& token;
  std::vector<Fd>& dataFds;
  Deadline deadline;
};

// One row of the transport table.
struct TransportRow {
  TransportKind kind = TransportKind::Auto;  // its VIGIL_TRANSPORT word (core/config)
  const char* name = "";
  const char* description = "";
  Capabilities capabilities = 0;
  // Empty when this transport can connect these ranks, else why not.
  std::string (*unreachable)(const TransportSetup& setup) = nullptr;
  // The error when VIGIL_TRANSPORT forces it where it cannot reach the ranks.
  Errc unavailable = Errc::Internal;
  // Whether VIGIL_TRANSPORT=auto takes it (rows are asked in order).
  bool (*autoPicks)(const TransportSetup& setup) = nullptr;
  // autoPicks looks at this host alone (its devices): the ranks vote over
  // their data connections and take it only if every rank says yes.
  bool vote = false;
  // Throws vigil::Error (with the peers named) when the connection fails.
  std::unique_ptr<Transport> (*connect)(TransportSetup& setup) = nullptr;
};

// Every transport, in order of preference for VIGIL_TRANSPORT=auto.
std::span<const TransportRow> transportTable();

// Connects the ranks over `requested` (auto: the first row that picks
// itself, by vote of every rank where the row asks for one). A single rank needs no transport and gets tcp's empty one.
// A forced transport that cannot reach the ranks throws its row's
// `unavailable` id (shm: VG-NET-006) naming why. Every rank decides from the same rendezvous facts, so they agree.
std::unique_ptr<Transport> connectTransport(TransportKind requested, TransportSetup& setup);
}  // namespace vigil
