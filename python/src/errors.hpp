#pragma once
// Failures of the binding: a C call's result code and text, or a refusal of
// the binding's own checks, both raised in Python as the vigil.Error subclass
// of the result code (vigil/_errors.py builds it from the text).

#include <pybind11/pybind11.h>

#include <string>

#include "vigil/vigil.h"

namespace vigil::python {

// Thrown by the binding; translated to vigil.Error (and subclasses) when it
// reaches Python.
struct CallError {
  vigilResult_t result;
  std::string text;
};

// Throws CallError with the calling thread's last error for `comm` (NULL:
// the thread's last error) unless `rc` is vigilSuccess.
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
