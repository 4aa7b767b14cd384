#pragma once
// Where a rank learns its rank, the world size and the root from the
// launcher's environment: vigil-run (VIGIL_ROOT_INFO), torchrun
// (MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_*)
// and SLURM (SLURM_PROCID/SLURM_NTASKS), the last two with a root address
// from VIGIL_ROOT_ADDR or MASTER_ADDR/MASTER_PORT.

#include <functional>
#include <string>

#include "bootstrap/root_info.hpp"
#include "core/config.hpp"

namespace vigil {

struct LaunchEnv {
  int rank = -1;
  int nranks = 0;
  std::string launcher;  // "vigil-run", "torchrun", "Open MPI", "SLURM", for logs and errors
  RootInfo root;
  bool hostsRoot = false;  // rank 0 of an address-based launch serves the rendezvous
  std::string rootHost;    // the root's host as given (address-based launches)
  // The token is a secret (VIGIL_ROOT_INFO's random token, or VIGIL_JOB_TOKEN),
  // not only derived from what the launch makes public (host:port/world).
  bool secretToken = false;
};

using EnvLookup = std::function<const char*(const char*)>;

// Throws VG-BOOT-009 (no launcher found) or VG-BOOT-010 (malformed variable).
LaunchEnv resolveLaunchEnv(const EnvLookup& lookup);

// Creates a root: picks the interface and port, starts the rendezvous thread.
RootInfo createRoot(const EnvConfig& env);
// Serves the rendezvous of an address-based launch on exactly the root
// address's port: on that address if it is one of this host's, and on the
// interface vigil uses (VIGIL_SOCKET_IFNAME) unless the root address is a
// loopback literal; never on every interface. Throws VG-NET-001.
void hostRootAt(const LaunchEnv& launch, const EnvConfig& env);

}  // namespace vigil
