#pragma once
// The ucx transport: framed messages over UCX tagged sends (UCX drives
// verbs rc/ud/dc, TCP, shared memory and CMA behind one API; UCX_TLS and
// UCX_NET_DEVICES choose). Worker addresses travel over the mesh's data
// connections at init; endpoints report a dead peer as an error
// (UCP_ERR_HANDLING_MODE_PEER), never a hang. Waits arm the worker and
// sleep in poll() on its event fd with the fatal and peer-change eventfds.
//
// Tags: the sender's rank in the high 32 bits; the low bits say header (0)
// or payload (1). A message of up to kEagerBytes travels with its header
// in one send and is received into a bounce buffer; a larger one is a
// header message, then (once the receiver accepted the header) the
// payload straight into the user's buffer. Either way the header is judged
// before a payload byte lands in user memory.

#include <memory>

#include "transport/transport.hpp"

namespace vigil {

// Connects the ranks of `setup` over UCX. Throws VG-NET-007 (UCX missing,
// UCX's setup failed, or a peer unreachable through UCX by the deadline),
// quoting UCX's own words.
std::unique_ptr<Transport> connectUcx(TransportSetup& setup);

// Whether this process can load UCX; `why` says why not.
bool ucxAvailable(std::string* why);

// Whether UCX would find an RDMA device here (InfiniBand, RoCE): what makes
// VIGIL_TRANSPORT=auto prefer ucx across hosts.
bool rdmaDevicePresent();

}  // namespace vigil
