#include "bootstrap/root_server.hpp"

#include <poll.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "bootstrap/rendezvous.hpp"
#include "core/errors.hpp"
#include "core/log.hpp"
#include "core/thread.hpp"
#include "net/acceptor.hpp"
#include "net/event_fd.hpp"
#include "net/framed_reader.hpp"

namespace vigil {
namespace {

// A connection that presented a valid preamble but not yet its hello, or
// (when claims must be confirmed) whose hello awaits its confirmation.
struct Pending {
  explicit Pending(AcceptedConnection conn)
      : fd(std::move(conn.fd)),
        from(std::move(conn.from)),
        deadline(conn.deadline),
        since(conn.since),
        preamble(conn.preamble) {}
  Fd fd;
  std::string from;
  Deadline deadline;
  Clock::time_point since;
  Preamble preamble;
  FramedReader reader{kMaxHelloBytes};
  // Set once the hello is read and a confirmation was asked for: the next
  // message must echo `challenge`.
  std::optional<Hello> claim;
  std::vector<uint8_t> challenge;
};

struct Arrival {
  Fd fd;
  Hello hello;
};

std::string describe(PreambleRejection why, int error) {
  switch (why) {
    case PreambleRejection::Closed: return "it closed the connection before sending a complete hello";
    case PreambleRejection::Failed: return errnoText(error);
    case PreambleRejection::TimedOut: return cat("it sent no complete hello within ", kPreambleTimeoutMs / 1000, " s");
    case PreambleRejection::NotVigil: return "it did not present vigil's magic (not a vigil rank)";
    case PreambleRejection::OtherJob:
      return "it presented another job's token (a rank of a different job or root info)";
  }
  return "?";
}

std::string versionText(uint32_t code) {
  return cat(code / 10000, ".", code / 100 % 100, ".", code % 100, " (", code, ")");
}
std::atomic<size_t> gMaxPendingForTesting{0};

// Rejected strangers are logged one by one only up to here; a flood of them
// becomes one summary line per interval.
constexpr size_t kRejectionsLoggedInFull = 8;
constexpr auto kRejectionSummaryInterval = std::chrono::seconds(10);
// Refused claims named in the missing-rank report; more are counted.
constexpr size_t kRefusalsReported = 4;

class Rendezvous {
 public:
  Rendezvous(std::vector<Listener> listeners, JobToken token, int idleTimeoutMs, ClaimPolicy policy, int stopFd)
      : listeners_(std::move(listeners)),
        listener_(listeners_.front()),
        token_(token),
        policy_(policy),
        stopFd_(stopFd),
        deadline_(Deadline::afterMs(idleTimeoutMs)),
        rejections_(LogLevel::Warn, kRejectionsLoggedInFull, kRejectionSummaryInterval),
        claimRefusals_(LogLevel::Warn, kRejectionsLoggedInFull, kRejectionSummaryInterval),
        acceptor_(
            token, [this](AcceptedConnection conn) { admit(std::move(conn)); },
            [this](const std::string& from, PreambleRejection why, int error) {
              logRejection(from, describe(why, error));
            }) {
    size_t limit = gMaxPendingForTesting.load();
    maxPending_ = limit != 0 ? limit : kMaxPendingConnections;
    rejections_.setSummary(
        cat(errorId(Errc::NetRejected), ": rendezvous root at ", listener_.address.toString(), " closed"),
        "connection(s) that did not identify as a rank of this job; the rendezvous goes on");
    claimRefusals_.setSummary(
        cat(errorId(Errc::BootClaimRefused), ": rendezvous root at ", listener_.address.toString(), " refused"),
        "claim(s) of a rank; the rendezvous goes on");
  }

  void run();

 private:
  // A connection with a valid preamble: it goes on to its hello.
  void admit(AcceptedConnection conn);
  // At the limit of strangers, closes the oldest (preamble or hello pending).
  void makeRoom();
  // Returns false when the connection is finished (rejected or arrived).
  bool readPending(Pending& p);
  // A whole message from p: its hello, or the confirmation of its claim.
  bool onMessage(Pending& p);
  // True (and the rank told or refused) when p's hello comes from another version.
  bool otherVersion(Pending& p);
  void reject(Pending& p, const std::string& why);
  void logRejection(const std::string& from, const std::string& why);
  // Open policy: a claim that would fail the job if it were trusted is
  // refused alone; the sender is told (errc, cause), the root logs it.
  void refuseClaim(Pending& p, Errc errc, const std::string& cause);
  // Open policy: asks the sender of `hello` to confirm; false if refused.
  bool challenge(Pending& p, const Hello& hello);
  void arrive(Pending& p, Hello hello);
  std::optional<std::string> checkAgainstFirst(const Hello& hello) const;
  void fail(Errc errc, const std::string& cause, const std::string& remedy = {});
  void replyAll(const RendezvousReply& reply);
  void missingRanks();
  std::string describeArrivals() const;
  std::string describeRefusals() const;  // refused and unconfirmed claims
  std::string describeUnconfirmedClaims() const;

  std::vector<Listener> listeners_;
  const Listener& listener_;  // the first: named in messages
  JobToken token_;
  ClaimPolicy policy_;
  int stopFd_;
  Deadline deadline_;
  size_t maxPending_;
  RateLimitedLog rejections_;
  RateLimitedLog claimRefusals_;    // apart: a flood of strangers must not hide them
  PreambleAcceptor acceptor_;       // connections yet to present their preamble
  std::list<Pending> pending_;      // by acceptance, oldest first
  std::map<int, Arrival> arrived_;  // by rank
  std::optional<Hello> first_;
  std::optional<RendezvousReply> verdict_;  // set once the outcome is known
  std::vector<std::string> refusals_;       // the first refused claims, for the missing-rank report
  size_t refusedClaims_ = 0;
  bool done_ = false;
};

void Rendezvous::run() {
  std::vector<pollfd> fds;
  while (!done_) {
    fds.clear();
    fds.push_back({stopFd_, POLLIN, 0});
    for (const Listener& l : listeners_) fds.push_back({l.fd.get(), POLLIN, 0});
    Deadline wake = deadline_;
    for (Pending& p : pending_) {
      fds.push_back({p.fd.get(), POLLIN, 0});
      wake = wake.earlier(p.deadline);
    }
    const size_t firstStranger = fds.size();
    wake = acceptor_.addPollFds(fds, wake);
    int rc = ::poll(fds.data(), fds.size(), wake.pollTimeoutMs(1000));
    if (rc < 0 && errno != EINTR) break;
    if (fds[0].revents & POLLIN) return;  // process exit or test teardown
    // The pending connections first: they pair with pending_ and the
    // acceptor's in order; a preamble read adds to pending_, and accepting
    // may close the oldest of either.
    size_t index = 1 + listeners_.size();
    for (auto it = pending_.begin(); it != pending_.end() && index < firstStranger; ++index) {
      bool keep = true;
      if (fds[index].revents != 0) keep = readPending(*it);
      if (keep && it->deadline.expired()) {
        reject(*it, it->claim ? cat("it claimed ", it->claim->where(), " but did not confirm the claim within ",
                                    kPreambleTimeoutMs / 1000, " s (a forged or replayed hello?)")
                              : cat("it sent no complete hello within ", kPreambleTimeoutMs / 1000, " s"));
        keep = false;
      }
      it = keep ? std::next(it) : pending_.erase(it);
    }
    acceptor_.service(fds.data() + firstStranger, fds.size() - firstStranger);
    if (done_) {
      // Claims that never confirmed: someone tried to take a rank. Say so.
      for (Pending& p : pending_) {
        if (p.claim) {
          reject(p, cat("it claimed ", p.claim->where(),
                        " but never confirmed the claim; the rendezvous completed without it"));
        }
      }
      break;
    }
    for (size_t i = 0; i < listeners_.size(); ++i) {
      // Refusing a newcomer would let idle strangers lock every late rank
      // out; the oldest stranger has had the longest to identify itself.
      if (fds[1 + i].revents & POLLIN) acceptor_.acceptAll(listeners_[i].fd.get(), [this] { makeRoom(); });
    }
    if (deadline_.expired()) {
      if (!verdict_ && first_) missingRanks();
      break;  // a root nobody came to gives up quietly
    }
  }
}

void Rendezvous::admit(AcceptedConnection conn) {
  // By acceptance: a preamble that took longer goes before the later ones.
  auto at = pending_.end();
  while (at != pending_.begin() && std::prev(at)->since > conn.since) --at;
  auto it = pending_.emplace(at, std::move(conn));
  // The hello often came with the preamble: read it now, not a poll later.
  if (!readPending(*it)) pending_.erase(it);
}

void Rendezvous::makeRoom() {
  const size_t strangers = acceptor_.size() + pending_.size();
  if (strangers < maxPending_) return;
  const bool preambleOldest =
      acceptor_.size() > 0 && (pending_.empty() || acceptor_.oldestSince() <= pending_.front().since);
  const Clock::time_point since = preambleOldest ? acceptor_.oldestSince() : pending_.front().since;
  std::string from;
  if (preambleOldest) {
    from = acceptor_.dropOldest();
  } else {
    from = std::move(pending_.front().from);
    pending_.pop_front();
  }
  auto idleMs = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - since);
  logRejection(from, cat("it was the oldest of ", strangers, " connections that had not identified themselves (",
                         idleMs.count(), " ms without a complete hello); it makes room for a new one"));
}

void Rendezvous::reject(Pending& p, const std::string& why) {
  logRejection(p.from, why);
  p.fd.reset();
}

void Rendezvous::logRejection(const std::string& from, const std::string& why) {
  rejections_.write(errorId(Errc::NetRejected), ": rendezvous root at ", listener_.address.toString(),
                    " closed a connection from ", from, ": ", why, "; the rendezvous goes on");
}

bool Rendezvous::readPending(Pending& p) {
  switch (p.reader.read(p.fd.get())) {
    case ReadStatus::NeedMore: return true;
    case ReadStatus::Complete: return onMessage(p);
    case ReadStatus::Closed:
      reject(p, p.claim ? cat("it claimed ", p.claim->where(), " and closed the connection before confirming")
                        : std::string("it closed the connection before sending a complete hello"));
      return false;
    case ReadStatus::Failed: reject(p, errnoText(p.reader.error())); return false;
    case ReadStatus::TooLarge:
      reject(p, cat("it announced a hello of ", p.reader.length(), " bytes (limit ", kMaxHelloBytes, ")"));
      return false;
  }
  return false;
}

bool Rendezvous::onMessage(Pending& p) {
  if (p.claim) {
    if (p.reader.payload() != p.challenge) {
      reject(p, cat("it claimed ", p.claim->where(), " but answered the confirmation with other bytes"));
      return false;
    }
    arrive(p, *p.claim);
    return false;
  }
  if (otherVersion(p)) return false;
  try {
    Hello hello = Hello::decode(p.reader.payload());
    if (policy_ == ClaimPolicy::ConfirmClaims) return challenge(p, hello);
    arrive(p, std::move(hello));
  } catch (const WireFormatError& e) {
    reject(p, cat("its hello is malformed (", e.what(), ")"));
  } catch (const Error& e) {
    reject(p, cat("its hello is malformed (", e.text(), ")"));
  }
  return false;
}

bool Rendezvous::otherVersion(Pending& p) {
  // A rank of another version is judged only now, with its hello read to
  // the end: closing a socket with unread bytes would reset it and lose
  // the verdict on the way to that rank.
  if (p.preamble.wireVersion == kWireVersion && p.preamble.libVersion == static_cast<uint32_t>(VIGIL_VERSION_CODE)) {
    return false;
  }
  const std::string cause =
      cat("rank ", p.preamble.rank, " (", p.from, ") runs vigil ", versionText(p.preamble.libVersion),
          " with wire version ", p.preamble.wireVersion, ", but the rendezvous root runs vigil ",
          versionText(VIGIL_VERSION_CODE), " with wire version ", kWireVersion,
          first_ ? cat(" like ", first_->where()) : std::string());
  if (policy_ == ClaimPolicy::ConfirmClaims) {
    refuseClaim(p, Errc::BootVersionMismatch, cause);
    return true;
  }
  fail(Errc::BootVersionMismatch, cause);
  // Tell this rank too, in the reply format every version understands.
  sendMessage(p.fd.get(), verdict_->encode(), Deadline::afterMs(2000));
  return true;
}

std::optional<std::string> Rendezvous::checkAgainstFirst(const Hello& h) const {
  const Hello& f = *first_;
  std::string diff;
  auto field = [&](const char* name, long long mine, long long theirs) {
    if (mine == theirs) return;
    diff += cat(diff.empty() ? "" : "; ", name, " is ", mine, " on ", h.where(), " but ", theirs, " on ", f.where());
  };
  field("VIGIL_TIMEOUT_MS (vigilConfig.timeoutMs)", h.timeoutMs, f.timeoutMs);
  field("VIGIL_FINGERPRINT", h.fingerprint, f.fingerprint);
  field("VIGIL_NAN_CHECK", h.nanCheck, f.nanCheck);
  field("VIGIL_BUFFER_GUARD", h.bufferGuard, f.bufferGuard);
  if (h.transport != f.transport) {
    diff += cat(diff.empty() ? "" : "; ", "VIGIL_TRANSPORT is ", toString(static_cast<TransportKind>(h.transport)),
                " on ", h.where(), " but ", toString(static_cast<TransportKind>(f.transport)), " on ", f.where());
  }
  if (diff.empty()) return std::nullopt;
  return diff;
}

void Rendezvous::refuseClaim(Pending& p, Errc errc, const std::string& cause) {
  ErrorBuilder builder(errc);
  Error error = builder.op("init").cause(cause).build();
  RendezvousReply refusal;
  refusal.result = error.result();
  refusal.errorText = error.text();
  refusal.error = error;
  sendMessage(p.fd.get(), refusal.encode(), Deadline::afterMs(2000));
  const std::string what = cat("a claim from ", p.from, " (", error.text(), ")");
  if (refusals_.size() < kRefusalsReported) refusals_.push_back(what);
  ++refusedClaims_;
  claimRefusals_.write(errorId(Errc::BootClaimRefused), ": rendezvous root at ", listener_.address.toString(),
                       " refused ", what, "; the rendezvous goes on");
  p.fd.reset();
}

bool Rendezvous::challenge(Pending& p, const Hello& hello) {
  if (verdict_ || hello.nranks < 1 || hello.rank < 0 || hello.rank >= hello.nranks) {
    arrive(p, hello);  // tells or rejects it at once
    return false;
  }
  if (auto taken = arrived_.find(hello.rank); taken != arrived_.end()) {
    refuseClaim(p, Errc::BootDuplicateRank,
                cat("rank ", hello.rank, " was claimed by ", hello.where(), " from ", p.from, " but ",
                    taken->second.hello.where(), " holds it already"));
    return false;
  }
  // A hello costs nothing to forge where the token is derivable, and one
  // that takes the rank of a real rank not yet here would fail the job. So
  // a claim counts only once the sender confirms it: it echoes a fresh
  // nonce, which a one-shot or replayed hello cannot. Until then it holds
  // nothing, and the real rank's confirmed claim wins.
  JobToken nonce = randomToken();
  p.challenge.assign(1, RendezvousReply::kConfirmRequest);
  p.challenge.insert(p.challenge.end(), nonce.begin(), nonce.end());
  if (sendMessage(p.fd.get(), p.challenge, Deadline::afterMs(2000)) != IoStatus::Done) {
    reject(p, cat("it claimed ", hello.where(), " and went away before confirming"));
    return false;
  }
  p.claim = hello;
  p.deadline = Deadline::afterMs(kPreambleTimeoutMs);
  return true;
}

void Rendezvous::arrive(Pending& p, Hello hello) {
  if (verdict_) {
    // The outcome is already known (a failure): tell the late rank at once.
    sendMessage(p.fd.get(), verdict_->encode(), Deadline::afterMs(2000));
    return;
  }
  if (hello.nranks < 1 || hello.rank < 0 || hello.rank >= hello.nranks) {
    reject(p, cat("it claims rank ", hello.rank, " of ", hello.nranks));
    return;
  }
  if (auto taken = arrived_.find(hello.rank); taken != arrived_.end() && policy_ == ClaimPolicy::ConfirmClaims) {
    // Two confirmed claims: the first holds the rank, the second is told.
    refuseClaim(p, Errc::BootDuplicateRank,
                cat("rank ", hello.rank, " was claimed by ", hello.where(), " from ", p.from, " but ",
                    taken->second.hello.where(), " holds it already"));
    return;
  }
  if (!first_) {
    first_ = hello;
    deadline_ = Deadline::afterMs(hello.connectTimeoutMs);
  }
  Arrival& slot = arrived_[hello.rank];
  const bool duplicate = slot.fd.valid();
  Hello previous = slot.hello;
  if (!duplicate) {
    slot.fd = std::move(p.fd);
    slot.hello = hello;
  }
  if (hello.nranks != first_->nranks) {
    std::string byValue;
    for (const auto& [rank, a] : arrived_) {
      if (!a.fd.valid()) continue;
      byValue += cat(byValue.empty() ? "" : "; ", a.hello.where(), " declared ", a.hello.nranks);
    }
    if (duplicate) byValue += cat("; ", hello.where(), " declared ", hello.nranks);
    fail(Errc::BootWorldSizeMismatch, cat("ranks declared different world sizes: ", byValue));
  } else if (duplicate) {
    fail(Errc::BootDuplicateRank,
         cat("rank ", hello.rank, " was claimed twice: by ", previous.where(), " and by ", hello.where()));
  } else if (auto diff = checkAgainstFirst(hello)) {
    fail(Errc::BootConfigMismatch, cat("ranks disagree on configuration that must agree: ", *diff));
  }
  if (duplicate && verdict_) sendMessage(p.fd.get(), verdict_->encode(), Deadline::afterMs(2000));
  if (verdict_) return;
  VIGIL_LOG_AT(LogLevel::Debug, -1, "rendezvous: ", hello.where(), " arrived (", arrived_.size(), "/", first_->nranks,
               ")");
  if (static_cast<int>(arrived_.size()) == first_->nranks) {
    RendezvousReply table;
    table.ok = true;
    for (const auto& [rank, a] : arrived_) {
      table.peers.push_back({a.hello.hostname, a.hello.hostId, a.hello.pid, a.hello.listenAddress});
    }
    replyAll(table);
    done_ = true;
  }
}

void Rendezvous::fail(Errc errc, const std::string& cause, const std::string& remedy) {
  if (verdict_) return;
  ErrorBuilder builder(errc);
  builder.op("init").cause(cause);
  if (!remedy.empty()) builder.remedy(remedy);
  Error error = builder.build();
  verdict_ = RendezvousReply{};
  verdict_->result = error.result();
  verdict_->errorText = error.text();
  verdict_->error = error;
  VIGIL_LOG_AT(LogLevel::Warn, -1, "rendezvous root at ", listener_.address.toString(), ": ", error.text());
  replyAll(*verdict_);
}

void Rendezvous::replyAll(const RendezvousReply& reply) {
  std::vector<uint8_t> bytes = reply.encode();
  for (auto& [rank, a] : arrived_) {
    if (!a.fd.valid()) continue;
    if (sendMessage(a.fd.get(), bytes, Deadline::afterMs(5000)) != IoStatus::Done) {
      VIGIL_LOG_AT(LogLevel::Warn, -1, "rendezvous root could not answer ", a.hello.where(), " (it went away)");
    }
    a.fd.reset();
  }
}

std::string Rendezvous::describeArrivals() const {
  std::string out;
  for (const auto& [rank, a] : arrived_) {
    out += cat(out.empty() ? "" : ", ", rank, " (", a.hello.hostname, ", pid ", a.hello.pid, ")");
  }
  return out;
}

std::string Rendezvous::describeRefusals() const {
  if (refusals_.empty()) return describeUnconfirmedClaims();
  std::string out = cat("; the root refused ", refusedClaims_, " claim(s): ");
  for (size_t i = 0; i < refusals_.size(); ++i) out += cat(i ? "; " : "", refusals_[i]);
  if (refusedClaims_ > refusals_.size()) out += cat("; and ", refusedClaims_ - refusals_.size(), " more");
  return out + describeUnconfirmedClaims();
}

std::string Rendezvous::describeUnconfirmedClaims() const {
  std::string out;
  size_t shown = 0, total = 0;
  for (const Pending& p : pending_) {
    if (!p.claim) continue;
    if (++total > kRefusalsReported) continue;
    out += cat(shown++ ? ", " : "", p.claim->where(), " from ", p.from);
  }
  if (total == 0) return {};
  if (total > shown) out += cat(" and ", total - shown, " more");
  return cat("; claims not (yet) confirmed: ", out);
}

void Rendezvous::missingRanks() {
  std::vector<int> missing;
  for (int r = 0; r < first_->nranks; ++r) {
    if (!arrived_.count(r)) missing.push_back(r);
  }
  fail(Errc::BootMissingRanks,
       cat("after ", first_->connectTimeoutMs, " ms only ", arrived_.size(), " of ", first_->nranks,
           " ranks reached the rendezvous root at ", listener_.address.toString(), "; arrived: ", describeArrivals(),
           "; missing: ", joinRanks(missing), describeRefusals()),
       cat("start rank(s) ", joinRanks(missing),
           " or find why they did not arrive: do they use the same root info (VIGIL_ROOT_INFO, "
           "or MASTER_ADDR/MASTER_PORT = ",
           listener_.address.toString(),
           "), can their host reach that address (VIGIL_SOCKET_IFNAME), did they crash before init? "
           "Raise VIGIL_CONNECT_TIMEOUT_MS if they start slowly"));
}

// All root servers of this process, so exit and tests can stop them.
struct RootThread {
  std::thread thread;
  EventFd stop;
  std::atomic<bool> finished{false};
};

struct RootRegistry {
  std::mutex mutex;
  std::list<std::unique_ptr<RootThread>> threads;

  void reapFinished() {
    for (auto it = threads.begin(); it != threads.end();) {
      if ((*it)->finished.load()) {
        (*it)->thread.join();
        it = threads.erase(it);
      } else {
        ++it;
      }
    }
  }
};

RootRegistry& registry() {
  static RootRegistry* const r = new RootRegistry();  // immortal: used from exit handlers
  return *r;
}

}  // namespace

void setMaxPendingConnectionsForTesting(size_t limit) {
  gMaxPendingForTesting.store(limit);
}

void startRootServer(Listener listener, const JobToken& token, int idleTimeoutMs) {
  std::vector<Listener> listeners;
  listeners.push_back(std::move(listener));
  startRootServer(std::move(listeners), token, idleTimeoutMs, ClaimPolicy::TrustToken);
}

void startRootServer(std::vector<Listener> listeners, const JobToken& token, int idleTimeoutMs, ClaimPolicy policy) {
  auto root = std::make_unique<RootThread>();
  RootThread* self = root.get();
  std::lock_guard lock(registry().mutex);
  registry().reapFinished();
  root->thread = startLibraryThread([self, token, idleTimeoutMs, policy, l = std::move(listeners)]() mutable {
    {
      Rendezvous rendezvous(std::move(l), token, idleTimeoutMs, policy, self->stop.fd());
      rendezvous.run();
    }  // closes the listener and every connection before we say we are done
    self->finished.store(true);
  });
  registry().threads.push_back(std::move(root));
}

void stopAllRootServers() {
  std::lock_guard lock(registry().mutex);
  for (auto& t : registry().threads) t->stop.signal();
  for (auto& t : registry().threads) t->thread.join();
  registry().threads.clear();
}

int runningRootServers() {
  std::lock_guard lock(registry().mutex);
  registry().reapFinished();
  return static_cast<int>(registry().threads.size());
}

}  // namespace vigil
