#pragma once
// The rendezvous root: a background thread that serves one rendezvous.
// It never trusts a connection: each must present magic + wire version + job
// token within a bounded time and size, or it is closed and logged while the
// others carry on.

#include <cstddef>
#include <cstdint>

#include "net/socket.hpp"
#include "net/wire.hpp"

namespace vigil {

// Starts a root on an already-bound listener. `idleTimeoutMs` bounds the
// wait for the first rank; after that the ranks' connect timeout governs.
void startRootServer(Listener listener, const JobToken& token, int idleTimeoutMs);

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
