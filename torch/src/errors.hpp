#pragma once
// Errors the backend raises itself, in vigil's one shape:
//   "VG-API-002: rank 0/2 (comm 'torch-1a2b3c4d'): allreduce: <cause>. Remedy: <remedy>."
// A failed vigil call keeps vigil's own error (its fields, from
// vigilGetLastErrorInfo). Both reach Python as RuntimeError with that text.

#include <string>

#include "vigil/vigil.hpp"

namespace vigil::torchpg {

// The ids of the one table (src/core/error_ids.def), by their symbols there:
// ids::TorchBadTensor is {"VG-TORCH-001", vigilInvalidArgument}.
namespace ids {
struct Id {
  const char* id;
  vigilResult_t result;
};
#define VIGIL_ERROR(symbol, id, result, meaning, remedy) inline constexpr Id symbol{id, result};
#include "core/error_ids.def"
#undef VIGIL_ERROR
}  // namespace ids

// How vigil's errors name the timeout of the group's communicators (vigilConfig.timeoutName):
// the torch user set it as the process group's timeout.
inline constexpr const char* kTimeoutName = "the process group's timeout";

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

// Throws vigil::Error for error `id` at `site`, its text made from the fields
// by vigil's one formatter (core/error_text.hpp).
[[noreturn]] void raise(const OpSite& site, ids::Id id, const std::string& cause, const std::string& remedy);

// Throws VG-TORCH-006: an operation issued after the group's threads were
// stopped for the interpreter's exit.
[[noreturn]] void raiseAfterStop(const OpSite& site);

// Throws vigil::Error made from the fields of the communicator's last error
// (vigilGetLastErrorInfo, this thread's) when a vigil call failed.
void check(vigilResult_t result, vigilComm_t comm);

}  // namespace vigil::torchpg
