#pragma once
// Errors the backend raises itself, in vigil's one shape:
//   "VG-API-002: rank 0/2 (comm 'torch-1a2b3c4d'): allreduce: <cause>. Remedy: <remedy>."
// A failed vigil call keeps vigil's own text (vigil::check with the comm).
// Both reach Python as RuntimeError with that text.

#include <string>

#include "vigil/vigil.hpp"

namespace vigil::torchpg {

// The ids this layer uses; the rows are in docs/errors.md.
namespace ids {
inline constexpr const char* kBadDataType = "VG-API-002";       // no vigil type for a reduction
inline constexpr const char* kBadRedOp = "VG-API-003";          // no vigil reduction for a ReduceOp
inline constexpr const char* kBadRoot = "VG-API-004";           // root outside the group
inline constexpr const char* kBadPeer = "VG-API-005";           // peer outside the group, or this rank
inline constexpr const char* kNotSupported = "VG-API-008";      // recv from any source
inline constexpr const char* kTimeout = "VG-OP-001";            // Work.wait(timeout) ran out
inline constexpr const char* kGroupBroken = "VG-COMM-002";      // an earlier error broke the group
inline constexpr const char* kBadTensor = "VG-TORCH-001";       // a tensor argument the backend cannot take
inline constexpr const char* kTooManyTags = "VG-TORCH-002";     // more p2p tags with one peer than channels
inline constexpr const char* kSparseMismatch = "VG-TORCH-003";  // ranks' sparse tensors disagree
inline constexpr const char* kQueueTimeout = "VG-TORCH-004";    // an operation never started within the timeout
}  // namespace ids

// What the peers of a Work.wait() that Ctrl-C interrupted hear: "rank 0
// aborted the communicator (KeyboardInterrupt: SIGINT in Python)".
inline constexpr const char* kInterruptedReason = "KeyboardInterrupt: SIGINT in Python";

// Where an error happened: this rank of the group, the group's communicator
// and the operation.
struct OpSite {
  int rank = -1;
  int size = 0;
  std::string comm;
  const char* op = "";
};

[[noreturn]] void raise(const OpSite& site, vigilResult_t result, const char* id, const std::string& cause,
                        const std::string& remedy);

// Throws vigil::Error with the communicator's last error text (this thread's)
// when a vigil call failed.
void check(vigilResult_t result, vigilComm_t comm);

}  // namespace vigil::torchpg
