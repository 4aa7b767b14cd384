#pragma once
// The hierarchy of a communicator whose ranks sit on several hosts, with
// several ranks on at least one: its two step communicators (the ranks of
// this host; the first rank of every host, the leaders) and the three-step
// schedules of the hierarchical collectives over them (hierarchy.cpp).
// The communicator it serves owns it and turns a step's failure into its
// own error; the hierarchy only runs the steps and relays lifecycle events
// to the step communicators through their public calls.

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "algo/op_desc.hpp"
#include "control/control_plane.hpp"
#include "core/errors.hpp"

namespace vigil {

class Communicator;

class Hierarchy {
 public:
  // Splits `outer` (collective over it) when its ranks span several hosts
  // with several ranks on one; null otherwise (the flat algorithms serve).
  static std::unique_ptr<Hierarchy> build(Communicator& outer, const std::vector<PeerInfo>& peers);

  // A step that failed: its own error, which step, and the communicator it ran in.
  struct StepFailure {
    Error error;
    const char* step;        // "inside the host", "across hosts", "back inside the host"
    std::string comm;        // that communicator's name
    std::vector<int> ranks;  // its members, as ranks of the outer communicator
    int outerPeer;           // the step error's peer as a rank of the outer communicator; -1 if none
  };
  // Runs `op` (allreduce, broadcast or barrier of the outer communicator,
  // whose rank is `outerRank` of `outerRanks`) over the step communicators.
  // Throws StepFailure.
  void run(const OpDesc& op, int outerRank, int outerRanks);

  // Every rank waiting in a step communicator must learn of `error`.
  void failSteps(const Error& error);
  void finalize();
  // `cause`: what the step communicators' goodbyes quote when they have no error of their own.
  void destroy(ByeReason reason, const std::string& exitError, const std::optional<Error>& cause);
  // Their peers hear `notice`, the outer communicator's abort notice.
  void abort(const std::string& why, const Error& notice);

  const Communicator& local() const { return *local_; }
  int hosts() const { return hosts_; }

 private:
  Hierarchy() = default;
  std::shared_ptr<Communicator> local_;    // the ranks on this host, by rank in the outer communicator
  std::shared_ptr<Communicator> leaders_;  // the first rank of every host; null on the others
  std::vector<int> hostOf_;                // by outer rank: host index (hosts in order of their first rank)
  std::vector<int> localRankOf_;           // by outer rank: its rank in its host's communicator
  std::vector<int> localRanks_;            // the members of local_, as outer ranks
  std::vector<int> leaderRanks_;           // the members of leaders_, as outer ranks
  int hosts_ = 0;
};

}  // namespace vigil
