// The binding's errors: the C API's result code and text become a vigil.Error
// subclass (vigil/_errors.py parses the id, rank, op and seq out of the text),
// and the binding's own refusals are written in the same shape, with ids from
// the one table of ids (src/core/error_ids.def).

#include "errors.hpp"

#include <cstring>
#include <exception>

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

std::string withStop(std::string text) {
  if (!text.empty() && text.back() != '.') text += '.';
  return text;
}

// Raises the Python exception for a CallError; must not throw.
void setPythonError(const CallError& failure) {
  try {
    py::object make = py::module_::import("vigil._errors").attr("from_result");
    py::object error = make(static_cast<int>(failure.result), failure.text);
    PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
  } catch (py::error_already_set& importFailure) {
    importFailure.restore();
  }
}

}  // namespace

void check(vigilResult_t rc, vigilComm_t comm) {
  if (rc == vigilSuccess) return;
  const char* text = vigilGetLastError(comm);
  std::string message = text != nullptr ? text : "";
  if (message.empty()) message = std::string("vigil call failed: ") + vigilGetErrorString(rc);
  throw CallError{rc, std::move(message)};
}

void refuse(const char* id, const Where& where, const std::string& cause, const std::string& remedy) {
  const IdInfo* info = findId(id);
  std::string text = std::string(id) + ": ";
  if (where.rank >= 0) text += "rank " + std::to_string(where.rank) + "/" + std::to_string(where.nranks) + ": ";
  if (!where.op.empty()) text += where.op + ": ";
  text += withStop(cause.empty() && info != nullptr ? info->meaning : cause);
  text += " Remedy: " + withStop(!remedy.empty() ? remedy : (info != nullptr ? info->remedy : "see docs/errors.md"));
  throw CallError{info != nullptr ? info->result : vigilInternalError, std::move(text)};
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
      "_error_string", [](int result) { return std::string(vigilGetErrorString(static_cast<vigilResult_t>(result))); },
      "_error_string(result: int) -> str\n\nThe C API's short text for a result code (vigilGetErrorString).");
}

}  // namespace vigil::python
