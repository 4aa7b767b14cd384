#pragma once
// Sockets: addresses, interface choice, listening in a port range, connecting
// and exchanging bytes with a deadline. Every blocking step polls with a
// deadline and an optional wake fd, so no socket call can hang a rank.

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/deadline.hpp"
#include "net/fd.hpp"

namespace vigil {

struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t length = 0;

  int family() const { return storage.ss_family; }
  uint16_t port() const;
  void setPort(uint16_t port);
  std::string toString() const;  // "127.0.0.1:29500", "[::1]:29500"
  std::string host() const;      // without the port

  // Fixed 18-byte form for the wire: family(1) port(2) address(16).
  static constexpr size_t kPackedBytes = 19;
  void pack(uint8_t* out) const;
  static SocketAddress unpack(const uint8_t* in);  // throws on an unknown family
};

// Resolves "host" + port (numeric or DNS). Throws VG-NET-005.
SocketAddress resolveAddress(const std::string& host, uint16_t port);

// The address to bind and advertise, from VIGIL_SOCKET_IFNAME: empty = first
// non-loopback interface that is up (IPv4 preferred), else loopback;
// "name[,name]" = those interfaces; "^name[,name]" = any but those.
// Throws VG-NET-002 listing the interfaces that exist.
SocketAddress selectInterfaceAddress(const std::string& ifnameSpec);

struct Listener {
  Fd fd;
  SocketAddress address;  // with the bound port
};

// Binds `address` (its port is ignored) to a free port of `range`; auto = any.
// Throws VG-NET-001 naming the range and the ports tried.
Listener listenInRange(const SocketAddress& address, PortRange range, const char* what);
// Binds exactly address:port (torchrun's MASTER_PORT). Throws VG-NET-001.
Listener listenExact(const SocketAddress& address, const char* what);
// The same without throwing: 0 and `out` set, or the errno of bind/listen.
int tryListenExact(const SocketAddress& address, Listener& out);

// Non-blocking socket with TCP_NODELAY, CLOEXEC.
Fd makeStreamSocket(int family);
// For a call that fails only when the kernel is out of resources or the fd is not what we
// think it is: a failure throws VG-NET-003 naming `call` and errno rather than going on with
// a socket in an unknown state. Returns rc.
int sysCheck(int rc, const char* call);
void setNonBlocking(int fd);  // throws VG-NET-003
// TCP_NODELAY. False (errno set) when the socket refuses it: an accepted connection may
// already be reset by its peer, which costs that connection, not the listener.
[[nodiscard]] bool setTcpOptions(int fd);

enum class IoStatus { Done, TimedOut, Woken, Closed, Failed };

// Waits for `events` on fd, or for wakeFd (if >= 0) to become readable.
IoStatus waitFd(int fd, short events, Deadline deadline, int wakeFd = -1);

// Connects with a deadline; refused connections are retried until the deadline
// (the listener may not be up yet). Returns an invalid Fd on timeout and sets
// lastError to the errno text of the last attempt.
Fd connectWithRetry(const SocketAddress& address, Deadline deadline, int wakeFd, std::string* lastError);
// One attempt: a refused connection is not retried (the listener is gone).
Fd connectOnce(const SocketAddress& address, Deadline deadline, std::string* lastError);

// Exchange exactly `bytes` bytes on a non-blocking socket, bounded by deadline.
IoStatus sendAll(int fd, const void* data, size_t bytes, Deadline deadline, int wakeFd = -1);
IoStatus recvAll(int fd, void* data, size_t bytes, Deadline deadline, int wakeFd = -1);

// Host identity for diagnostics: the short hostname.
const std::string& localHostName();

// Raises RLIMIT_NOFILE's soft limit to the hard limit once per process: a
// full mesh needs 2 fds per peer per communicator.
void raiseFdLimit();

}  // namespace vigil
