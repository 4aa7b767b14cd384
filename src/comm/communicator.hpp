#pragma once
// A communicator: one rank's membership in a group of ranks. It owns the
// connections (control plane + data plane), assigns sequence numbers,
// validates operations against the group, runs their algorithms, and turns
// every transport fault into an Error that tells the whole story.
//
// Thread-safety: operations on one communicator are serialised in issue
// order (as with NCCL); abort() may be called from any thread at any time.

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "algo/algo.hpp"
#include "algo/op_desc.hpp"
#include "algo/select.hpp"
#include "bootstrap/mesh.hpp"
#include "bootstrap/rendezvous.hpp"
#include "bootstrap/root_info.hpp"
#include "comm/fault_report.hpp"
#include "comm/flight_recorder.hpp"
#include "comm/op_state.hpp"
#include "comm/request.hpp"
#include "control/control_plane.hpp"
#include "core/config.hpp"
#include "core/errors.hpp"
#include "net/event_fd.hpp"
#include "transport/transport.hpp"

namespace vigil {

class Hierarchy;
class RmaWindow;

// Seams for tests that need a rank to look different (version skew).
struct InitOverrides {
  uint32_t libVersion = VIGIL_VERSION_CODE;
  uint16_t wireVersion = kWireVersion;
  std::string hostId;  // empty: this host's identity
};

// The algorithms reach the shared-memory and hierarchical capabilities
// through algo::requireLoadStore / requireHierarchy (a checked cast, hence the
// public bases); their methods stay private.
class Communicator : public algo::LoadStoreRunner, public algo::HierarchicalRunner, private LivenessWatch {
 public:
  // Collective: rendezvous, connections, handshake. Throws Error.
  static std::shared_ptr<Communicator> create(int nranks, const RootInfo& root, int rank, const CommConfig& config,
                                              const InitOverrides& overrides = {});
  ~Communicator() override;

  int rank() const override { return rank_; }
  int nranks() const override { return nranks_; }
  const std::string& name() const { return name_; }
  const CommConfig& config() const { return config_; }

  // Validates and runs one collective or point-to-point op, blocking.
  // `recordId`: its flight-recorder entry if it was recorded when queued.
  void run(const OpDesc& op, uint64_t recordId = 0);
  // Flight recorder: an entry for an op about to be queued or run.
  uint64_t recordEnqueued(const OpDesc& op, const std::string& stream);
  // Writes the flight recorder as JSON; path empty = VIGIL_DUMP_DIR's file.
  // Throws VG-COMM-005 when it cannot be written.
  void dumpFlightRecorder(const std::string& path, const std::string& reason) const;
  // Validates one op (for groups, at the call that adds it). Throws Error.
  void validate(const OpDesc& op) const;
  // Validates and runs point-to-point ops as one batch: all progress at once.
  // `ids`: their flight-recorder entries when recorded at enqueue (groups).
  // `work` (library-internal batches) runs while the transfers wait.
  void runPointToPoint(std::span<const OpDesc> ops, std::span<const uint64_t> ids = {}, ExchangeWork* work = nullptr);
  // vigilProbe (`wait`) and vigilIprobe: whether a message that a tagged
  // receive from `peer` (or VIGIL_ANY_SOURCE) with `tag` (or VIGIL_ANY_TAG)
  // would take is here; it stays for that receive (comm/tagged.cpp).
  bool probe(int peer, int tag, bool wait, vigilStatus* status);
  // Non-blocking tagged point-to-point (comm/requests.cpp). post(): from any
  // thread; validates `op` and wakes a wait in progress so that it takes
  // the request in.
  std::shared_ptr<Request> post(const OpDesc& op);
  // Progresses every pending request until one of `reqs` is done and
  // returns its index. Test: without waiting for a message (-1: none done).
  // WaitAny: -1 also when another thread posted a request meanwhile.
  enum class WaitMode { Test, Wait, WaitAny };
  int waitRequests(std::span<Request* const> reqs, WaitMode mode);
  // vigilSendRecv from VIGIL_ANY_SOURCE: the receive and the send as two requests, both waited for.
  void sendRecvAnySource(const OpDesc& send, const OpDesc& recv);
  // Tagged point-to-point ops as requests, all waited for (`recorded`: their entries, if recorded when queued).
  void runAsRequests(std::span<const OpDesc> ops, std::span<const uint64_t> recorded = {});

  // Collective over this communicator: the ranks passing the same color form
  // a new communicator, ordered by (key, rank here); color < 0 returns null.
  // The colors, keys and listen addresses travel as one all-gather here (no
  // rendezvous); the members then connect to each other directly, so the new
  // communicator progresses and dies independently of this one.
  std::shared_ptr<Communicator> split(int color, int key) {
    return splitAs(color, key, {}, config_.timeoutMs, config_.timeoutSource);
  }
  // split() with a name suffix (empty: "<n>.<color>") and a per-op timeout
  // that `timeoutSource` names.
  std::shared_ptr<Communicator> splitAs(int color, int key, const std::string& suffix, int timeoutMs,
                                        const std::string& timeoutSource);
  // This communicator serves `outerName` (a hierarchy's step communicator):
  // its errors name its ranks also as ranks of that one (`outerRanks`, by
  // rank here). Called once, before its first operation.
  void serve(const std::string& outerName, std::vector<int> outerRanks) {
    faults_.serve(outerName, std::move(outerRanks));
  }

  // Reduction operators of vigilRedOpCreatePreMulSum (comm/redops.cpp).
  // Local calls: each rank makes its own, with its own scalar.
  vigilRedOp_t createPreMulSum(const void* scalar, vigilDataType_t dtype, vigilScalarResidence_t residence);
  void destroyRedOp(vigilRedOp_t op);
  // `op` with a created operator replaced by what it stands for
  // (kRedOpPreMulSum and this rank's scalar); VG-API-003 for an operator
  // this communicator does not have, or one made for another data type.
  OpDesc resolveRedOp(const OpDesc& op) const;

  // This communicator's n-th MoE dispatch (every rank counts the same).
  uint64_t nextMoeDispatch() { return ++moeDispatches_; }

  void finalize();
  // Local teardown; `reason` is what peers are told, with `exitError` (the
  // uncaught error) for ByeReason::ProcessError. `inheritedCause`: what the
  // goodbye quotes when this communicator has no error of its own (a
  // hierarchy's step communicators quote the one they serve).
  void destroy(ByeReason reason = ByeReason::Destroy, const std::string& exitError = {},
               const std::optional<Error>& inheritedCause = {});
  // `why` is what this rank's blocked operations and the peers are told
  // ("rank 2 aborted the communicator (<why>)"); empty: "vigilCommAbort".
  // `notice`: what the peers are told instead (a hierarchy's step
  // communicators relay the notice of the one they serve).
  void abort(const std::string& why = {}, const std::optional<Error>& notice = {});
  // Stops the communicator with `error` (the first one kept wins) and tells
  // the peers; returns the error kept.
  Error failWith(const Error& error) { return poisonWith(error, true); }
  // The stored error if an earlier op broke the communicator.
  std::optional<Error> asyncError() const;
  // An op that failed where no caller waits for it (on a stream): the
  // communicator keeps the error, as vigilCommGetAsyncError and every later
  // call report it (the first one kept wins).
  void keepAsyncError(const Error& error) { poisonWith(error, false); }
  // Throws if no operation may start: finalized, destroyed, or failed earlier
  // (then with the first error's result code and text).
  void checkUsable() const;

  // Collective: every rank registers [base, base + bytes) for one-sided
  // access and attaches every other rank's (comm/rma_window.hpp). Throws
  // VG-NET-008 when the transport has no one-sided access.
  std::unique_ptr<RmaWindow> createWindow(void* base, size_t bytes);
  // RmaWindow::flush: this rank's puts and gets complete, as an operation.
  // `label`: the operation that errors name ("window flush", "vigilPut", ...).
  // `remote`: complete at the targets, else only here (RmaWindow::complete).
  void flushRma(const char* label = "window flush", bool remote = true);
  // RmaWindow::progress.
  bool progressRma(int waitMs);

  // ---- Waits outside an operation (symmetric memory: symm/) ----
  // Readable for good once the communicator is aborted, destroyed or broken.
  int stopFd() const { return control_.fatalFd(); }
  // Readable when some peer's state changed; clear it before reading the states.
  int peerEventFd() const { return control_.peerChangeFd(); }
  void clearPeerEvents() const { control_.clearPeerChange(); }
  bool peerIsAlive(int peer) const { return peerAlive(peer); }
  // What `label` reports when `peer` is gone: the error a collective would give.
  Error peerLostError(int peer, const std::string& label) const;
  // What `label` reports once stopFd() fired (abort, destroy, an earlier failure).
  Error stoppedError(const std::string& label) const;
  // `wake` runs on the control thread whenever stopFd() or peerEventFd()
  // fires (waits that sleep on something other than the transport); remove
  // it before what it wakes goes away.
  uint64_t addWaker(std::function<void()> wake);
  void removeWaker(uint64_t id);
  const std::vector<PeerInfo>& peerInfo() const { return peers_; }

  // What a layer above keeps per communicator (the symmetric heap, symm/):
  // made once, destroyed with the communicator (so a call that holds the
  // communicator also keeps it), found without a lock.
  class Extension {
   public:
    virtual ~Extension() = default;
  };
  Extension* extension() const { return extension_.load(std::memory_order_acquire); }
  // Installs make()'s result unless one is installed (make then is not
  // called); returns the installed one. make() may throw.
  Extension* installExtension(const std::function<std::unique_ptr<Extension>()>& make);

  ErrorBuilder error(Errc errc) const { return ErrorBuilder(errc).rank(rank_, nranks_).comm(name_); }
  // The transport ("shm" or "tcp") and the algorithm of the last collective.
  const char* transportName() const { return transport_->name(); }
  // Whether the transport has one-sided access (createWindow works).
  bool hasRma() const { return transport_->rma() != nullptr; }
  algo::Algo lastAlgo() const { return static_cast<algo::Algo>(op_.header.algo); }

 private:
  Communicator(int rank, int nranks, CommConfig config, std::string name, const JobToken& token,
               std::vector<PeerInfo> peers, std::vector<Fd> controlFds, std::unique_ptr<Transport> transport);
  // split: the all-gather of every rank's fixed-size record, and the check
  // of the new members while they connect (throws when one is gone or this
  // communicator stopped).
  std::vector<uint8_t> gatherSplitRecords(std::span<const uint8_t> mine);
  void checkSplitMembers(std::span<const int> members);
  // HierarchicalRunner (comm/hierarchy.cpp)
  void runHierarchical(const OpDesc& op) override;
  // After the connections: the transport, the control handshake (init
  // succeeds on every rank or on none), the control thread, the hierarchy.
  static std::shared_ptr<Communicator> assemble(int rank, int nranks, const CommConfig& config, std::string name,
                                                std::vector<PeerInfo> peers, const JobToken& token, Mesh mesh,
                                                Deadline deadline);

  // LoadStoreRunner
  using algo::LoadStoreRunner::exchange;
  void exchange(std::span<const Transfer> transfers, ExchangeWork* work) override;
  uint8_t* scratch(size_t bytes) override;
  bool hasLoadStore() override { return loadStore_ != nullptr; }
  LoadStoreDomain& loadStoreDomain() override { return *loadStore_; }
  int takeStagingBuffer() override;
  uint64_t syncStep() override;
  void releaseStagingBuffer(int buffer, uint64_t lastReadStep) override;
  void waitForStep(uint64_t step);
  // LivenessWatch
  int fatalFd() const override { return control_.fatalFd(); }
  int peerChangeFd() const override { return op_.watchPeers ? control_.peerChangeFd() : -1; }
  int checkPeers(std::span<const int> directRecvPeers) override;
  Deadline stallDeadline() const override;
  void onStall() override;
  bool peerAlive(int peer) const override;
  int wakeFd() const override { return wakeable_ ? wake_.load()->fd() : -1; }

  void wakeWaiters();  // the control thread's wake hook: the transport's sleepers, then addWaker's
  void runCollective(const OpDesc& op);
  // A pre-multiplied sum as the algorithms run it: a sum of this rank's
  // input times its scalar, kept in preMulInput_ (comm/redops.cpp).
  OpDesc preMultiplied(const OpDesc& op);
  size_t opBytes(const OpDesc& op) const;
  void runPointToPointBatch(std::span<const OpDesc> ops, ExchangeWork* work = nullptr);
  void copyToSelf(std::span<const OpDesc> ops);
  // The transfer of a send or receive, framed with `header` (kept alive by the caller).
  static Transfer transferOf(const OpDesc& op, const FrameHeader& header);
  // Tagged point-to-point (comm/tagged.cpp).
  class TaggedSink;
  struct TaggedRecv;
  void runTaggedBatch(std::span<const OpDesc> ops, ExchangeWork* work);
  void runAnySourceRecv(const OpDesc& op);
  void matchQueued(std::span<TaggedRecv> recvs);
  void exchangeTagged(std::span<const Transfer> transfers, std::span<TaggedSink> sinks, ExchangeWork* work);
  // Why message `got` from `source` cannot fill receive `r` (data type, size), if it cannot.
  std::optional<Error> misfit(const OpDesc& r, int source, const FrameHeader& got) const;
  // Waits for a message from one of `candidates` (dropping those that left); returns its sender,
  // or -1 when a request wait was woken by a post.
  int awaitAnyOf(std::vector<int>& candidates);
  // The next tagged message from `from`: into the first of `recvs` it matches, else kept.
  void receiveNext(int from, std::span<TaggedRecv> recvs);
  // Finalize: a kept tagged message that no receive took is VG-OP-005.
  void checkKeptAtFinalize();
  // Requests (comm/requests.cpp), under opMutex_: the posted ones into the
  // pending lists, the receives that kept messages fill, and one round (the
  // pending sends, and the messages that come meanwhile from the peers that
  // pending receives name).
  void absorbPosted();
  void matchPendingRecvs();
  void requestRound();
  std::vector<int> drainPeers() const;
  void completeRequest(Request& r);
  // Finalize: a request not complete is VG-OP-006.
  void checkRequestsAtFinalize();
  std::vector<int> othersFrom(int first) const;
  ProgressReport progress() const;
  void checkPeersBeforeStart(std::span<const int> peers, int64_t seq);
  [[noreturn]] void failOp(const ExchangeFault& fault);
  // Control thread: the left neighbour announced another collective for a seq.
  void onNeighbourMismatch(const FrameHeader& mine, const FrameHeader& theirs);
  // After a collective that received nothing from the left neighbour, its
  // fingerprint is the only proof that both ran the same op: wait for it.
  void confirmWithLeftNeighbour();
  // Stores the communicator's first error; returns the one stored.
  Error poisonWith(const Error& error, bool tellPeers);
  // Opt-in checks (comm/checks.cpp).
  void guardSendBuffer(uint64_t recordId, const OpDesc& op);
  void checkSendBuffer(uint64_t recordId, const OpDesc& op, size_t indexInBatch, int64_t seq);
  void forgetSendBuffer(uint64_t recordId);  // an op that failed before its check
  int64_t scanInput(const OpDesc& op) const;
  void checkNumerics(const OpDesc& op, int64_t seq, int64_t inputIndex);
  // On timeout, mismatch or abort, once: the flight recorder to VIGIL_DUMP_DIR.
  void dumpAfterFailure(const Error& error);
  FrameHeader headerFor(const OpDesc& op, int64_t seq) const;
  size_t fingerprintCount(const OpDesc& op) const;
  int32_t countsDigest(const OpDesc& op) const;

  const int rank_;
  const int nranks_;
  const CommConfig config_;
  const std::string name_;
  const JobToken token_;  // the job's token; a split derives its own from it
  const std::vector<PeerInfo> peers_;
  std::atomic<uint32_t> splits_{0};
  std::atomic<uint64_t> moeDispatches_{0};  // splits so far: names the children
  std::unique_ptr<Hierarchy> hier_;         // ranks on several hosts, several on one
  std::string abortReason_;  // abort()'s `why` (guarded by errorMutex_), set just after state_ becomes Aborted
  std::string abortReason() const;
  ControlPlane control_;
  std::unique_ptr<Transport> transport_;
  LoadStoreDomain* const loadStore_;  // the transport's load/store capability, or null

  std::mutex opMutex_;  // serialises operations (never held by abort)
  // The operation in progress (guarded by opMutex_).
  void beginOp(const FrameHeader& header, std::string label, bool watchPeers);
  OpState op_;
  algo::Topology topology_;
  int64_t nextSeq_ = 1;
  std::atomic<int64_t> completedSeq_{0};
  std::atomic<int64_t> inProgressSeq_{-1};  // read by the control thread for progress queries
  std::atomic<uint8_t> inProgressOp_{0};
  std::vector<uint64_t> sendSeq_, recvSeq_;  // per peer, point-to-point
  // Tagged messages: per peer, counted as plain ones are; those that came
  // before a receive took them wait here, by sender, in arrival order.
  struct Unexpected {
    FrameHeader header;
    std::vector<uint8_t> payload;
    uint64_t arrival;
  };
  std::vector<uint64_t> taggedSendSeq_, taggedRecvSeq_;
  std::vector<std::deque<Unexpected>> unexpected_;
  // The kept message a receive from `source` with `tag` (either may be any) takes, and its sender; -1 if none.
  std::pair<int, std::deque<Unexpected>::iterator> findKept(int source, int tag);
  uint64_t arrivals_ = 0;
  int anySourceStart_ = 0;  // any-source waits look at the peers from here, in turn
  // Requests: posted by any thread (postMutex_), then pending (opMutex_), in
  // the order they were posted; the wake fd is made at the first post.
  std::mutex postMutex_;
  std::vector<std::shared_ptr<Request>> posted_;
  std::unique_ptr<EventFd> wakeOwner_;
  std::atomic<EventFd*> wake_{nullptr};
  std::vector<std::shared_ptr<Request>> pendingSends_, pendingRecvs_;
  bool wakeable_ = false;  // a request wait is in awaitIncoming: the wake fd ends it
  std::atomic<bool> requestsInUse_{false};  // set at the first post
  std::vector<uint8_t> scratch_;
  std::vector<uint8_t> preMulInput_;  // guarded by opMutex_
  struct CreatedRedOp {
    vigilDataType_t dtype;
    const void* scalar;  // vigilScalarDevice; null: `value` holds it
    uint64_t value;
  };
  mutable std::mutex redOpsMutex_;  // taken by calls that name a created operator only
  std::unordered_map<int, CreatedRedOp> redOps_;
  int nextRedOp_ = VIGIL_REDOP_CREATED_FIRST;  // never reused: a destroyed operator stays refused
  const std::vector<int> allPeers_;            // every rank but this one
  FaultReporter faults_;
  algo::AlgoOverrides algoOverrides_;  // VIGIL_ALGO
  FlightRecorder recorder_;
  const std::string dumpDir_;
  std::atomic<bool> dumped_{false};
  uint64_t currentRecord_ = 0;  // guarded by opMutex_
  std::atomic<uint64_t> unrecordedIds_{1};
  std::mutex guardMutex_;
  std::unordered_map<uint64_t, uint64_t> guardHashes_;  // record id -> send buffer digest at the call

  enum class State : uint8_t { Active, Finalized, Destroyed, Aborted };
  std::atomic<State> state_{State::Active};
  mutable std::mutex errorMutex_;
  std::optional<Error> fatal_;      // first error that broke the communicator
  std::optional<Error> lastCause_;  // last peer-loss error, for our goodbye
  std::mutex wakersMutex_;          // taken on faults only, never on an op's path
  std::vector<std::pair<uint64_t, std::function<void()>>> wakers_;
  uint64_t nextWaker_ = 1;
  // Last: destroyed first, while everything it uses (wakers) still exists.
  std::mutex extensionMutex_;
  std::unique_ptr<Extension> extensionOwner_;
  std::atomic<Extension*> extension_{nullptr};
};

}  // namespace vigil
