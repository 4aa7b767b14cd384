#pragma once
// The ucx transport: framed messages over UCX tagged sends (UCX drives
// verbs rc/ud/dc, TCP, shared memory and CMA behind one API; UCX_TLS and
// UCX_NET_DEVICES choose). Worker addresses travel over the mesh's data
// connections at init; endpoints report a dead peer as an error
// (UCP_ERR_HANDLING_MODE_PEER), never a hang. Waits arm the worker and
// sleep in poll() on its event fd with the fatal and peer-change eventfds.
//
// Tags: the sender's rank in the high 24 bits, then header (0) or payload
// (1 and 39 bits of a digest of the payload's header). A message of up to
// kEagerBytes travels with its header in one send and is received into a
// bounce buffer; a larger one is a header message and a payload message,
// whose receive is posted with the op straight into the user's buffer under
// the tag of the header this rank expects: only that payload can land
// there, and its header is judged all the same.
//
// One-sided access (Capability::Rma): UCP memory mapping, packed remote
// keys, put/get and worker flushes.

#include <memory>
#include <string>
#include <vector>

#include "transport/transport.hpp"

namespace vigil {

// Connects the ranks of `setup` over UCX. Throws VG-NET-007 (UCX missing,
// UCX's setup failed, or a peer unreachable through UCX by the deadline),
// quoting UCX's own words.
std::unique_ptr<Transport> connectUcx(TransportSetup& setup);

// Whether this process can load UCX; `why` says why not.
bool ucxAvailable(std::string* why);

// UCX_NET_DEVICES for a VIGIL_SOCKET_IFNAME list ("eth0,eth1"): those
// interfaces for UCX's tcp, plus `rdmaPorts` ("mlx5_0:1") so that naming a
// socket interface never hides an RDMA device from UCX. Empty (UCX chooses)
// for an empty spec or an exclusion ("^docker0").
std::string ucxNetDevices(const std::string& ifnameSpec, const std::vector<std::string>& rdmaPorts);

// Whether a UCX_TLS value names shared-memory transports only ("sm",
// "posix,cma", ...): then peers on this host get endpoints without UCX's
// peer error handling, which those transports lack in UCX 1.13.
bool sharedMemoryTls(const char* tls);

// This host's RDMA device ports as UCX names them ("mlx5_0:1").
std::vector<std::string> rdmaPorts();

// Whether UCX would find an RDMA device here (InfiniBand, RoCE): what makes
// VIGIL_TRANSPORT=auto prefer ucx across hosts.
bool rdmaDevicePresent();

}  // namespace vigil
