#include "transport/tcp_transport.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>

namespace vigil {

namespace {

constexpr size_t kHeaderBytes = sizeof(FrameHeader);

enum class Step { Progress, Blocked, Finished, Closed, Error };

// Payload pieces per system call.
constexpr size_t kPieces = 64;

// Moves as many bytes as the socket takes without blocking.
Step progressSend(int fd, ActiveTransfer& a) {
  const size_t total = kHeaderBytes + a.transfer->bytes;
  while (a.done < total) {
    iovec iov[kPieces + 1];
    size_t count = 0;
    if (a.done < kHeaderBytes) iov[count++] = {reinterpret_cast<uint8_t*>(&a.header) + a.done, kHeaderBytes - a.done};
    count += payloadPieces(a, a.done < kHeaderBytes ? 0 : a.done - kHeaderBytes, iov + count, kPieces);
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = count;
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n > 0) {
      a.done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Step::Blocked;
    return (errno == EPIPE || errno == ECONNRESET) ? Step::Closed : Step::Error;
  }
  return Step::Finished;
}

// Reads as many bytes as the socket has; the header is judged before a single payload byte
// lands in the user's buffer (a refused header: Step::Error with `fault` set).
Step progressRecv(int fd, ActiveTransfer& a, const FrameHeader& base, bool checkFingerprint, ExchangeFault& fault) {
  while (true) {
    ssize_t n;
    if (a.done < kHeaderBytes) {
      n = ::recv(fd, reinterpret_cast<uint8_t*>(&a.header) + a.done, kHeaderBytes - a.done, 0);
    } else {
      const size_t off = a.done - kHeaderBytes;
      if (off == a.transfer->payloadBytes()) return Step::Finished;
      iovec iov[kPieces];
      n = ::readv(fd, iov, static_cast<int>(payloadPieces(a, off, iov, kPieces)));
    }
    if (n == 0) return Step::Closed;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return Step::Blocked;
      return errno == ECONNRESET ? Step::Closed : Step::Error;
    }
    const bool headerWasIncomplete = a.done < kHeaderBytes;
    a.done += static_cast<size_t>(n);
    if (headerWasIncomplete && a.done >= kHeaderBytes &&
        !acceptHeader(a.header, *a.transfer, base, checkFingerprint, fault)) {
      return Step::Error;
    }
  }
}

// A drain: the peer's messages, one after the other, as long as whole
// headers are there and the sink wants them. It ends (a.finished) at EOF or
// at a message its sink leaves for a later operation.
Step progressDrain(int fd, ActiveTransfer& a, const FrameHeader& base, bool checkFingerprint, ExchangeFault& fault) {
  while (true) {
    if (a.done == 0) {
      FrameHeader next;
      ssize_t n;
      do {
        n = ::recv(fd, &next, sizeof next, MSG_PEEK | MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        a.finished = true;  // nothing more comes from it: a receive that needs it will say so
        return Step::Finished;
      }
      if (n != static_cast<ssize_t>(sizeof next)) return Step::Blocked;  // the rest of the header follows at once
      if (!a.transfer->sink->wants(next)) {
        a.finished = true;
        return Step::Finished;
      }
    }
    const Step step = progressRecv(fd, a, base, checkFingerprint, fault);
    if (step != Step::Finished) return step;
    a.done = a.segment = a.segmentStart = 0;  // the peer's next message, if it is there
  }
}

}  // namespace

std::optional<FrameHeader> TcpTransport::unreceived(int peer) {
  const int fd = fds_[static_cast<size_t>(peer)].get();
  if (fd < 0) return std::nullopt;
  FrameHeader h;
  // Between operations the stream sits at a message boundary: a waiting
  // message starts with its header (EOF or nothing yet: no message).
  ssize_t n;
  do {
    n = ::recv(fd, &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
  } while (n < 0 && errno == EINTR);
  if (n != static_cast<ssize_t>(sizeof h)) return std::nullopt;
  return h;
}

ExchangeFault TcpTransport::exchange(std::span<const Transfer> transfers, const FrameHeader& header,
                                     bool checkFingerprint, Deadline deadline, LivenessWatch& watch,
                                     ExchangeWork* work) {
  // The vectors are members, reused by every step: no allocation per step.
  active_.clear();
  for (const Transfer& t : transfers) {
    ActiveTransfer a{&t, t.header != nullptr ? *t.header : header};
    a.header.bytes = t.bytes;
    active_.push_back(a);
  }
  claimed_.resize(2 * fds_.size());
  ExchangeFault fault;
  bool stalled = false;
  while (true) {
    const Pass pass = advance(header, checkFingerprint, fault);
    if (pass != Pass::Waiting) return fault;
    // Nothing more moves without waiting: produce the next sends meanwhile.
    if (work != nullptr && work->pending()) {
      work->runOne();
      continue;
    }
    // A lane freed in this pass may have a successor that has not tried yet.
    if (pollFds_.empty()) continue;
    if (!await(deadline, watch, stalled, fault)) return fault;
  }
}

TcpTransport::Pass TcpTransport::advance(const FrameHeader& header, bool checkFingerprint, ExchangeFault& fault) {
  // One in-flight message per (peer, direction): later ones wait their turn,
  // because the byte stream to a peer carries them back to back.
  std::fill(claimed_.begin(), claimed_.end(), 0);
  pollFds_.clear();
  directRecvPeers_.clear();
  bool allDone = true;
  for (ActiveTransfer& a : active_) {
    if (a.finished) continue;
    const bool drain = a.transfer->drain;
    const int peer = a.transfer->peer;
    const int fd = fds_[static_cast<size_t>(peer)].get();
    uint8_t& slot = claimed_[2 * static_cast<size_t>(peer) + (a.transfer->isSend ? 1 : 0)];
    if (slot) {  // behind another message on its lane
      allDone = false;
      continue;
    }
    slot = 1;
    if (a.transfer->waiting()) {  // its payload is not produced yet: it keeps its place
      allDone = false;
      continue;
    }
    const Step step = drain                ? progressDrain(fd, a, header, checkFingerprint, fault)
                      : a.transfer->isSend ? progressSend(fd, a)
                                           : progressRecv(fd, a, header, checkFingerprint, fault);
    if (a.finished) {  // a drain that ended
      slot = 0;
      continue;
    }
    // Unfinished; a drain holds the exchange only while a message is half-way in.
    if (step != Step::Finished && (!drain || a.done > 0)) allDone = false;
    switch (step) {
      case Step::Finished:
        a.finished = true;
        slot = 0;  // the next message on this lane may start in this pass
        continue;
      case Step::Closed:
        fault.kind = ExchangeFault::Kind::PeerClosed;
        fault.peer = peer;
        return Pass::Failed;
      case Step::Error:
        if (fault.kind == ExchangeFault::Kind::None) {  // else a header was refused
          fault.kind = ExchangeFault::Kind::IoError;
          fault.peer = peer;
          fault.err = errno;
        }
        return Pass::Failed;
      case Step::Blocked:
      case Step::Progress: break;
    }
    pollFds_.push_back({fd, static_cast<short>(a.transfer->isSend ? POLLOUT : POLLIN), 0});
    if (!a.transfer->isSend) directRecvPeers_.push_back(peer);
  }
  return allDone ? Pass::AllDone : Pass::Waiting;
}

bool TcpTransport::await(Deadline deadline, LivenessWatch& watch, bool& stalled, ExchangeFault& fault, bool wakeable) {
  std::vector<pollfd>& pfds = pollFds_;
  const size_t fatalIndex = pfds.size();
  pfds.push_back({watch.fatalFd(), POLLIN, 0});
  const int changeFd = watch.peerChangeFd();
  if (changeFd >= 0) pfds.push_back({changeFd, POLLIN, 0});
  size_t wakeIndex = 0;
  if (wakeable && watch.wakeFd() >= 0) {
    wakeIndex = pfds.size();
    pfds.push_back({watch.wakeFd(), POLLIN, 0});
  }

  const Deadline wake = stalled ? deadline : deadline.earlier(watch.stallDeadline());
  const int rc = ::poll(pfds.data(), pfds.size(), wake.pollTimeoutMs());
  if (rc == 0 && !stalled && watch.stallDeadline().expired()) {
    stalled = true;
    watch.onStall();
  }
  if (rc < 0 && errno != EINTR) {
    fault.kind = ExchangeFault::Kind::IoError;
    fault.err = errno;
    return false;
  }
  if (pfds[fatalIndex].revents & POLLIN) {
    fault.kind = ExchangeFault::Kind::Fatal;
    return false;
  }
  if (changeFd >= 0 && (pfds[fatalIndex + 1].revents & POLLIN)) {
    if (const int gone = watch.checkPeers(directRecvPeers_); gone >= 0) {
      fault.kind = ExchangeFault::Kind::PeerGone;
      fault.peer = gone;
      return false;
    }
  }
  if (wakeIndex != 0 && (pfds[wakeIndex].revents & POLLIN)) {
    fault.kind = ExchangeFault::Kind::Woken;
    return false;
  }
  if (rc == 0 && deadline.expired()) {
    fault.kind = ExchangeFault::Kind::TimedOut;
    for (const ActiveTransfer& a : active_) {
      if (!a.finished && !(a.transfer->drain && a.done == 0))
        fault.pending.push_back(
            {a.transfer->peer, a.transfer->isSend, kHeaderBytes + a.transfer->payloadBytes() - a.done});
    }
    return false;
  }
  return true;
}

ExchangeFault TcpTransport::awaitIncoming(std::span<const int> peers, Deadline deadline, LivenessWatch& watch,
                                          int& from) {
  ExchangeFault fault;
  bool stalled = false;
  active_.clear();
  while (true) {
    pollFds_.clear();
    directRecvPeers_.clear();
    for (int p : peers) {
      const int fd = fds_[static_cast<size_t>(p)].get();
      FrameHeader h;
      ssize_t n;
      do {
        n = ::recv(fd, &h, sizeof h, MSG_PEEK | MSG_DONTWAIT);
      } while (n < 0 && errno == EINTR);
      if (n == static_cast<ssize_t>(sizeof h)) {
        from = p;
        return fault;
      }
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
        fault.kind = n == 0 || errno == ECONNRESET ? ExchangeFault::Kind::PeerClosed : ExchangeFault::Kind::IoError;
        fault.peer = p;
        fault.err = n == 0 ? 0 : errno;
        return fault;
      }
      // Part of a header is here: the rest follows at once (it was sent in one piece).
      pollFds_.push_back({fd, POLLIN, 0});
      directRecvPeers_.push_back(p);
    }
    if (!await(deadline, watch, stalled, fault, /*wakeable=*/true)) {
      markAwaited(fault, peers);
      return fault;
    }
  }
}

}  // namespace vigil
