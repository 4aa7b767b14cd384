#include "control/control_plane.hpp"

#include <poll.h>

#include <algorithm>
#include <cerrno>

#include "core/log.hpp"
#include "core/thread.hpp"
#include "net/socket.hpp"
#include "net/wire.hpp"

namespace vigil {
namespace {

enum class Msg : uint8_t {
  Ready = 1,
  Bye = 2,
  Failure = 3,
  FinalizeReady = 4,
  Fingerprint = 5,
  ProgressQuery = 6,
  ProgressReply = 7,
  FingerprintQuery = 8
};
// What a goodbye quotes as the reason its rank leaves: nothing, the vigil
// error it failed with (its fields), or its program's uncaught error (text).
enum class ByeCause : uint8_t { None = 0, VigilError = 1, ProcessError = 2 };
constexpr size_t kMaxControlMessage = 1 << 20;
constexpr int kNoticeDeadlineMs = 1000;

std::vector<uint8_t> encode(Msg type) {
  FrameWriter w;
  w.put(static_cast<uint8_t>(type));
  return std::move(w.frame());
}

}  // namespace

const char* describe(ByeReason reason) {
  switch (reason) {
    case ByeReason::Destroy: return "vigilCommDestroy";
    case ByeReason::Finalize: return "vigilCommFinalize";
    case ByeReason::ProcessExit: return "process exit without vigilCommDestroy";
    case ByeReason::Abort: return "vigilCommAbort";
    case ByeReason::ProcessError: return "its process is ending because of an uncaught error";
  }
  return "?";
}

ControlPlane::ControlPlane(int rank, int nranks, std::vector<Fd> fds)
    : rank_(rank),
      nranks_(nranks),
      fds_(std::move(fds)),
      readers_(static_cast<size_t>(nranks), FramedReader(kMaxControlMessage)),
      eof_(static_cast<size_t>(nranks)),
      peers_(static_cast<size_t>(nranks)),
      readyFrom_(static_cast<size_t>(nranks)),
      finalizeFrom_(static_cast<size_t>(nranks)),
      ownFingerprints_(kFingerprintSlots),
      leftFingerprints_(kFingerprintSlots),
      progressReplies_(static_cast<size_t>(nranks)) {}

ControlPlane::~ControlPlane() {
  stop();
}

void ControlPlane::start() {
  thread_ = startLibraryThread([this] { run(); });
}

void ControlPlane::stop() {
  if (!thread_.joinable()) return;
  stop_.signal();
  thread_.join();
}

bool ControlPlane::sendTo(int peer, const std::vector<uint8_t>& frame, Deadline deadline) {
  std::lock_guard lock(sendMutex_);
  int fd = fds_[static_cast<size_t>(peer)].get();
  if (fd < 0) return false;
  return sendAll(fd, frame.data(), frame.size(), deadline) == IoStatus::Done;
}

std::vector<int> ControlPlane::handshake(Deadline deadline) {
  auto ready = encode(Msg::Ready);
  for (int p = 0; p < nranks_; ++p) {
    if (p != rank_) sendTo(p, ready, deadline);
  }
  // Served inline before the thread starts: the same reader, driven here.
  std::vector<pollfd> pfds;
  while (true) {
    pfds.clear();
    std::vector<int> waiting;
    {
      std::lock_guard lock(mutex_);
      for (int p = 0; p < nranks_; ++p) {
        if (p == rank_ || readyFrom_[static_cast<size_t>(p)]) continue;
        if (peers_[static_cast<size_t>(p)].status != PeerState::Status::Alive) {
          return {p};  // it died or failed during init: no point waiting
        }
        waiting.push_back(p);
      }
    }
    if (waiting.empty()) return {};
    if (deadline.expired()) return waiting;
    for (int p : waiting) pfds.push_back({fds_[static_cast<size_t>(p)].get(), POLLIN, 0});
    int rc = ::poll(pfds.data(), pfds.size(), deadline.pollTimeoutMs());
    if (rc < 0 && errno != EINTR) return waiting;
    for (size_t i = 0; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) onReadable(waiting[i]);
    }
    flushSignals();
  }
}

void ControlPlane::run() {
  std::vector<pollfd> pfds;
  std::vector<int> owner;
  while (true) {
    pfds.clear();
    owner.clear();
    pfds.push_back({stop_.fd(), POLLIN, 0});
    owner.push_back(-1);
    for (int p = 0; p < nranks_; ++p) {
      int fd = fds_[static_cast<size_t>(p)].get();
      if (p == rank_ || fd < 0 || eof_[static_cast<size_t>(p)]) continue;
      pfds.push_back({fd, POLLIN, 0});
      owner.push_back(p);
    }
    int rc = ::poll(pfds.data(), pfds.size(), -1);  // woken by stop_ or a peer; never spins
    if (rc < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (pfds[0].revents & POLLIN) return;
    for (size_t i = 1; i < pfds.size(); ++i) {
      if (pfds[i].revents != 0) onReadable(owner[i]);
    }
    flushSignals();
  }
}

void ControlPlane::flushSignals() {
  if (pendingFatal_) fatal_.signal();
  if (pendingPeerChange_) peerChange_.signal();
  if (pendingFatal_ || pendingPeerChange_) {
    if (wake_) wake_();
    signalWatchers();
  }
  pendingFatal_ = pendingPeerChange_ = false;
}

void ControlPlane::signalWatchers() {
  std::lock_guard lock(mutex_);
  for (const EventFd* w : watchers_) w->signal();
}

void ControlPlane::addWatcher(const EventFd* fd) {
  std::lock_guard lock(mutex_);
  watchers_.push_back(fd);
}

void ControlPlane::removeWatcher(const EventFd* fd) {
  std::lock_guard lock(mutex_);
  std::erase(watchers_, fd);
}

void ControlPlane::onReadable(int peer) {
  FramedReader& reader = readers_[static_cast<size_t>(peer)];
  const int fd = fds_[static_cast<size_t>(peer)].get();
  // Messages first: a goodbye usually arrives together with the EOF after it.
  ReadStatus st;
  while ((st = reader.read(fd)) == ReadStatus::Complete && !reader.payload().empty()) {
    onMessage(peer, reader.payload().data(), reader.payload().size());
  }
  if (st == ReadStatus::NeedMore) return;
  if (st == ReadStatus::Complete || st == ReadStatus::TooLarge) {
    VIGIL_LOG_AT(LogLevel::Warn, rank_, "control message of ", reader.length(), " bytes from rank ", peer,
                 " breaks the protocol; treating the peer as failed");
  }
  // EOF or reset: the peer is gone; without a goodbye, it died. The socket
  // stays open (senders may still hold it) but is no longer polled.
  eof_[static_cast<size_t>(peer)] = 1;
  setState(peer, PeerState::Status::Died, nullptr);
}

void ControlPlane::onMessage(int peer, const uint8_t* data, size_t size) {
  try {
    WireReader r(data, size);
    auto type = static_cast<Msg>(r.get<uint8_t>());
    switch (type) {
      case Msg::Ready: {
        std::lock_guard lock(mutex_);
        readyFrom_[static_cast<size_t>(peer)] = 1;
        break;
      }
      case Msg::FinalizeReady: onFinalizeReady(peer, r); break;
      case Msg::Bye: onBye(peer, r); break;
      case Msg::Failure: {
        PeerState details;
        details.failure = getError(r);
        setState(peer, PeerState::Status::Failed, &details);
        break;
      }
      case Msg::Fingerprint: onFingerprint(peer, r); break;
      case Msg::FingerprintQuery: onFingerprintQuery(peer, r); break;
      case Msg::ProgressQuery: onProgressQuery(peer, r); break;
      case Msg::ProgressReply: onProgressReply(peer, r); break;
      default: VIGIL_LOG_AT(LogLevel::Warn, rank_, "unknown control message type ", int(type), " from rank ", peer);
    }
  } catch (const WireFormatError& e) {
    VIGIL_LOG_AT(LogLevel::Warn, rank_, "malformed control message from rank ", peer, ": ", e.what());
  }
}

void ControlPlane::onFinalizeReady(int peer, WireReader& r) {
  const auto lastSeq = r.get<int64_t>();
  std::lock_guard lock(mutex_);
  finalizeFrom_[static_cast<size_t>(peer)] = 1;
  PeerState& st = peers_[static_cast<size_t>(peer)];
  if (st.status == PeerState::Status::Alive) {
    st.finalizing = true;
    st.lastSeq = lastSeq;
    st.since = Clock::now();
    anyNotAlive_.store(true, std::memory_order_release);
    pendingPeerChange_ = true;  // an op waiting on it re-checks its peers
  }
  changed_.notify_all();
}

void ControlPlane::onBye(int peer, WireReader& r) {
  PeerState details;
  details.byeReason = static_cast<ByeReason>(r.get<uint8_t>());
  details.lastSeq = r.get<int64_t>();
  switch (static_cast<ByeCause>(r.get<uint8_t>())) {
    case ByeCause::None: break;
    case ByeCause::VigilError: details.byeError = getError(r); break;
    case ByeCause::ProcessError: details.processError = r.getString(1 << 16); break;
    default: throw WireFormatError("unknown kind of goodbye cause");
  }
  if (!r.done() && peer == (rank_ + nranks_ - 1) % nranks_) {
    const auto count = r.get<uint32_t>();
    std::lock_guard lock(mutex_);
    for (uint32_t i = 0; i < count && i < kFingerprintSlots; ++i) {
      const auto f = r.get<FrameHeader>();
      if (f.magic == FrameHeader::kMagic) leftFingerprints_[f.seq % kFingerprintSlots] = f;
    }
  }
  setState(peer, PeerState::Status::Left, &details);
}

void ControlPlane::onFingerprint(int peer, WireReader& r) {
  const auto theirs = r.get<FrameHeader>();
  if (peer != (rank_ + nranks_ - 1) % nranks_ || theirs.magic != FrameHeader::kMagic) return;
  std::optional<FrameHeader> mine;
  {
    std::lock_guard lock(mutex_);
    leftFingerprints_[theirs.seq % kFingerprintSlots] = theirs;
    changed_.notify_all();
    const FrameHeader& own = ownFingerprints_[theirs.seq % kFingerprintSlots];
    if (own.magic == FrameHeader::kMagic && own.seq == theirs.seq) mine = own;
  }
  // If this rank has not reached that seq yet, it compares when it does.
  if (mine && !mine->sameOp(theirs) && onFingerprintMismatch_) onFingerprintMismatch_(*mine, theirs);
}

void ControlPlane::onFingerprintQuery(int peer, WireReader& r) {
  const auto seq = r.get<uint64_t>();
  if (peer != (rank_ + 1) % nranks_) return;
  std::optional<FrameHeader> own;
  {
    std::lock_guard lock(mutex_);
    const FrameHeader& slot = ownFingerprints_[seq % kFingerprintSlots];
    if (slot.magic == FrameHeader::kMagic && slot.seq == seq) {
      own = slot;
    } else {
      pendingQuerySeq_ = static_cast<int64_t>(seq);  // answered by recordFingerprint
    }
  }
  if (own) sendFingerprint(*own);
}

void ControlPlane::onProgressQuery(int peer, WireReader& r) {
  const auto round = r.get<uint64_t>();
  ProgressReport report = progress_ ? progress_() : ProgressReport{};
  FrameWriter w;
  w.put(static_cast<uint8_t>(Msg::ProgressReply))
      .put(round)
      .put(report.lastCompletedSeq)
      .put(report.currentSeq)
      .put(report.currentOp);
  sendTo(peer, w.frame(), Deadline::afterMs(kNoticeDeadlineMs));
}

void ControlPlane::onProgressReply(int peer, WireReader& r) {
  const auto round = r.get<uint64_t>();
  ProgressReport report;
  report.lastCompletedSeq = r.get<int64_t>();
  report.currentSeq = r.get<int64_t>();
  report.currentOp = r.get<uint8_t>();
  std::lock_guard lock(mutex_);
  progressReplies_[static_cast<size_t>(peer)] = {round, report};
  changed_.notify_all();
}

void ControlPlane::setState(int peer, PeerState::Status status, const PeerState* details) {
  {
    std::lock_guard lock(mutex_);
    PeerState& s = peers_[static_cast<size_t>(peer)];
    // A goodbye or failure notice followed by EOF keeps the first verdict.
    if (s.status != PeerState::Status::Alive) return;
    if (details != nullptr) s = *details;
    s.status = status;
    s.since = Clock::now();
    if (status == PeerState::Status::Failed && !firstFailed_) firstFailed_ = peer;
    anyNotAlive_.store(true, std::memory_order_release);
    changed_.notify_all();
  }
  // Signalled once per poll round (flushSignals), so that a waiting op sees
  // every notice that arrived together, root cause included, at once.
  if (status == PeerState::Status::Failed) pendingFatal_ = true;
  pendingPeerChange_ = true;
  VIGIL_LOG_AT(LogLevel::Info, rank_, "rank ", peer,
               status == PeerState::Status::Left   ? " left"
               : status == PeerState::Status::Died ? " closed its connection without goodbye"
                                                   : " reported a failure");
}

void ControlPlane::sendBye(ByeReason reason, int64_t lastSeq, const std::optional<Error>& cause,
                           const std::string& processError) {
  auto message = [&](bool withFingerprints) {
    FrameWriter body;
    body.put(static_cast<uint8_t>(Msg::Bye)).put(static_cast<uint8_t>(reason)).put(lastSeq);
    if (cause) {
      putError(body.put(static_cast<uint8_t>(ByeCause::VigilError)), *cause);
    } else if (!processError.empty()) {
      body.put(static_cast<uint8_t>(ByeCause::ProcessError)).putString(processError.substr(0, 1 << 16));
    } else {
      body.put(static_cast<uint8_t>(ByeCause::None));
    }
    if (withFingerprints) {
      // The right neighbour may still need to confirm our last collectives
      // with us after we are gone: leave it their fingerprints.
      std::vector<FrameHeader> recent;
      {
        std::lock_guard lock(mutex_);
        for (const FrameHeader& f : ownFingerprints_) {
          if (f.magic == FrameHeader::kMagic) recent.push_back(f);
        }
      }
      body.put<uint32_t>(static_cast<uint32_t>(recent.size()));
      for (const FrameHeader& f : recent) body.put(f);
    }
    return std::move(body.frame());
  };
  const int right = (rank_ + 1) % nranks_;
  const std::vector<uint8_t> plain = message(false);
  Deadline deadline = Deadline::afterMs(kNoticeDeadlineMs);
  for (int p = 0; p < nranks_; ++p) {
    // A peer that failed still listens and must learn why we go; a dead one cannot.
    if (p == rank_ || peer(p).status == PeerState::Status::Died) continue;
    sendTo(p, p == right ? message(true) : plain, deadline);
  }
}

void ControlPlane::broadcastFailure(const Error& error) {
  FrameWriter w;
  putError(w.put(static_cast<uint8_t>(Msg::Failure)), error);
  const std::vector<uint8_t>& message = w.frame();
  Deadline deadline = Deadline::afterMs(kNoticeDeadlineMs);
  for (int p = 0; p < nranks_; ++p) {
    // A peer that failed still listens and must learn why we go; a dead one cannot.
    if (p != rank_ && peer(p).status != PeerState::Status::Died) sendTo(p, message, deadline);
  }
}

void ControlPlane::sendFingerprint(const FrameHeader& mine) {
  FrameWriter w;
  w.put(static_cast<uint8_t>(Msg::Fingerprint)).put(mine);
  // Small: the socket buffer takes it at once; a peer that stopped reading
  // is the data path's and the deadline's business.
  sendTo((rank_ + 1) % nranks_, w.frame(), Deadline::afterMs(kNoticeDeadlineMs));
}

void ControlPlane::recordFingerprint(const FrameHeader& mine) {
  bool answer = false;
  {
    std::lock_guard lock(mutex_);
    ownFingerprints_[mine.seq % kFingerprintSlots] = mine;
    if (pendingQuerySeq_ == static_cast<int64_t>(mine.seq)) {
      pendingQuerySeq_ = -1;
      answer = true;
    }
  }
  if (answer) sendFingerprint(mine);
}

void ControlPlane::queryLeftFingerprint(uint64_t seq) {
  FrameWriter w;
  w.put(static_cast<uint8_t>(Msg::FingerprintQuery)).put(seq);
  sendTo((rank_ + nranks_ - 1) % nranks_, w.frame(), Deadline::afterMs(kNoticeDeadlineMs));
}

std::optional<FrameHeader> ControlPlane::waitLeftFingerprint(uint64_t seq, Deadline deadline) const {
  std::unique_lock lock(mutex_);
  const FrameHeader& slot = leftFingerprints_[seq % kFingerprintSlots];
  const int left = (rank_ + nranks_ - 1) % nranks_;
  changed_.wait_until(lock, deadline.at(), [&] {
    return (slot.magic == FrameHeader::kMagic && slot.seq == seq) || poisoned_ || firstFailed_ ||
           peers_[static_cast<size_t>(left)].status != PeerState::Status::Alive;
  });
  if (slot.magic == FrameHeader::kMagic && slot.seq == seq) return slot;
  return std::nullopt;
}

std::vector<std::optional<ProgressReport>> ControlPlane::queryProgress(const std::vector<int>& peers,
                                                                       Deadline deadline) {
  uint64_t round;
  {
    std::lock_guard lock(mutex_);
    round = ++queryRound_;
  }
  FrameWriter w;
  w.put(static_cast<uint8_t>(Msg::ProgressQuery)).put(round);
  const std::vector<uint8_t>& query = w.frame();
  for (int p : peers) sendTo(p, query, deadline);
  std::unique_lock lock(mutex_);
  auto answered = [&](int p) {
    return progressReplies_[static_cast<size_t>(p)].first == round ||
           peers_[static_cast<size_t>(p)].status != PeerState::Status::Alive;
  };
  changed_.wait_until(lock, deadline.at(), [&] {
    for (int p : peers) {
      if (!answered(p)) return false;
    }
    return true;
  });
  std::vector<std::optional<ProgressReport>> out;
  for (int p : peers) {
    const auto& [got, report] = progressReplies_[static_cast<size_t>(p)];
    out.push_back(got == round ? std::optional<ProgressReport>(report) : std::nullopt);
  }
  return out;
}

void ControlPlane::poison() {
  {
    std::lock_guard lock(mutex_);
    poisoned_ = true;
    changed_.notify_all();
  }
  fatal_.signal();
  if (wake_) wake_();
  signalWatchers();
}

std::vector<int> ControlPlane::finalize(Deadline deadline, int64_t lastSeq) {
  FrameWriter w;
  w.put(static_cast<uint8_t>(Msg::FinalizeReady)).put(lastSeq);
  const std::vector<uint8_t>& ready = w.frame();
  for (int p = 0; p < nranks_; ++p) {
    if (p != rank_) sendTo(p, ready, deadline);
  }
  std::unique_lock lock(mutex_);
  auto missing = [&] {
    std::vector<int> out;
    for (int p = 0; p < nranks_; ++p) {
      if (p != rank_ && !finalizeFrom_[static_cast<size_t>(p)]) out.push_back(p);
    }
    return out;
  };
  auto settled = [&] {
    for (int p = 0; p < nranks_; ++p) {
      if (p == rank_ || finalizeFrom_[static_cast<size_t>(p)]) continue;
      if (peers_[static_cast<size_t>(p)].status == PeerState::Status::Alive) return false;
    }
    return true;  // everyone confirmed, or the rest can no longer confirm
  };
  changed_.wait_until(lock, deadline.at(), settled);
  return missing();
}

PeerState ControlPlane::peer(int rank) const {
  std::lock_guard lock(mutex_);
  return peers_[static_cast<size_t>(rank)];
}

PeerState ControlPlane::waitVerdict(int rank, Deadline deadline) const {
  std::unique_lock lock(mutex_);
  changed_.wait_until(lock, deadline.at(),
                      [&] { return peers_[static_cast<size_t>(rank)].status != PeerState::Status::Alive; });
  return peers_[static_cast<size_t>(rank)];
}

bool ControlPlane::waitRootCause(Deadline deadline) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_until(lock, deadline.at(), [&] {
    for (const PeerState& s : peers_) {
      if (s.status == PeerState::Status::Alive) continue;
      if (!s.leftBecauseOfAnother()) return true;
    }
    return false;
  });
}

std::optional<std::pair<int, PeerState>> ControlPlane::firstFailure() const {
  std::lock_guard lock(mutex_);
  if (!firstFailed_) return std::nullopt;
  return std::make_pair(*firstFailed_, peers_[static_cast<size_t>(*firstFailed_)]);
}

std::vector<int> ControlPlane::peersNotAlive() const {
  std::lock_guard lock(mutex_);
  std::vector<int> out;
  for (int p = 0; p < nranks_; ++p) {
    const PeerState& st = peers_[static_cast<size_t>(p)];
    if (p != rank_ && (st.status != PeerState::Status::Alive || st.finalizing)) out.push_back(p);
  }
  std::stable_sort(out.begin(), out.end(), [&](int a, int b) {
    return peers_[static_cast<size_t>(a)].since < peers_[static_cast<size_t>(b)].since;
  });
  return out;
}

}  // namespace vigil
