#pragma once
// Failures of the binding: a failed C call (its fields, from
// vigilGetLastErrorInfo) or a refusal of the binding's own checks (its
// fields, with text from the library's one formatter, core/error_text.hpp),
// both raised in Python as the vigil.Error subclass of the result code, with
// the fields as attributes.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include "vigil/vigil.h"

namespace vigil::python {

// Thrown by the binding; translated to vigil.Error (and subclasses) when it
// reaches Python. Absent parts: "" and -1.
struct CallError {
  vigilResult_t result = vigilInternalError;
  std::string id;
  int rank = -1;
  int nranks = -1;
  std::string comm;
  std::string op;
  int64_t seq = -1;
  int peer = -1;
  std::string cause;
  std::string remedy;
  std::string text;
};

// The calling thread's last error for `comm` (NULL: the thread's last error)
// as the error of a call that returned `rc`.
CallError lastCallError(vigilResult_t rc, vigilComm_t comm);

// The vigil.Error (subclass) object for a failure, not raised.
pybind11::object errorObject(const CallError& failure);

// Throws lastCallError(rc, comm) unless `rc` is vigilSuccess.
void check(vigilResult_t rc, vigilComm_t comm);

// Where a refusal happened: "rank 0/4: all_reduce" (rank < 0: no rank part).
struct Where {
  int rank = -1;
  int nranks = 0;
  std::string op;
};

// Throws CallError for error `id` of src/core/error_ids.def, in the shape of
// every vigil message: "<id>: rank r/n: <op>: <cause>. Remedy: <remedy>."
// An empty remedy uses the table's.
[[noreturn]] void refuse(const char* id, const Where& where, const std::string& cause, const std::string& remedy = "");

void registerErrors(pybind11::module_& m);

}  // namespace vigil::python
