#pragma once
// The rendezvous root: a background thread that serves one rendezvous.
// It never trusts a connection: each must present magic + wire version + job
// token within a bounded time and size, or it is closed and logged while the
// others carry on.

#include <cstdint>

#include "net/socket.hpp"
#include "net/wire.hpp"

namespace vigil {

// Starts a root on an already-bound listener. `idleTimeoutMs` bounds the
// wait for the first rank; after that the ranks' connect timeout governs.
void startRootServer(Listener listener, const JobToken& token, int idleTimeoutMs);

// Stops and joins every root thread of this process (process exit, tests).
void stopAllRootServers();

// Number of root threads still running (tests check that none leak).
int runningRootServers();

}  // namespace vigil
