// The binding's errors: the C API's last error (vigilGetLastErrorInfo)
// becomes a vigil.Error subclass with its fields as attributes, and the
// binding's own refusals are errors of the same fields, with ids from the one
// table of ids (src/core/error_ids.def) and text from the one formatter.

#include "errors.hpp"

#include <cstring>
#include <exception>

#include "core/error_text.hpp"

namespace py = pybind11;

namespace vigil::python {
namespace {

struct IdInfo {
  const char* id;
  vigilResult_t result;
  const char* meaning;
  const char* remedy;
};

// The table of src/core/error_ids.def, read here too so that the binding's
// messages and vigil.explain() say what docs/errors.md says.
constexpr IdInfo kIds[] = {
#define VIGIL_ERROR(symbol, id, result, meaning, remedy) {id, result, meaning, remedy},
#include "core/error_ids.def"
#undef VIGIL_ERROR
};

const IdInfo* findId(const std::string& id) {
  for (const IdInfo& info : kIds) {
    if (id == info.id) return &info;
  }
  return nullptr;
}

py::object optional(int64_t value) {
  return value >= 0 ? py::object(py::int_(value)) : py::object(py::none());
}

py::object optional(const std::string& value) {
  return !value.empty() ? py::object(py::str(value)) : py::object(py::none());
}

// Raises the Python exception for a CallError; must not throw.
void setPythonError(const CallError& failure) {
  try {
    py::object error = errorObject(failure);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  } catch (py::error_already_set& importFailure) {
    importFailure.restore();
  }
}

}  // namespace

py::object errorObject(const CallError& failure) {
  py::object make = py::module_::import("vigil._errors").attr("from_result");
  return make(static_cast<int>(failure.result), failure.text, py::arg("error_id") = optional(failure.id),
              py::arg("rank") = optional(failure.rank), py::arg("nranks") = optional(failure.nranks),
              py::arg("comm") = optional(failure.comm), py::arg("op") = optional(failure.op),
              py::arg("seq") = optional(failure.seq), py::arg("peer") = optional(failure.peer),
              py::arg("cause") = optional(failure.cause), py::arg("remedy") = optional(failure.remedy));
}

CallError lastCallError(vigilResult_t rc, vigilComm_t comm) {
  CallError failure;
  failure.result = rc;
  vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;
  if (vigilGetLastErrorInfo(comm, &info) == vigilSuccess && *info.text != '\0') {
    failure.id = info.id;
    failure.rank = info.rank;
    failure.nranks = info.nranks;
    failure.comm = info.commName;
    failure.op = info.op;
    failure.seq = info.seq;
    failure.peer = info.peer;
    failure.cause = info.cause;
    failure.remedy = info.remedy;
    failure.text = info.text;
  } else {
    failure.text = std::string("vigil call failed: ") + vigilGetErrorString(rc);
    failure.cause = failure.text;
  }
  return failure;
}

void check(vigilResult_t rc, vigilComm_t comm) {
  if (rc != vigilSuccess) throw lastCallError(rc, comm);
}

void refuse(const char* id, const Where& where, const std::string& cause, const std::string& remedy) {
  const IdInfo* info = findId(id);
  CallError failure;
  failure.result = info != nullptr ? info->result : vigilInternalError;
  failure.id = id;
  failure.rank = where.rank;
  failure.nranks = where.rank >= 0 ? where.nranks : -1;
  failure.op = where.op;
  failure.cause = withFullStop(cause.empty() && info != nullptr ? info->meaning : cause);
  failure.remedy = withFullStop(!remedy.empty() ? remedy : (info != nullptr ? info->remedy : "see docs/errors.md"));
  failure.text =
      errorText({failure.id, failure.rank, failure.nranks, "", failure.op, -1, failure.cause, failure.remedy});
  throw failure;
}

void registerErrors(py::module_& m) {
  py::register_exception_translator([](std::exception_ptr pending) {
    try {
      if (pending) std::rethrow_exception(pending);
    } catch (const CallError& failure) {
      setPythonError(failure);
    }
  });

  m.def(
      "_error_table",
      [] {
        py::list rows;
        for (const IdInfo& info : kIds) {
          rows.append(py::make_tuple(info.id, static_cast<int>(info.result), info.meaning, info.remedy));
        }
        return rows;
      },
      "_error_table() -> list[tuple[str, int, str, str]]\n\n"
      "Every error id of this build as (id, result code, meaning, remedy): the table that docs/errors.md\n"
      "documents. vigil.explain() is the public way to read it.");
  m.def(
      "_error_text",
      [](const std::string& id, int rank, int nranks, const std::string& op, const std::string& cause,
         const std::string& remedy) {
        return errorText({id, rank, nranks, "", op, -1, withFullStop(cause), withFullStop(remedy)});
      },
      py::arg("error_id"), py::arg("rank"), py::arg("nranks"), py::arg("op"), py::arg("cause"), py::arg("remedy"),
      "_error_text(error_id: str, rank: int, nranks: int, op: str, cause: str, remedy: str) -> str\n\n"
      "The text of an error from its fields, in vigil's one shape (rank < 0: no rank part; nranks < 0: no\n"
      "count). The Python layer's own errors are written with it.");
  m.def(
      "_error_string", [](int result) { return std::string(vigilGetErrorString(static_cast<vigilResult_t>(result))); },
      "_error_string(result: int) -> str\n\nThe C API's short text for a result code (vigilGetErrorString).");
}

}  // namespace vigil::python
