#pragma once
// The rendezvous root: a background thread that serves one rendezvous.
// It never trusts a connection: each must present magic + wire version + job
// token within a bounded time and size, or it is closed and logged while the
// others carry on.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "net/socket.hpp"
#include "net/wire.hpp"

namespace vigil {

// How far the root trusts a hello that presents the job token.
enum class ClaimPolicy {
  // The token is a secret (random root info, VIGIL_JOB_TOKEN): a hello is a
  // rank, and any disagreement (a rank claimed twice, another version) fails
  // the whole rendezvous at once.
  TrustToken,
  // The token is derivable from the launch (host:port/world): a claim counts
  // only once its sender confirms it (echoes a nonce), and a claim of a rank
  // already held or from another version is refused alone (VG-BOOT-012 in
  // the log, the sender is told), so one forged hello cannot fail the job.
  ConfirmClaims,
};

// Starts a root on an already-bound listener. `idleTimeoutMs` bounds the
// wait for the first rank; after that the ranks' connect timeout governs.
void startRootServer(Listener listener, const JobToken& token, int idleTimeoutMs);
// The same on several listeners (one address each), with a claim policy.
void startRootServer(std::vector<Listener> listeners, const JobToken& token, int idleTimeoutMs, ClaimPolicy policy);

// A root keeps at most this many connections that have not yet identified
// themselves; at the limit it closes the oldest of them to make room, so idle
// strangers can never lock the real ranks out.
constexpr size_t kMaxPendingConnections = 4096;
// Test seam: roots started afterwards use `limit` (0 restores the default).
void setMaxPendingConnectionsForTesting(size_t limit);

// Stops and joins every root thread of this process (process exit, tests).
void stopAllRootServers();

// Number of root threads still running (tests check that none leak).
int runningRootServers();

}  // namespace vigil
