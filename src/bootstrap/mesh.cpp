#include "bootstrap/mesh.hpp"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <list>

#include "core/errors.hpp"
#include "core/log.hpp"

namespace vigil {
namespace {

constexpr int kPreambleTimeoutMs = 10000;

struct Incoming {
  Fd fd;
  std::string from;
  Deadline deadline;
  Preamble preamble{};
  size_t have = 0;
};

[[noreturn]] void meshFailed(int rank, int nranks, const std::vector<int>& missing, const std::string& detail) {
  ErrorBuilder(Errc::BootMeshFailed)
      .rank(rank, nranks)
      .op("init")
      .cause("connections to rank(s) ", joinRanks(missing), " did not complete: ", detail)
      .raise();
}

}  // namespace

Mesh connectMesh(const Listener& listener, const std::vector<PeerInfo>& peers, int rank, const JobToken& token,
                 uint32_t libVersion, Deadline deadline, const MeshWatch* watch) {
  const int nranks = static_cast<int>(peers.size());
  const int wakeFd = watch != nullptr ? watch->wakeFd : -1;
  auto checkWatch = [&] {
    if (watch != nullptr) watch->check();  // throws when the mesh must stop
  };
  Mesh mesh;
  mesh.control.resize(peers.size());
  mesh.data.resize(peers.size());

  for (int peer = 0; peer < rank; ++peer) {
    for (ConnKind kind : {ConnKind::Control, ConnKind::Data}) {
      std::string lastError;
      Fd fd;
      while (!fd && !deadline.expired()) {
        fd = connectWithRetry(peers[static_cast<size_t>(peer)].address, deadline, wakeFd, &lastError);
        if (!fd) checkWatch();  // woken: stop if the news is about this mesh
      }
      if (!fd) {
        meshFailed(rank, nranks, {peer},
                   cat("cannot connect to ", peers[static_cast<size_t>(peer)].address.toString(), " (host ",
                       peers[static_cast<size_t>(peer)].hostname, "): ", lastError));
      }
      Preamble p;
      p.kind = static_cast<uint16_t>(kind);
      p.token = token;
      p.rank = rank;
      p.libVersion = libVersion;
      if (sendAll(fd.get(), &p, sizeof p, deadline, wakeFd) != IoStatus::Done) {
        checkWatch();
        meshFailed(rank, nranks, {peer}, "the peer closed the connection during the handshake");
      }
      (kind == ConnKind::Control ? mesh.control : mesh.data)[static_cast<size_t>(peer)] = std::move(fd);
    }
  }

  // Accept 2 connections from every higher rank.
  int expected = 2 * (nranks - 1 - rank);
  std::list<Incoming> incoming;
  std::vector<pollfd> pfds;
  while (expected > 0) {
    if (deadline.expired()) {
      std::vector<int> missing;
      for (int peer = rank + 1; peer < nranks; ++peer) {
        if (!mesh.control[static_cast<size_t>(peer)] || !mesh.data[static_cast<size_t>(peer)]) {
          missing.push_back(peer);
        }
      }
      meshFailed(rank, nranks, missing,
                 "they did not connect to this rank's listener at " + listener.address.toString() +
                     " before the connect timeout");
    }
    checkWatch();
    pfds.clear();
    pfds.push_back({listener.fd.get(), POLLIN, 0});
    pfds.push_back({wakeFd, POLLIN, 0});  // ignored when -1
    Deadline wake = deadline;
    for (Incoming& in : incoming) {
      pfds.push_back({in.fd.get(), POLLIN, 0});
      wake = wake.earlier(in.deadline);
    }
    int rc = ::poll(pfds.data(), pfds.size(), wake.pollTimeoutMs());
    if (rc < 0 && errno != EINTR) break;
    if (pfds[0].revents & POLLIN) {
      while (true) {
        sockaddr_storage from{};
        socklen_t len = sizeof from;
        int fd = ::accept4(listener.fd.get(), reinterpret_cast<sockaddr*>(&from), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) break;
        Fd conn(fd);
        if (!setTcpOptions(fd)) continue;  // reset by its peer already: not a connection of ours
        SocketAddress addr;
        std::memcpy(&addr.storage, &from, len);
        addr.length = len;
        incoming.push_back({std::move(conn), addr.toString(), Deadline::afterMs(kPreambleTimeoutMs)});
      }
    }
    size_t index = 2;
    for (auto it = incoming.begin(); it != incoming.end() && index < pfds.size(); ++index) {
      Incoming& in = *it;
      std::string rejectWhy;
      bool finished = false;
      if (pfds[index].revents != 0) {
        ssize_t n =
            ::recv(in.fd.get(), reinterpret_cast<uint8_t*>(&in.preamble) + in.have, sizeof(Preamble) - in.have, 0);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
          rejectWhy = "it closed the connection before sending a complete preamble";
        } else if (n > 0) {
          in.have += static_cast<size_t>(n);
        }
      }
      if (rejectWhy.empty() && in.have == sizeof(Preamble)) {
        const Preamble& p = in.preamble;
        const bool knownKind =
            p.kind == static_cast<uint16_t>(ConnKind::Control) || p.kind == static_cast<uint16_t>(ConnKind::Data);
        if (p.magic != kWireMagic) {
          rejectWhy = "it did not present vigil's magic";
        } else if (p.token != token) {
          rejectWhy = "it presented another job's token";
        } else if (p.wireVersion != kWireVersion || !knownKind || p.rank <= rank || p.rank >= nranks) {
          rejectWhy =
              cat("its preamble is invalid (wire version ", p.wireVersion, ", kind ", p.kind, ", rank ", p.rank, ")");
        } else {
          auto& slot = (p.kind == static_cast<uint16_t>(ConnKind::Control) ? mesh.control
                                                                           : mesh.data)[static_cast<size_t>(p.rank)];
          if (slot) {
            rejectWhy = cat("rank ", p.rank, " already has this connection");
          } else {
            slot = std::move(in.fd);
            --expected;
            finished = true;
          }
        }
      } else if (rejectWhy.empty() && in.deadline.expired()) {
        rejectWhy = "it sent no complete preamble within 10 s";
      }
      if (!rejectWhy.empty()) {
        VIGIL_LOG_AT(LogLevel::Warn, rank, errorId(Errc::NetRejected), ": rank ", rank, " closed a connection from ",
                     in.from, " to its listener ", listener.address.toString(), ": ", rejectWhy, "; init goes on");
        finished = true;
      }
      it = finished ? incoming.erase(it) : std::next(it);
    }
  }
  return mesh;
}

}  // namespace vigil
