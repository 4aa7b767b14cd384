#pragma once
// The communicators alive in this process, so that a process that returns
// from main without destroying them still exits quietly: an exit handler
// says goodbye to their peers and joins their threads before static
// destructors run (the field bug: a watchdog calling into a torn-down runtime).

#include <memory>
#include <string>
#include <vector>

namespace vigil {

class Communicator;

void installExitHandler();
void registerCommunicator(const std::shared_ptr<Communicator>& comm);
// For bindings at interpreter exit: destroys every live communicator,
// telling the peers the process is exiting normally (error empty) or
// because of the uncaught error described.
void destroyAllForExit(const std::string& error);
// The communicators not yet destroyed, kept alive while the caller holds them.
std::vector<std::shared_ptr<Communicator>> liveCommunicators();

}  // namespace vigil
