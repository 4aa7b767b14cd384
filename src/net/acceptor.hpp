#pragma once
// Accepting connections that must identify themselves: each accepted
// connection has kPreambleTimeoutMs to present a preamble with vigil's magic
// and this job's token, read without blocking as its bytes arrive; the
// connections that do are handed to the caller, the others closed and
// reported, while the listener and the other connections carry on. What a
// valid preamble must further hold (wire version, kind, rank) and how many
// strangers to keep is the caller's policy.

#include <poll.h>

#include <cstddef>
#include <functional>
#include <list>
#include <string>
#include <vector>

#include "core/deadline.hpp"
#include "net/fd.hpp"
#include "net/framed_reader.hpp"
#include "net/wire.hpp"

namespace vigil {

// A connection whose preamble carried this job's magic and token.
struct AcceptedConnection {
  Fd fd;
  std::string from;  // the peer's address, for logs
  Preamble preamble;
  Clock::time_point since;  // accepted at
  Deadline deadline;        // kPreambleTimeoutMs after `since`
};

enum class PreambleRejection {
  Closed,    // closed before its preamble was whole
  Failed,    // recv() failed (errno given)
  TimedOut,  // no whole preamble within kPreambleTimeoutMs
  NotVigil,  // another magic
  OtherJob,  // another job's token
};

class PreambleAcceptor {
 public:
  using OnAccepted = std::function<void(AcceptedConnection)>;
  // `error`: errno for Failed, else 0. The connection is closed already.
  using OnRejected = std::function<void(const std::string& from, PreambleRejection why, int error)>;

  PreambleAcceptor(const JobToken& token, OnAccepted onAccepted, OnRejected onRejected);

  // Accepts every connection waiting on the non-blocking listenFd; one that
  // refuses the TCP options (reset by its peer already) is dropped.
  // `beforeKeep`, if set, runs before each new connection is kept: where a
  // caller that bounds its strangers makes room.
  void acceptAll(int listenFd, const std::function<void()>& beforeKeep = {});
  // Appends one pollfd per pending connection, oldest first; returns `wake`
  // or the earliest of their deadlines.
  Deadline addPollFds(std::vector<pollfd>& fds, Deadline wake) const;
  // After poll, before anything else is accepted: `fds` are the `count`
  // pollfds addPollFds appended. Reads the readable connections, hands over
  // or rejects those whose preamble is whole, rejects those out of time.
  void service(const pollfd* fds, size_t count);

  size_t size() const { return pending_.size(); }
  // The oldest pending connection's acceptance time; size() must be > 0.
  Clock::time_point oldestSince() const { return pending_.front().since; }
  // Closes the oldest pending connection, without a report; returns its address.
  std::string dropOldest();

 private:
  struct Pending {
    Fd fd;
    std::string from;
    Clock::time_point since;
    Deadline deadline;
    PreambleReader reader;
  };
  // False when the connection is finished (handed over or rejected).
  bool step(Pending& p, bool readable);

  JobToken token_;
  OnAccepted onAccepted_;
  OnRejected onRejected_;
  std::list<Pending> pending_;  // oldest first
};

}  // namespace vigil
