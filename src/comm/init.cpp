// Communicator creation: listener, rendezvous, mesh, handshake.

#include <unistd.h>

#include "bootstrap/mesh.hpp"
#include "comm/communicator.hpp"
#include "comm/hierarchy.hpp"
#include "comm/registry.hpp"
#include "core/log.hpp"
#include "transport/transport.hpp"

namespace vigil {

std::shared_ptr<Communicator> Communicator::create(int nranks, const RootInfo& root, int rank, const CommConfig& config,
                                                   const InitOverrides& overrides) {
  if (nranks < 1 || rank < 0 || rank >= nranks) {
    ErrorBuilder(Errc::ApiBadRank).op("init").cause("rank ", rank, " of nranks ", nranks, " is out of range").raise();
  }
  installExitHandler();
  raiseFdLimit();
  const EnvConfig& env = processConfig();
  // A bad VIGIL_ALGO fails here, before any connection, like every bad tunable.
  algo::AlgoOverrides::parse(config.algoText);
  const Deadline deadline = Deadline::afterMs(config.connectTimeoutMs);
  const auto started = Clock::now();

  Listener listener = listenInRange(selectInterfaceAddress(env.socketIfname), env.portRange, "peer connections");

  Hello hello;
  hello.nranks = nranks;
  hello.rank = rank;
  hello.libVersion = overrides.libVersion;
  hello.wireVersion = overrides.wireVersion;
  hello.pid = static_cast<uint32_t>(getpid());
  hello.hostname = localHostName();
  hello.hostId = overrides.hostId.empty() ? localHostId() : overrides.hostId;
  hello.listenAddress = listener.address;
  hello.connectTimeoutMs = config.connectTimeoutMs;
  hello.timeoutMs = config.timeoutMs;
  hello.fingerprint = config.fingerprint;
  hello.nanCheck = config.nanCheck;
  hello.bufferGuard = config.bufferGuard;
  hello.transport = static_cast<uint8_t>(config.transport);

  std::vector<PeerInfo> peers = rendezvous(root.address, root.token, hello, deadline);
  Mesh mesh = connectMesh(listener, peers, rank, root.token, overrides.libVersion, deadline);
  listener.fd.reset();  // nobody else may connect once the mesh is complete

  std::string name = config.name.empty() ? cat("c", tokenTag(root.token)) : config.name;
  std::shared_ptr<Communicator> comm =
      assemble(rank, nranks, config, std::move(name), std::move(peers), root.token, std::move(mesh), deadline);
  VIGIL_LOG_AT(LogLevel::Info, rank, "communicator '", comm->name_, "' ready: rank ", rank, "/", nranks, " over ",
               comm->transportName(), comm->hier_ ? " (hierarchical across hosts)" : "", " in ",
               static_cast<int>(secondsSince(started) * 1000), " ms, root ", root.describe());
  return comm;
}

std::shared_ptr<Communicator> Communicator::assemble(int rank, int nranks, const CommConfig& config, std::string name,
                                                     std::vector<PeerInfo> peers, const JobToken& token, Mesh mesh,
                                                     Deadline deadline) {
  TransportSetup setup{
      .rank = rank, .nranks = nranks, .peers = peers, .token = token, .dataFds = mesh.data, .deadline = deadline};
  std::unique_ptr<Transport> transport = connectTransport(config.transport, setup);

  std::shared_ptr<Communicator> comm(new Communicator(rank, nranks, config, std::move(name), token, std::move(peers),
                                                      std::move(mesh.control), std::move(transport)));
  std::vector<int> silent = comm->control_.handshake(deadline);
  if (!silent.empty()) {
    comm->destroy(ByeReason::Abort);
    comm->error(Errc::BootMeshFailed)
        .op("init")
        .cause("rank(s) ", joinRanks(silent),
               " did not confirm the connections before the connect timeout "
               "(they failed or exited during init)")
        .raise();
  }
  Communicator* self = comm.get();
  comm->control_.setFingerprintMismatchHandler(
      [self](const FrameHeader& mine, const FrameHeader& theirs) { self->onNeighbourMismatch(mine, theirs); });
  comm->control_.setProgressProvider([self] { return self->progress(); });
  comm->control_.setWakeHook([self] { self->wakeWaiters(); });
  comm->control_.start();
  registerCommunicator(comm);
  comm->hier_ = Hierarchy::build(*comm, comm->peers_);
  comm->topology_.hierarchical = comm->hier_ != nullptr;
  return comm;
}

Communicator::Communicator(int rank, int nranks, CommConfig config, std::string name, const JobToken& token,
                           std::vector<PeerInfo> peers, std::vector<Fd> controlFds,
                           std::unique_ptr<Transport> transport)
    : rank_(rank),
      nranks_(nranks),
      config_(std::move(config)),
      name_(std::move(name)),
      token_(token),
      peers_(std::move(peers)),
      control_(rank, nranks, std::move(controlFds)),
      transport_(std::move(transport)),
      loadStore_(transport_->loadStore()),
      sendSeq_(static_cast<size_t>(nranks)),
      recvSeq_(static_cast<size_t>(nranks)),
      taggedSendSeq_(static_cast<size_t>(nranks)),
      taggedRecvSeq_(static_cast<size_t>(nranks)),
      unexpected_(static_cast<size_t>(nranks)),
      allPeers_([&] {
        std::vector<int> peers;
        for (int p = 0; p < nranks; ++p) {
          if (p != rank) peers.push_back(p);
        }
        return peers;
      }()),
      faults_(rank_, nranks_, name_, config_, peers_, control_, allPeers_),
      algoOverrides_(algo::AlgoOverrides::parse(config_.algoText)),
      recorder_(static_cast<size_t>(processConfig().flightRecorder)),
      dumpDir_(processConfig().dumpDir) {
  topology_ = algo::Topology{.nranks = nranks_, .loadStore = loadStore_ != nullptr};
  if (config_.groupRanks.size() == static_cast<size_t>(nranks_)) faults_.serve(config_.groupName, config_.groupRanks);
}

Communicator::~Communicator() {
  destroy();
}

}  // namespace vigil
