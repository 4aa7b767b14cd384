#pragma once
// numpy arrays as vigil buffers: which vigil data type an array holds, the
// checks every buffer passes before a C call (ndarray, C-contiguous,
// writeable outputs, matching dtypes and sizes), and reduction ops and
// data types given by name.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "errors.hpp"
#include "vigil/vigil.h"

namespace vigil::python {

const char* typeName(vigilDataType_t type);
size_t typeSize(vigilDataType_t type);

// A data type given as vigil.DataType, a name ("bfloat16", "float32", ...)
// or anything numpy.dtype() accepts; nullopt for None.
std::optional<vigilDataType_t> parseDataType(const pybind11::object& dtype, const Where& where);

// A reduction given as vigil.ReduceOp or a name ("sum", "prod", "max", "min", "avg", and on integer
// arrays "band", "bor", "bxor", "land", "lor", "lxor").
vigilRedOp_t parseRedOp(const pybind11::object& op, const Where& where);

// An argument that must be a C-contiguous numpy array (writeable when it is
// an output); `name` names it in the refusal.
pybind11::array requireArray(const pybind11::object& value, const char* name, const Where& where, bool output);

// The vigil type of an array's elements. `explicitType` (the dtype= argument)
// may only repeat the array's own type or relabel a uint16 array as bfloat16.
vigilDataType_t elementType(const pybind11::array& array, const char* name, std::optional<vigilDataType_t> explicitType,
                            const Where& where);

// How an array travels through a C call: as `type`, `scale` vigil elements
// per array element.
struct Moved {
  vigilDataType_t type;
  size_t scale;
};
// For data movement: its vigil type, or, for a dtype vigil has no type for
// (bool, int16, uint16, complex, structured, ...), its bytes (uint8).
Moved movedType(const pybind11::array& array, const char* name, std::optional<vigilDataType_t> explicitType,
                const Where& where);
// For a reduction by `op`: its vigil type; bool as uint8 for the logical,
// bitwise, max and min reductions; complex as pairs of floats for sum and
// avg; refused (VG-API-003 / VG-PY-001) where the reduction is not defined.
Moved reducedType(const pybind11::array& array, const char* name, std::optional<vigilDataType_t> explicitType,
                  vigilRedOp_t op, const Where& where);

// Refuses an output array whose dtype is not the input's.
void requireSameDtype(const pybind11::array& out, const pybind11::array& like, const Where& where);

// An output array: `out` checked (C-contiguous, writeable, same dtype as
// `like`, `count` elements), or a new array of `shape` when `out` is None.
pybind11::array outputArray(const pybind11::object& out, const pybind11::array& like, size_t count,
                            const std::vector<pybind11::ssize_t>& shape, const Where& where);

// The shape of one rank's share of `whole` split across `parts` ranks: the
// trailing dimensions when the first one is `parts`, else a flat vector.
std::vector<pybind11::ssize_t> shareShape(const pybind11::array& whole, int parts);

// `shape` with a leading dimension `parts` (gather-like outputs).
std::vector<pybind11::ssize_t> stackedShape(const pybind11::array& one, int parts);

std::vector<pybind11::ssize_t> shapeOf(const pybind11::array& array);

// A per-rank list of element counts (or displacements): `n` integers >= 0.
std::vector<size_t> countList(const pybind11::object& value, const char* name, int n, const Where& where);

// "float32 array of shape (2, 3)".
std::string describe(const pybind11::array& array);

void registerTypes(pybind11::module_& m);

}  // namespace vigil::python
