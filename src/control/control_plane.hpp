#pragma once
// The control plane: one connection to every peer, kept open for the life of
// the communicator and served by one thread. It is how a rank learns, within
// milliseconds, that a peer left (goodbye), died (connection closed without
// goodbye: crash, kill -9, exit) or failed (its error notice), and how
// finalize agrees that everyone is done. Data never travels here, so control
// messages are never stuck behind a large transfer.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/deadline.hpp"
#include "core/errors.hpp"
#include "net/event_fd.hpp"
#include "net/fd.hpp"
#include "net/framed_reader.hpp"
#include "transport/frame.hpp"
#include "vigil/vigil.h"

namespace vigil {

// ProcessExit: the process ended normally without destroying the
// communicator; ProcessError: it is ending because of an uncaught error (a
// binding's exception), whose text the goodbye carries.
enum class ByeReason : uint8_t { Destroy = 1, Finalize = 2, ProcessExit = 3, Abort = 4, ProcessError = 5 };
const char* describe(ByeReason reason);

struct PeerState {
  enum class Status : uint8_t { Alive, Left, Died, Failed };
  Status status = Status::Alive;
  ByeReason byeReason = ByeReason::Destroy;
  int64_t lastSeq = -1;  // last collective it completed (from its goodbye or finalize)
  // Alive, but waiting in vigilCommFinalize after collective lastSeq: it
  // will run no other operation, so a later collective cannot complete.
  bool finalizing = false;
  // The vigil error it had failed with before leaving, if any (fields, as it raised it).
  std::optional<Error> byeError;
  // For ByeReason::ProcessError: its program's uncaught error, as the program
  // described it (not a vigil error).
  std::string processError;
  std::optional<Error> failure;  // for Failed: the error the peer reported
  Clock::time_point since{};

  // It left quoting a vigil failure: a bystander, not a root cause (an
  // uncaught error of its own program is no vigil failure).
  bool leftBecauseOfAnother() const { return status == Status::Left && byeError.has_value(); }
};

// Called on the control thread when this rank's fingerprint of a collective
// and its left neighbour's differ (mine, theirs).
// What a rank says about its progress when a peer's operation timed out.
struct ProgressReport {
  int64_t lastCompletedSeq = 0;
  int64_t currentSeq = -1;  // the collective in progress, -1 if none
  uint8_t currentOp = 0;    // OpKind of it
};
using ProgressFn = std::function<ProgressReport()>;

using FingerprintMismatchFn = std::function<void(const FrameHeader& mine, const FrameHeader& theirs)>;

class ControlPlane {
 public:
  ControlPlane(int rank, int nranks, std::vector<Fd> fds);
  ~ControlPlane();
  ControlPlane(const ControlPlane&) = delete;
  ControlPlane& operator=(const ControlPlane&) = delete;

  // Init: every rank says Ready on every control connection and waits for
  // everyone's Ready, so init succeeds on all ranks or on none. Returns the
  // ranks that did not confirm (empty = all did).
  std::vector<int> handshake(Deadline deadline);
  void start();
  // Joins the thread; idempotent. Sockets stay open until destruction.
  void stop();

  // Best-effort notices to every live peer, bounded by a short deadline.
  // `cause`: the vigil error this rank failed with, if any; `processError`:
  // for ByeReason::ProcessError without one, the program's uncaught error.
  void sendBye(ByeReason reason, int64_t lastSeq, const std::optional<Error>& cause = std::nullopt,
               const std::string& processError = {});
  void broadcastFailure(const Error& error);

  // Fingerprints, compared with the neighbours in parallel with the data
  // path, at no cost on the fast path: each rank records which collective it
  // runs as seq N; a rank asks its left neighbour for its record only when
  // the data path cannot prove agreement (it received nothing from that
  // neighbour in the op, or the op stalls). The answer is compared on
  // arrival. This catches ranks in different collectives even when no data
  // message would ever reach the other (reduce_scatter on one rank, gather
  // on another; two "roots").
  void setFingerprintMismatchHandler(FingerprintMismatchFn fn) { onFingerprintMismatch_ = std::move(fn); }
  // Records this rank's fingerprint for its seq (and answers a query that
  // was waiting for it).
  void recordFingerprint(const FrameHeader& mine);
  // Sends this rank's fingerprint to its right neighbour unasked: an op
  // that sent it no data message ends with this, so that the neighbour
  // confirms the op without a round trip, even if this rank stops at once.
  void pushFingerprint(const FrameHeader& mine) { sendFingerprint(mine); }
  // Asks the left neighbour for its fingerprint of `seq` (answered at once,
  // or when it reaches that seq).
  void queryLeftFingerprint(uint64_t seq);
  // Waits for the left neighbour's fingerprint of `seq`. Returns it, or
  // nothing when the deadline passed or the communicator was poisoned.
  std::optional<FrameHeader> waitLeftFingerprint(uint64_t seq, Deadline deadline) const;

  // Hang diagnosis: asks `peers` where they are; the control thread of
  // each answers from the provider, even while its rank is stuck in an op.
  // A peer that does not answer by the deadline (SIGSTOP, hung process) has
  // no report.
  void setProgressProvider(ProgressFn fn) { progress_ = std::move(fn); }
  // Called after fatalFd or peerChangeFd was signalled, for a data path
  // whose waits cannot poll those fds (shared memory). Set before start().
  void setWakeHook(std::function<void()> fn) { wake_ = std::move(fn); }
  std::vector<std::optional<ProgressReport>> queryProgress(const std::vector<int>& peers, Deadline deadline);

  // Collective: returns the ranks that did not confirm before the deadline
  // (they left, died or are stuck), empty when everyone finalized.
  // `lastSeq`: the last collective this rank completed, told to the peers
  // (one still in a later collective fails at once instead of waiting).
  std::vector<int> finalize(Deadline deadline, int64_t lastSeq);

  // Readable once the communicator is poisoned (local abort, a peer's
  // failure notice). Never cleared.
  int fatalFd() const { return fatal_.fd(); }
  void poison();
  // Readable after any peer's state changed; the reader clears it.
  int peerChangeFd() const { return peerChange_.fd(); }
  void clearPeerChange() const { peerChange_.clear(); }

  // Extra event fds signalled on every peer change and on poison, for a
  // wait outside the communicator's operations (a split's connections).
  void addWatcher(const EventFd* fd);
  void removeWatcher(const EventFd* fd);
  bool poisoned() const {
    std::lock_guard lock(mutex_);
    return poisoned_;
  }

  PeerState peer(int rank) const;
  // Waits until the control plane has a verdict on `rank` (not Alive).
  PeerState waitVerdict(int rank, Deadline deadline) const;
  // Waits until some peer is gone for a reason of its own (died, failed, or
  // left without quoting another rank's failure). Returns whether one is.
  bool waitRootCause(Deadline deadline) const;
  // The first failure notice received from any peer, with its sender.
  std::optional<std::pair<int, PeerState>> firstFailure() const;
  // Peers that are no longer alive or are finalizing, the earliest to go
  // first (the likely root cause).
  std::vector<int> peersNotAlive() const;
  // Whether every peer is still alive and not finalizing: one atomic load,
  // for the start of every op.
  bool allPeersAlive() const { return !anyNotAlive_.load(std::memory_order_acquire); }

 private:
  void run();
  void onReadable(int peer);
  void onMessage(int peer, const uint8_t* data, size_t size);
  // One handler per control message that carries more than a flag; each reads its fields
  // from `r` (a malformed message throws WireFormatError, which onMessage logs).
  void onFinalizeReady(int peer, WireReader& r);
  void onBye(int peer, WireReader& r);
  void onFingerprint(int peer, WireReader& r);
  void onFingerprintQuery(int peer, WireReader& r);
  void onProgressQuery(int peer, WireReader& r);
  void onProgressReply(int peer, WireReader& r);
  void setState(int peer, PeerState::Status status, const PeerState* details);
  void flushSignals();
  void signalWatchers();
  bool sendTo(int peer, const std::vector<uint8_t>& frame, Deadline deadline);  // a FrameWriter::frame()
  void sendFingerprint(const FrameHeader& mine);                                // to the right neighbour

  const int rank_;
  const int nranks_;
  std::vector<Fd> fds_;
  std::vector<FramedReader> readers_;  // the message being read, per peer
  std::vector<uint8_t> eof_;           // connection closed by the peer (thread-owned)
  bool pendingFatal_ = false;          // signals owed at the end of this poll round
  bool pendingPeerChange_ = false;
  EventFd stop_;
  EventFd fatal_;
  EventFd peerChange_;
  std::thread thread_;
  std::mutex sendMutex_;

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<PeerState> peers_;
  std::vector<uint8_t> readyFrom_;
  std::vector<uint8_t> finalizeFrom_;
  std::optional<int> firstFailed_;
  bool poisoned_ = false;
  // Recent fingerprints by seq % kFingerprintSlots: this rank's and its left neighbour's.
  static constexpr size_t kFingerprintSlots = 256;
  std::vector<FrameHeader> ownFingerprints_;
  std::vector<FrameHeader> leftFingerprints_;
  FingerprintMismatchFn onFingerprintMismatch_;
  int64_t pendingQuerySeq_ = -1;  // the right neighbour waits for our fingerprint of this seq
  ProgressFn progress_;
  std::function<void()> wake_;
  std::vector<const EventFd*> watchers_;  // guarded by mutex_
  std::atomic<bool> anyNotAlive_{false};
  uint64_t queryRound_ = 0;                                           // guarded by mutex_
  std::vector<std::pair<uint64_t, ProgressReport>> progressReplies_;  // per peer: round, report
};

}  // namespace vigil
