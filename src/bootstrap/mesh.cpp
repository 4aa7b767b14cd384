#include "bootstrap/mesh.hpp"

#include <poll.h>

#include <cerrno>

#include "core/errors.hpp"
#include "core/log.hpp"
#include "net/acceptor.hpp"

namespace vigil {
namespace {

[[noreturn]] void meshFailed(int rank, int nranks, const std::vector<int>& missing, const std::string& detail) {
  ErrorBuilder(Errc::BootMeshFailed)
      .rank(rank, nranks)
      .op("init")
      .cause("connections to rank(s) ", joinRanks(missing), " did not complete: ", detail)
      .raise();
}

std::string describe(PreambleRejection why) {
  switch (why) {
    case PreambleRejection::Closed:
    case PreambleRejection::Failed: return "it closed the connection before sending a complete preamble";
    case PreambleRejection::TimedOut:
      return cat("it sent no complete preamble within ", kPreambleTimeoutMs / 1000, " s");
    case PreambleRejection::NotVigil: return "it did not present vigil's magic";
    case PreambleRejection::OtherJob: return "it presented another job's token";
  }
  return "?";
}

// One rank's mesh: it connects to every lower rank and accepts every higher one.
struct MeshSetup {
  const Listener& listener;
  const std::vector<PeerInfo>& peers;
  int rank;
  int nranks;
  const JobToken& token;
  uint32_t libVersion;
  Deadline deadline;
  const MeshWatch* watch;

  int wakeFd() const { return watch != nullptr ? watch->wakeFd : -1; }
  void checkWatch() const {
    if (watch != nullptr) watch->check();  // throws when the mesh must stop
  }
  Fd connectTo(int peer, ConnKind kind) const;
  void acceptHigher(Mesh& mesh) const;
  // Slots a connection from a higher rank; the reason it is refused, if it is.
  std::string place(Mesh& mesh, AcceptedConnection& conn) const;
  [[noreturn]] void timedOut(const Mesh& mesh) const;
};

Fd MeshSetup::connectTo(int peer, ConnKind kind) const {
  const PeerInfo& info = peers[static_cast<size_t>(peer)];
  std::string lastError;
  Fd fd;
  // News that came before this connect (a split signals it up front) is
  // read first: it would otherwise end the first attempt with a socket
  // opened and dropped, which the peer logs as a rejected connection.
  checkWatch();
  while (!fd && !deadline.expired()) {
    fd = connectWithRetry(info.address, deadline, wakeFd(), &lastError);
    if (!fd) checkWatch();  // woken: stop if the news is about this mesh
  }
  if (!fd) {
    meshFailed(rank, nranks, {peer},
               cat("cannot connect to ", info.address.toString(), " (host ", info.hostname, "): ", lastError));
  }
  Preamble p;
  p.kind = static_cast<uint16_t>(kind);
  p.token = token;
  p.rank = rank;
  p.libVersion = libVersion;
  if (sendAll(fd.get(), &p, sizeof p, deadline, wakeFd()) != IoStatus::Done) {
    checkWatch();
    meshFailed(rank, nranks, {peer}, "the peer closed the connection during the handshake");
  }
  return fd;
}

std::string MeshSetup::place(Mesh& mesh, AcceptedConnection& conn) const {
  const Preamble& p = conn.preamble;
  const bool knownKind =
      p.kind == static_cast<uint16_t>(ConnKind::Control) || p.kind == static_cast<uint16_t>(ConnKind::Data);
  if (p.wireVersion != kWireVersion || !knownKind || p.rank <= rank || p.rank >= nranks) {
    return cat("its preamble is invalid (wire version ", p.wireVersion, ", kind ", p.kind, ", rank ", p.rank, ")");
  }
  auto& slot =
      (p.kind == static_cast<uint16_t>(ConnKind::Control) ? mesh.control : mesh.data)[static_cast<size_t>(p.rank)];
  if (slot) return cat("rank ", p.rank, " already has this connection");
  slot = std::move(conn.fd);
  return {};
}

void MeshSetup::timedOut(const Mesh& mesh) const {
  std::vector<int> missing;
  for (int peer = rank + 1; peer < nranks; ++peer) {
    if (!mesh.control[static_cast<size_t>(peer)] || !mesh.data[static_cast<size_t>(peer)]) missing.push_back(peer);
  }
  meshFailed(
      rank, nranks, missing,
      "they did not connect to this rank's listener at " + listener.address.toString() + " before the connect timeout");
}

// Accepts 2 connections from every higher rank.
void MeshSetup::acceptHigher(Mesh& mesh) const {
  int expected = 2 * (nranks - 1 - rank);
  auto rejected = [&](const std::string& from, const std::string& why) {
    VIGIL_LOG_AT(LogLevel::Warn, rank, errorId(Errc::NetRejected), ": rank ", rank, " closed a connection from ", from,
                 " to its listener ", listener.address.toString(), ": ", why, "; init goes on");
  };
  PreambleAcceptor acceptor(
      token,
      [&](AcceptedConnection conn) {
        std::string why = place(mesh, conn);
        if (why.empty()) {
          --expected;
        } else {
          rejected(conn.from, why);
        }
      },
      [&](const std::string& from, PreambleRejection why, int) { rejected(from, describe(why)); });
  std::vector<pollfd> pfds;
  while (expected > 0) {
    if (deadline.expired()) timedOut(mesh);
    checkWatch();
    pfds.clear();
    pfds.push_back({listener.fd.get(), POLLIN, 0});
    pfds.push_back({wakeFd(), POLLIN, 0});  // ignored when -1
    Deadline wake = acceptor.addPollFds(pfds, deadline);
    int rc = ::poll(pfds.data(), pfds.size(), wake.pollTimeoutMs());
    if (rc < 0 && errno != EINTR) break;
    acceptor.service(pfds.data() + 2, pfds.size() - 2);
    if (pfds[0].revents & POLLIN) acceptor.acceptAll(listener.fd.get());
  }
}

}  // namespace

Mesh connectMesh(const Listener& listener, const std::vector<PeerInfo>& peers, int rank, const JobToken& token,
                 uint32_t libVersion, Deadline deadline, const MeshWatch* watch) {
  const MeshSetup setup{listener, peers, rank, static_cast<int>(peers.size()), token, libVersion, deadline, watch};
  Mesh mesh;
  mesh.control.resize(peers.size());
  mesh.data.resize(peers.size());
  for (int peer = 0; peer < rank; ++peer) {
    mesh.control[static_cast<size_t>(peer)] = setup.connectTo(peer, ConnKind::Control);
    mesh.data[static_cast<size_t>(peer)] = setup.connectTo(peer, ConnKind::Data);
  }
  setup.acceptHigher(mesh);
  return mesh;
}

}  // namespace vigil
