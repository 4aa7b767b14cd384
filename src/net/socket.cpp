#include "net/socket.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "core/errors.hpp"
#include "core/log.hpp"
#include "net/event_fd.hpp"

namespace vigil {

EventFd::EventFd() : fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  if (!fd_) {
    ErrorBuilder(Errc::CommSystem).cause("eventfd() failed: ", errnoText(errno)).raise();
  }
}

uint16_t SocketAddress::port() const {
  if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in&>(storage).sin_port);
  if (family() == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6&>(storage).sin6_port);
  return 0;
}

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET) reinterpret_cast<sockaddr_in&>(storage).sin_port = htons(port);
  if (family() == AF_INET6) reinterpret_cast<sockaddr_in6&>(storage).sin6_port = htons(port);
}

std::string SocketAddress::host() const {
  char text[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(storage).sin_addr, text, sizeof text);
  } else if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(storage).sin6_addr, text, sizeof text);
  }
  return text;
}

std::string SocketAddress::toString() const {
  return family() == AF_INET6 ? cat("[", host(), "]:", port()) : cat(host(), ":", port());
}

void SocketAddress::pack(uint8_t* out) const {
  std::memset(out, 0, kPackedBytes);
  uint16_t p = port();
  out[0] = family() == AF_INET6 ? 6 : 4;
  out[1] = static_cast<uint8_t>(p >> 8);
  out[2] = static_cast<uint8_t>(p & 0xff);
  if (family() == AF_INET) {
    std::memcpy(out + 3, &reinterpret_cast<const sockaddr_in&>(storage).sin_addr, 4);
  } else {
    std::memcpy(out + 3, &reinterpret_cast<const sockaddr_in6&>(storage).sin6_addr, 16);
  }
}

SocketAddress SocketAddress::unpack(const uint8_t* in) {
  SocketAddress a;
  uint16_t port = static_cast<uint16_t>((in[1] << 8) | in[2]);
  if (in[0] == 4) {
    auto& v4 = reinterpret_cast<sockaddr_in&>(a.storage);
    v4.sin_family = AF_INET;
    v4.sin_port = htons(port);
    std::memcpy(&v4.sin_addr, in + 3, 4);
    a.length = sizeof(sockaddr_in);
  } else if (in[0] == 6) {
    auto& v6 = reinterpret_cast<sockaddr_in6&>(a.storage);
    v6.sin6_family = AF_INET6;
    v6.sin6_port = htons(port);
    std::memcpy(&v6.sin6_addr, in + 3, 16);
    a.length = sizeof(sockaddr_in6);
  } else {
    ErrorBuilder(Errc::BootBadRootInfo).cause("unknown address family ", int(in[0])).raise();
  }
  return a;
}

SocketAddress resolveAddress(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  int rc = getaddrinfo(host.c_str(), nullptr, &hints, &result);
  if (rc != 0 || result == nullptr) {
    ErrorBuilder(Errc::NetBadAddress).cause("cannot resolve '", host, "': ", gai_strerror(rc)).raise();
  }
  // Prefer IPv4: it is what most clusters route.
  addrinfo* pick = result;
  for (addrinfo* it = result; it != nullptr; it = it->ai_next) {
    if (it->ai_family == AF_INET) {
      pick = it;
      break;
    }
  }
  SocketAddress a;
  std::memcpy(&a.storage, pick->ai_addr, pick->ai_addrlen);
  a.length = pick->ai_addrlen;
  a.setPort(port);
  freeaddrinfo(result);
  return a;
}

namespace {

struct InterfaceEntry {
  std::string name;
  SocketAddress address;
  bool loopback;
};

std::vector<InterfaceEntry> listInterfaces() {
  std::vector<InterfaceEntry> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
    int family = it->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    SocketAddress a;
    a.length = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&a.storage, it->ifa_addr, a.length);
    if (family == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<sockaddr_in6&>(a.storage).sin6_addr)) {
      continue;  // link-local needs a scope id on every peer; not routable between hosts
    }
    out.push_back({it->ifa_name, a, (it->ifa_flags & IFF_LOOPBACK) != 0});
  }
  freeifaddrs(list);
  return out;
}

bool nameListed(const std::string& spec, const std::string& name) {
  size_t start = 0;
  while (start <= spec.size()) {
    size_t comma = spec.find(',', start);
    std::string item = spec.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (item == name) return true;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return false;
}

}  // namespace

SocketAddress selectInterfaceAddress(const std::string& spec) {
  std::vector<InterfaceEntry> all = listInterfaces();
  const bool exclude = !spec.empty() && spec[0] == '^';
  const std::string names = exclude ? spec.substr(1) : spec;
  const InterfaceEntry* best = nullptr;
  auto better = [&](const InterfaceEntry& e) {
    if (best == nullptr) return true;
    // IPv4 over IPv6 on the same preference level.
    return best->address.family() == AF_INET6 && e.address.family() == AF_INET;
  };
  for (const InterfaceEntry& e : all) {
    bool eligible;
    if (spec.empty()) {
      eligible = !e.loopback;
    } else {
      eligible = exclude ? !nameListed(names, e.name) : nameListed(names, e.name);
    }
    if (eligible && better(e)) best = &e;
  }
  if (best == nullptr && spec.empty()) {
    for (const InterfaceEntry& e : all) {
      if (e.loopback && better(e)) best = &e;
    }
  }
  if (best == nullptr) {
    std::string known;
    for (const InterfaceEntry& e : all) {
      if (!known.empty()) known += ", ";
      known += cat(e.name, " (", e.address.host(), ")");
    }
    ErrorBuilder(Errc::NetNoInterface)
        .cause("VIGIL_SOCKET_IFNAME='", spec,
               "' matches no interface that is up; interfaces: ", known.empty() ? "none" : known)
        .remedy("set VIGIL_SOCKET_IFNAME to one of: ", known.empty() ? "(none found)" : known)
        .raise();
  }
  SocketAddress a = best->address;
  a.setPort(0);
  return a;
}

int sysCheck(int rc, const char* call) {
  if (rc < 0) ErrorBuilder(Errc::NetSyscall).cause(call, " failed: ", errnoText(errno)).raise();
  return rc;
}

void setNonBlocking(int fd) {
  const int flags = sysCheck(::fcntl(fd, F_GETFL, 0), "fcntl(F_GETFL)");
  sysCheck(::fcntl(fd, F_SETFL, flags | O_NONBLOCK), "fcntl(F_SETFL, O_NONBLOCK)");
}

bool setTcpOptions(int fd) {
  int one = 1;
  return ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0;
}

Fd makeStreamSocket(int family) {
  Fd fd(sysCheck(::socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), "socket()"));
  sysCheck(setTcpOptions(fd.get()) ? 0 : -1, "setsockopt(TCP_NODELAY)");
  return fd;
}

namespace {

// Returns 0 or the errno of bind/listen.
int tryBindListen(int fd, SocketAddress& address) {
  if (::bind(fd, reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
    return errno;
  }
  if (::listen(fd, SOMAXCONN) != 0) return errno;
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len) != 0) return errno;
  SocketAddress actual;
  std::memcpy(&actual.storage, &bound, len);
  actual.length = len;
  address.setPort(actual.port());
  return 0;
}

}  // namespace

Listener listenInRange(const SocketAddress& address, PortRange range, const char* what) {
  Listener out;
  out.address = address;
  if (range.isAuto()) {
    out.fd = makeStreamSocket(address.family());
    out.address.setPort(0);
    if (int err = tryBindListen(out.fd.get(), out.address)) {
      ErrorBuilder(Errc::NetSyscall)
          .cause("cannot listen for ", what, " on ", address.host(), ": ", errnoText(err))
          .raise();
    }
    return out;
  }
  int lastErr = 0;
  for (uint32_t port = range.lo; port <= range.hi; ++port) {
    Fd fd = makeStreamSocket(address.family());
    out.address.setPort(static_cast<uint16_t>(port));
    int err = tryBindListen(fd.get(), out.address);
    if (err == 0) {
      out.fd = std::move(fd);
      return out;
    }
    lastErr = err;
    if (err != EADDRINUSE && err != EACCES) break;  // not a busy port: trying more will not help
  }
  ErrorBuilder(Errc::NetNoFreePort)
      .cause("no free port for ", what, " on ", address.host(), " in VIGIL_PORT_RANGE=", range.describe(),
             ": tried ports ", range.lo, "-", range.hi, ", last error ", errnoText(lastErr))
      .remedy("widen VIGIL_PORT_RANGE (", range.describe(), " has ", range.hi - range.lo + 1,
              " port(s)), set it to 'auto', or stop the processes holding those ports (ss -ltnp)")
      .raise();
}

int tryListenExact(const SocketAddress& address, Listener& out) {
  Listener attempt;
  attempt.address = address;
  attempt.fd = makeStreamSocket(address.family());
  int one = 1;
  sysCheck(::setsockopt(attempt.fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), "setsockopt(SO_REUSEADDR)");
  if (int err = tryBindListen(attempt.fd.get(), attempt.address)) return err;
  out = std::move(attempt);
  return 0;
}

Listener listenExact(const SocketAddress& address, const char* what) {
  Listener out;
  if (int err = tryListenExact(address, out)) {
    ErrorBuilder(Errc::NetNoFreePort)
        .cause("cannot listen for ", what, " on ", address.toString(), ": ", errnoText(err))
        .remedy("choose a free port (MASTER_PORT / VIGIL_ROOT_ADDR) or stop the process holding ", address.port(),
                " (ss -ltnp)")
        .raise();
  }
  return out;
}

IoStatus waitFd(int fd, short events, Deadline deadline, int wakeFd) {
  pollfd fds[2] = {{fd, events, 0}, {wakeFd, POLLIN, 0}};
  nfds_t count = wakeFd >= 0 ? 2 : 1;
  while (true) {
    int rc = ::poll(fds, count, deadline.pollTimeoutMs());
    if (rc < 0) {
      if (errno == EINTR) continue;
      return IoStatus::Failed;
    }
    if (count == 2 && (fds[1].revents & POLLIN)) return IoStatus::Woken;
    if (fds[0].revents != 0) return IoStatus::Done;
    if (deadline.expired()) return IoStatus::TimedOut;
  }
}

namespace {

// One connect attempt: 0 and the connected socket, or the errno of the failure
// (-1 when the wake fd fired).
int tryConnect(const SocketAddress& address, Deadline deadline, int wakeFd, Fd& out) {
  Fd fd = makeStreamSocket(address.family());
  int rc = ::connect(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length);
  int err = rc == 0 ? 0 : errno;
  if (err == EINPROGRESS) {
    IoStatus st = waitFd(fd.get(), POLLOUT, deadline, wakeFd);
    if (st == IoStatus::Woken) return -1;
    if (st == IoStatus::TimedOut) {
      err = ETIMEDOUT;
    } else {
      socklen_t len = sizeof err;
      if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err == 0) out = std::move(fd);
  return err;
}

}  // namespace

Fd connectWithRetry(const SocketAddress& address, Deadline deadline, int wakeFd, std::string* lastError) {
  // Back off between refused attempts (the listener may start later) without
  // sleeping: each pause is a poll on the wake fd, so abort cuts it short.
  int backoffMs = 10;
  while (!deadline.expired()) {
    Fd fd;
    int err = tryConnect(address, deadline, wakeFd, fd);
    if (err < 0) return Fd();
    if (err == 0) return fd;
    if (lastError != nullptr) *lastError = errnoText(err);
    pollfd wake{wakeFd, POLLIN, 0};
    int pauseMs = std::min(backoffMs, deadline.pollTimeoutMs());
    if (::poll(&wake, wakeFd >= 0 ? 1 : 0, pauseMs) > 0) return Fd();
    backoffMs = std::min(backoffMs * 2, 500);
  }
  if (lastError != nullptr && lastError->empty()) *lastError = "deadline passed";
  return Fd();
}

Fd connectOnce(const SocketAddress& address, Deadline deadline, std::string* lastError) {
  Fd fd;
  int err = tryConnect(address, deadline, -1, fd);
  if (err > 0 && lastError != nullptr) *lastError = errnoText(err);
  return fd;
}

IoStatus sendAll(int fd, const void* data, size_t bytes, Deadline deadline, int wakeFd) {
  auto* p = static_cast<const uint8_t*>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      IoStatus st = waitFd(fd, POLLOUT, deadline, wakeFd);
      if (st != IoStatus::Done) return st;
      continue;
    }
    return (errno == EPIPE || errno == ECONNRESET) ? IoStatus::Closed : IoStatus::Failed;
  }
  return IoStatus::Done;
}

IoStatus recvAll(int fd, void* data, size_t bytes, Deadline deadline, int wakeFd) {
  auto* p = static_cast<uint8_t*>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, 0);
    if (n > 0) {
      p += n;
      bytes -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return IoStatus::Closed;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      IoStatus st = waitFd(fd, POLLIN, deadline, wakeFd);
      if (st != IoStatus::Done) return st;
      continue;
    }
    return errno == ECONNRESET ? IoStatus::Closed : IoStatus::Failed;
  }
  return IoStatus::Done;
}

const std::string& localHostName() {
  static const std::string name = [] {
    char buf[256] = {};
    if (gethostname(buf, sizeof buf - 1) != 0) return std::string("unknown-host");
    return std::string(buf);
  }();
  return name;
}

void raiseFdLimit() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlimit limit{};
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
      rlim_t before = limit.rlim_cur;
      limit.rlim_cur = limit.rlim_max;
      if (setrlimit(RLIMIT_NOFILE, &limit) == 0) {
        VIGIL_LOG_AT(LogLevel::Info, -1, "raised the open-file limit from ", before, " to ", limit.rlim_max);
      }
    }
  });
}

}  // namespace vigil
