// The TCP limit a socket transport works against: two processes (forked)
// joined by one loopback TCP connection, both with TCP_NODELAY and the
// kernel's default buffer sizes.
//   coll "stream":   both sides send `bytes` and receive `bytes` at once from
//                    one thread with non-blocking sockets, as one ring step
//                    does; the figure is per direction (bytes / time).
//   coll "stream1":  one side sends, the other receives (bytes / time).
//   coll "pingpong": 8 bytes there and back; time is half the round trip.
// A sample's time is the larger of the two processes' times, as for the
// collectives. Same command line and JSON as vigil-perf (lib "tcp").
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "../common/perf_common.hpp"

namespace {

[[noreturn]] void SysDie(const char* what) {
  std::fprintf(stderr, "tcp_stream: %s: %s\n", what, std::strerror(errno));
  std::exit(3);
}

void WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) SysDie("send");
    c += k;
    n -= static_cast<size_t>(k);
  }
}

void ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t k = recv(fd, c, n, 0);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) SysDie("recv");
    c += k;
    n -= static_cast<size_t>(k);
  }
}

// Both directions at once from one thread: send what the socket takes,
// receive what has arrived, sleep in poll only when neither can progress.
void Exchange(int fd, const char* out, char* in, size_t n) {
  size_t sent = 0;
  size_t got = 0;
  while (sent < n || got < n) {
    bool progress = false;
    if (sent < n) {
      const ssize_t k = send(fd, out + sent, n - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (k > 0) {
        sent += static_cast<size_t>(k);
        progress = true;
      } else if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
        SysDie("send");
      }
    }
    if (got < n) {
      const ssize_t k = recv(fd, in + got, n - got, MSG_DONTWAIT);
      if (k > 0) {
        got += static_cast<size_t>(k);
        progress = true;
      } else if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        SysDie("recv");
      }
    }
    if (!progress) {
      pollfd p{fd, static_cast<short>((sent < n ? POLLOUT : 0) | (got < n ? POLLIN : 0)), 0};
      poll(&p, 1, -1);
    }
  }
}

// Both processes start a sample together.
void Sync(int fd) {
  char b = 1;
  WriteAll(fd, &b, 1);
  ReadAll(fd, &b, 1);
}

// The sample time both sides agree on: the larger of the two.
double MaxWithPeer(int fd, double mine) {
  double theirs = 0;
  WriteAll(fd, &mine, sizeof mine);
  ReadAll(fd, &theirs, sizeof theirs);
  return std::max(mine, theirs);
}

enum class Kind { kDuplex, kOneWay, kPingPong };

// Runs one kind at one size on both sides; `sender` is the side that sends
// in the one-way and ping-pong cases. Returns per-iteration times.
std::vector<double> RunKind(int fd, bool sender, Kind kind, size_t bytes, const perf::Options& o, char* out, char* in) {
  auto once = [&] {
    switch (kind) {
      case Kind::kDuplex: Exchange(fd, out, in, bytes); break;
      case Kind::kOneWay:
        if (sender) {
          WriteAll(fd, out, bytes);
        } else {
          ReadAll(fd, in, bytes);
        }
        break;
      case Kind::kPingPong:
        if (sender) {
          WriteAll(fd, out, bytes);
          ReadAll(fd, in, bytes);
        } else {
          ReadAll(fd, in, bytes);
          WriteAll(fd, out, bytes);
        }
        break;
    }
  };
  for (int i = 0; i < o.warmup; ++i) once();
  std::vector<double> times;
  for (int s = 0; s < o.samples; ++s) {
    Sync(fd);
    const double t0 = perf::Now();
    for (int i = 0; i < o.iters; ++i) once();
    if (kind == Kind::kOneWay) {
      // The sender's clock stops when the receiver has everything, not when
      // the last bytes are queued in its socket buffer.
      char ack = 0;
      if (sender) {
        ReadAll(fd, &ack, 1);
      } else {
        WriteAll(fd, &ack, 1);
      }
    }
    double t = (perf::Now() - t0) / o.iters;
    if (kind == Kind::kPingPong) t /= 2;  // One way.
    times.push_back(MaxWithPeer(fd, t));
  }
  return times;
}

int ConnectPair(int* child_fd_out) {
  const int lfd = socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) SysDie("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) SysDie("bind");
  if (listen(lfd, 1) != 0) SysDie("listen");
  socklen_t len = sizeof addr;
  if (getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) SysDie("getsockname");
  const int cfd = socket(AF_INET, SOCK_STREAM, 0);
  if (cfd < 0) SysDie("socket");
  if (connect(cfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) SysDie("connect");
  const int afd = accept(lfd, nullptr, nullptr);
  if (afd < 0) SysDie("accept");
  close(lfd);
  const int one = 1;
  setsockopt(afd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  *child_fd_out = cfd;
  return afd;
}

void Report(const char* coll, size_t bytes, const std::vector<double>& times, bool json) {
  perf::Record r;
  r.lib = "tcp";
  r.coll = coll;
  r.nranks = 2;
  r.bytes = bytes;
  r.count = bytes;
  r.dtype = "uint8";
  r.op = "none";
  r.time_s = perf::Summarize(times);
  perf::PrintRecord(r, json);
}

}  // namespace

int main(int argc, char** argv) {
  const perf::Options o = perf::ParseArgs(argc, argv, /*collectives=*/false, /*fork_ranks=*/false);
  const std::vector<size_t> sizes = perf::Sizes(o);
  const size_t max_bytes = std::max<size_t>(sizes.back(), 8);

  int child_fd = -1;
  const int parent_fd = ConnectPair(&child_fd);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) SysDie("fork");
  const bool parent = pid != 0;
  const int fd = parent ? parent_fd : child_fd;
  close(parent ? child_fd : parent_fd);

  // Allocated and touched after the fork so each process faults in its own.
  char* out = perf::AllocTouched<char>(max_bytes);
  char* in = perf::AllocTouched<char>(max_bytes);
  std::memset(out, parent ? 0x5a : 0xa5, max_bytes);

  if (parent) perf::PrintHeader(o.json);
  {
    // Latency needs more calls per sample than bandwidth to rise above the
    // clock and scheduling noise.
    perf::Options pp = o;
    pp.iters = std::max(o.iters, 100);
    const std::vector<double> t = RunKind(fd, parent, Kind::kPingPong, 8, pp, out, in);
    if (parent) Report("pingpong", 8, t, o.json);
  }
  for (size_t bytes : sizes) {
    const std::vector<double> t = RunKind(fd, parent, Kind::kDuplex, bytes, o, out, in);
    if (parent) Report("stream", bytes, t, o.json);
  }
  for (size_t bytes : sizes) {
    const std::vector<double> t = RunKind(fd, parent, Kind::kOneWay, bytes, o, out, in);
    if (parent) Report("stream1", bytes, t, o.json);
  }
  close(fd);
  std::free(out);
  std::free(in);
  if (!parent) _exit(0);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
