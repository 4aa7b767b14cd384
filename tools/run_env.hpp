#pragma once
// What vigil-run puts in the environment of its ranks: vigil's launch variables and
// torchrun's, so that a vigil program and a torch script with env:// init both run unchanged.

#include <string>
#include <vector>

namespace vigil::run {

// Environment of one rank: ours, minus stale launch variables, plus the rank's own, under
// vigil's names and under torchrun's (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE).
std::vector<std::string> rankEnv(const std::string& rootHex, int rank, int n, int notifyFd);

// MASTER_ADDR=127.0.0.1 and a free loopback MASTER_PORT for torch's store, each unless the
// user set it; says on stderr when no port is free.
void setTorchRendezvous();

}  // namespace vigil::run
