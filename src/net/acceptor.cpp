#include "net/acceptor.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <utility>

#include "net/socket.hpp"

namespace vigil {

PreambleAcceptor::PreambleAcceptor(const JobToken& token, OnAccepted onAccepted, OnRejected onRejected)
    : token_(token), onAccepted_(std::move(onAccepted)), onRejected_(std::move(onRejected)) {}

void PreambleAcceptor::acceptAll(int listenFd, const std::function<void()>& beforeKeep) {
  while (true) {
    SocketAddress peer;
    peer.length = sizeof peer.storage;
    int fd =
        ::accept4(listenFd, reinterpret_cast<sockaddr*>(&peer.storage), &peer.length, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return;  // EAGAIN: none left; anything else: the next poll round tries again
    }
    Fd conn(fd);
    if (!setTcpOptions(fd)) continue;  // reset by its peer already: not a connection of ours
    if (beforeKeep) beforeKeep();
    const Clock::time_point now = Clock::now();
    pending_.push_back({std::move(conn), peer.toString(), now,
                        Deadline(now + std::chrono::milliseconds(kPreambleTimeoutMs)), PreambleReader{}});
  }
}

Deadline PreambleAcceptor::addPollFds(std::vector<pollfd>& fds, Deadline wake) const {
  for (const Pending& p : pending_) {
    fds.push_back({p.fd.get(), POLLIN, 0});
    wake = wake.earlier(p.deadline);
  }
  return wake;
}

void PreambleAcceptor::service(const pollfd* fds, size_t count) {
  size_t index = 0;
  for (auto it = pending_.begin(); it != pending_.end() && index < count; ++index) {
    it = step(*it, fds[index].revents != 0) ? std::next(it) : pending_.erase(it);
  }
}

bool PreambleAcceptor::step(Pending& p, bool readable) {
  ReadStatus st = readable ? p.reader.read(p.fd.get()) : ReadStatus::NeedMore;
  std::optional<PreambleRejection> why;
  switch (st) {
    case ReadStatus::NeedMore:
      if (!p.deadline.expired()) return true;
      why = PreambleRejection::TimedOut;
      break;
    case ReadStatus::Closed: why = PreambleRejection::Closed; break;
    case ReadStatus::Failed:
    case ReadStatus::TooLarge:  // not for a fixed size
      why = PreambleRejection::Failed;
      break;
    case ReadStatus::Complete:
      if (p.reader.preamble().magic != kWireMagic) {
        why = PreambleRejection::NotVigil;
      } else if (p.reader.preamble().token != token_) {
        why = PreambleRejection::OtherJob;
      }
      break;
  }
  if (why) {
    p.fd.reset();
    onRejected_(p.from, *why, *why == PreambleRejection::Failed ? p.reader.error() : 0);
    return false;
  }
  onAccepted_({std::move(p.fd), std::move(p.from), p.reader.preamble(), p.since, p.deadline});
  return false;
}

std::string PreambleAcceptor::dropOldest() {
  std::string from = std::move(pending_.front().from);
  pending_.pop_front();
  return from;
}

}  // namespace vigil
