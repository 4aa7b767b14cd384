#pragma once
// Fault reporting: turns what the transport and the control plane saw into
// an error a person can act on (which rank, which op and sequence number,
// which peer, what happened, what to do). It reads the group's facts (the
// peers' hosts and pids, their states on the control plane, the op in
// progress) and decides nothing about the communicator's lifecycle: the
// communicator keeps the error and tells the peers (fault_report.cpp).

#include <span>
#include <string>
#include <vector>

#include "comm/op_state.hpp"
#include "control/control_plane.hpp"
#include "core/config.hpp"
#include "core/errors.hpp"
#include "transport/transport.hpp"

namespace vigil {

class FaultReporter {
 public:
  // How long a closed data connection waits for the control plane's word on why.
  static constexpr int kVerdictWaitMs = 1000;
  // The references are the communicator's own, which outlives this.
  FaultReporter(int rank, int nranks, const std::string& commName, const CommConfig& config,
                const std::vector<PeerInfo>& peers, ControlPlane& control, std::span<const int> allPeers)
      : rank_(rank),
        nranks_(nranks),
        commName_(commName),
        config_(config),
        peers_(peers),
        control_(control),
        allPeers_(allPeers) {}

  ErrorBuilder error(Errc errc) const { return ErrorBuilder(errc).rank(rank_, nranks_).comm(commName_); }
  // The communicator serves `outerName` (a hierarchy's step communicator):
  // ranks are named also as ranks of that one.
  void serve(const std::string& outerName, std::vector<int> outerRanks);

  // "rank 3 (host h, pid 42)"
  std::string describePeer(int peer) const;
  // "rank 3", or for the communicators of a hierarchy "rank 3 (rank 6 of 'c1')".
  std::string rankLabel(int peer) const;
  std::string rankNumber(int peer) const;  // the same without "rank "
  std::string rankLabels(const std::vector<int>& peers) const;

  // `peer` is gone (state `s`) while `op` needs it.
  Error peerGone(int peer, const PeerState& s, const OpState& op) const;
  // This rank runs `mine`, `peer` runs (or sent) `theirs`.
  Error mismatch(int peer, const FrameHeader& mine, const FrameHeader& theirs) const;
  // "its send #3 (float32, count 1000), after collective seq 4" for a waiting message.
  static std::string describeUnreceived(const FrameHeader& h);

  // Peers that are gone and have not completed `seq` (-1: any), root causes
  // first: a peer that left because another failed comes last.
  std::vector<int> gonePeersByCause(int64_t seq) const;
  // `peer` itself, or, if it left because of another rank, that rank.
  int rootCauseFor(int peer, int64_t seq) const;

  // The error for a transport fault of `op` (every kind but Fatal, which is
  // the lifecycle's), and whether the peers must be told of it.
  struct Verdict {
    Error error;
    bool tellPeers;
  };
  Verdict judge(const ExchangeFault& fault, const OpState& op);

 private:
  std::vector<int> collectGonePeers(int64_t seq) const;
  // For a timeout report: asks the peers over the control plane where they are.
  std::string describeWhereOthersAre(const ExchangeFault& fault, int64_t seq);

  const int rank_;
  const int nranks_;
  const std::string& commName_;
  const CommConfig& config_;
  const std::vector<PeerInfo>& peers_;
  ControlPlane& control_;
  const std::span<const int> allPeers_;
  std::vector<int> outerRanks_;
  std::string outerName_;
};

}  // namespace vigil
