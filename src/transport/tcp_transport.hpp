#pragma once
// The tcp transport: framed messages over one non-blocking data connection
// per peer (the mesh's), every send and receive of a step progressing at
// once in one poll() loop over the step's sockets, the fatal eventfd and
// (collectives) the peer-change eventfd.

#include <poll.h>

#include <vector>

#include "net/fd.hpp"
#include "transport/transport.hpp"

namespace vigil {

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(std::vector<Fd> dataFds) : fds_(std::move(dataFds)) {}

  const char* name() const override { return "tcp"; }
  Capabilities capabilities() const override { return static_cast<Capabilities>(Capability::GatherScatter); }
  ExchangeFault exchange(std::span<const Transfer> transfers, const FrameHeader& header, bool checkFingerprint,
                         Deadline deadline, LivenessWatch& watch, ExchangeWork* work) override;
  std::optional<FrameHeader> unreceived(int peer) override;
  ExchangeFault awaitIncoming(std::span<const int> peers, Deadline deadline, LivenessWatch& watch, int& from) override;
  // Its waits poll the fatal and peer-change eventfds themselves.
  void wakeWaiters() override {}
  // Closing a socket never waits for the peer.
  void abandon() override {}
  RmaDomain* rma() override { return nullptr; }
  LoadStoreDomain* loadStore() override { return nullptr; }

 private:
  enum class Pass { AllDone, Waiting, Failed };
  // Moves every transfer whose lane is free as far as its socket allows; collects in
  // pollFds_ what the rest wait for.
  Pass advance(const FrameHeader& header, bool checkFingerprint, ExchangeFault& fault);
  // One poll() over pollFds_, the fatal eventfd, the peer-change eventfd and (`wakeable`)
  // the wake eventfd. False with `fault` set when the op must end (failure, a peer
  // gone, the deadline) or, woken, give the wait back.
  bool await(Deadline deadline, LivenessWatch& watch, bool& stalled, ExchangeFault& fault, bool wakeable = false);

  std::vector<Fd> fds_;
  std::vector<ActiveTransfer> active_;
  std::vector<uint8_t> claimed_;
  std::vector<pollfd> pollFds_;
  std::vector<int> directRecvPeers_;
};

}  // namespace vigil
