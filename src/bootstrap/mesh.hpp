#pragma once
// After the rendezvous: one control and one data connection to every peer.
// Rank i connects to every lower rank and accepts from every higher one; the
// kernel completes connects into the listen backlog, so neither side waits on
// the other's progress. Every accepted connection must present this job's
// preamble; strays are closed and logged without disturbing the job.

#include <functional>
#include <vector>

#include "bootstrap/rendezvous.hpp"
#include "core/deadline.hpp"
#include "net/fd.hpp"
#include "net/socket.hpp"
#include "net/wire.hpp"

namespace vigil {

struct Mesh {
  std::vector<Fd> control;  // by rank; own rank empty
  std::vector<Fd> data;
};

// What a mesh built beside a live communicator (a split) watches: `wakeFd`
// turns readable when `check` may have news; `check` throws to stop (a
// member died, the communicator was aborted).
struct MeshWatch {
  int wakeFd = -1;
  std::function<void()> check;
};

// Throws VG-BOOT-008 naming the ranks whose connections did not complete,
// or what `watch->check` throws.
Mesh connectMesh(const Listener& listener, const std::vector<PeerInfo>& peers, int rank, const JobToken& token,
                 uint32_t libVersion, Deadline deadline, const MeshWatch* watch = nullptr);

}  // namespace vigil
