// numpy arrays as vigil buffers: dtype mapping, the checks of every array
// argument, reduction ops and data types given by name.

#include "arrays.hpp"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace py = pybind11;

namespace vigil::python {
namespace {

struct TypeRow {
  vigilDataType_t type;
  const char* name;
  size_t size;
};

constexpr TypeRow kTypes[] = {
    {vigilInt8, "int8", 1},
    {vigilUint8, "uint8", 1},
    {vigilInt32, "int32", 4},
    {vigilUint32, "uint32", 4},
    {vigilInt64, "int64", 8},
    {vigilUint64, "uint64", 8},
    {vigilFloat16, "float16", 2},
    {vigilFloat32, "float32", 4},
    {vigilFloat64, "float64", 8},
    {vigilBfloat16, "bfloat16", 2},
    {vigilFloat32Int32, "float32_int32", 8},
    {vigilFloat64Int32, "float64_int32", 16},
    {vigilInt32Int32, "int32_int32", 8},
    {vigilInt64Int32, "int64_int32", 16},
};

struct OpRow {
  vigilRedOp_t op;
  const char* name;
};

constexpr OpRow kOps[] = {{vigilSum, "sum"},      {vigilProd, "prod"}, {vigilMax, "max"},   {vigilMin, "min"},
                          {vigilAvg, "avg"},      {vigilBand, "band"}, {vigilBor, "bor"},   {vigilBxor, "bxor"},
                          {vigilLand, "land"},    {vigilLor, "lor"},   {vigilLxor, "lxor"}, {vigilMinLoc, "minloc"},
                          {vigilMaxLoc, "maxloc"}};

const char* kTypeList =
    "int8, uint8, int32, uint32, int64, uint64, float16, float32, float64, bfloat16 (and for minloc/maxloc the "
    "(value, index) pair dtypes vigil.FLOAT32_INT32, vigil.FLOAT64_INT32, vigil.INT32_INT32, vigil.INT64_INT32)";

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The vigil type a numpy dtype holds natively; nullopt for dtypes vigil has
// no type for (bool, int16, uint16, complex, non-native byte order, ...).
std::optional<vigilDataType_t> nativeType(const py::dtype& dtype) {
  if (dtype.byteorder() == '>') return std::nullopt;  // vigil reduces in the host's byte order (little-endian)
  const char kind = dtype.kind();
  const py::ssize_t size = dtype.itemsize();
  if (kind == 'i' && size == 1) return vigilInt8;
  if (kind == 'i' && size == 4) return vigilInt32;
  if (kind == 'i' && size == 8) return vigilInt64;
  if (kind == 'u' && size == 1) return vigilUint8;
  if (kind == 'u' && size == 4) return vigilUint32;
  if (kind == 'u' && size == 8) return vigilUint64;
  if (kind == 'f' && size == 2) return vigilFloat16;
  if (kind == 'f' && size == 4) return vigilFloat32;
  if (kind == 'f' && size == 8) return vigilFloat64;
  // ml_dtypes.bfloat16 (as used by JAX) names itself; numpy has no bfloat16.
  if (size == 2 && std::string(py::str(dtype.attr("name"))) == "bfloat16") return vigilBfloat16;
  // The (value, index) pairs: a structured dtype of two fields laid out as
  // vigil's structs (vigil.FLOAT32_INT32 ... are such dtypes).
  if (kind == 'V' && !dtype.attr("names").is_none() && py::len(dtype.attr("names")) == 2) {
    const py::tuple names = dtype.attr("names");
    const py::object fields = dtype.attr("fields");
    const py::tuple first = fields[names[0]], second = fields[names[1]];
    const py::dtype v = first[0].cast<py::dtype>(), i = second[0].cast<py::dtype>();
    const bool indexOk = i.kind() == 'i' && i.itemsize() == 4 && first[1].cast<int>() == 0 && i.byteorder() != '>';
    const int indexAt = second[1].cast<int>();
    if (indexOk && v.byteorder() != '>') {
      if (v.kind() == 'f' && v.itemsize() == 4 && indexAt == 4 && size == 8) return vigilFloat32Int32;
      if (v.kind() == 'f' && v.itemsize() == 8 && indexAt == 8 && size == 16) return vigilFloat64Int32;
      if (v.kind() == 'i' && v.itemsize() == 4 && indexAt == 4 && size == 8) return vigilInt32Int32;
      if (v.kind() == 'i' && v.itemsize() == 8 && indexAt == 8 && size == 16) return vigilInt64Int32;
    }
  }
  return std::nullopt;
}

bool isBool(const py::dtype& dtype) {
  return dtype.kind() == 'b';
}

bool isUint16(const py::dtype& dtype) {
  return dtype.kind() == 'u' && dtype.itemsize() == 2;
}

std::string dtypeName(const py::dtype& dtype) {
  return py::str(dtype.attr("name"));
}

}  // namespace

const char* typeName(vigilDataType_t type) {
  for (const TypeRow& row : kTypes) {
    if (row.type == type) return row.name;
  }
  return "?";
}

size_t typeSize(vigilDataType_t type) {
  for (const TypeRow& row : kTypes) {
    if (row.type == type) return row.size;
  }
  return 0;
}

std::optional<vigilDataType_t> parseDataType(const py::object& dtype, const Where& where) {
  if (dtype.is_none()) return std::nullopt;
  if (py::isinstance<vigilDataType_t>(dtype)) return dtype.cast<vigilDataType_t>();
  if (py::isinstance<py::str>(dtype)) {
    const std::string name = lower(dtype.cast<std::string>());
    for (const TypeRow& row : kTypes) {
      if (name == row.name) return row.type;
    }
  }
  std::optional<vigilDataType_t> type;
  try {
    type = nativeType(py::dtype::from_args(dtype));
  } catch (py::error_already_set&) {
    type = std::nullopt;  // not a dtype at all: refused below
  }
  if (!type) {
    refuse("VG-API-002", where, "dtype=" + std::string(py::repr(dtype)) + " is not a vigil data type",
           std::string("pass one of ") + kTypeList + " (a name, a vigil.DataType or a numpy dtype)");
  }
  return type;
}

vigilRedOp_t parseRedOp(const py::object& op, const Where& where) {
  if (py::isinstance<vigilRedOp_t>(op)) return op.cast<vigilRedOp_t>();
  if (py::isinstance<py::str>(op)) {
    const std::string name = lower(op.cast<std::string>());
    for (const OpRow& row : kOps) {
      if (name == row.name) return row.op;
    }
  }
  refuse("VG-API-003", where, "op=" + std::string(py::repr(op)) + " is not a reduction",
         "pass one of 'sum', 'prod', 'max', 'min', 'avg', 'band', 'bor', 'bxor', 'land', 'lor', 'lxor', 'minloc', "
         "'maxloc' or a vigil.ReduceOp");
}

py::array requireArray(const py::object& value, const char* name, const Where& where, bool output) {
  if (!py::isinstance<py::array>(value)) {
    refuse("VG-PY-001", where,
           std::string(name) + " is a " + std::string(py::str(py::type::of(value).attr("__name__"))) +
               ", not a numpy array",
           "pass a numpy.ndarray (numpy.asarray() converts lists and other buffers)");
  }
  py::array array = py::reinterpret_borrow<py::array>(value);
  if (!(array.flags() & py::array::c_style)) {
    refuse("VG-PY-001", where, std::string(name) + " (" + describe(array) + ") is not C-contiguous",
           "pass a C-contiguous array: numpy.ascontiguousarray() makes one (vigil reads and writes memory in order)");
  }
  if (output && !array.writeable()) {
    refuse("VG-PY-001", where, std::string(name) + " (" + describe(array) + ") is read-only",
           "pass a writeable array for outputs (or out=None for a new one)");
  }
  return array;
}

vigilDataType_t elementType(const py::array& array, const char* name, std::optional<vigilDataType_t> explicitType,
                            const Where& where) {
  const py::dtype dtype = array.dtype();
  const std::optional<vigilDataType_t> native = nativeType(dtype);
  if (explicitType) {
    if (native == explicitType) return *explicitType;
    if (*explicitType == vigilBfloat16 && isUint16(dtype)) return vigilBfloat16;
    refuse("VG-PY-001", where,
           std::string(name) + " has dtype " + dtypeName(dtype) + " but dtype='" + typeName(*explicitType) +
               "' was passed",
           "leave dtype= out (the array's dtype is used), or pass dtype='bfloat16' with a uint16 array that holds "
           "bfloat16 bit patterns");
  }
  if (!native) {
    const std::string hint =
        isUint16(dtype) ? "; a uint16 array that holds bfloat16 values needs dtype='bfloat16'" : std::string();
    refuse("VG-PY-001", where, std::string(name) + " has dtype " + dtypeName(dtype) + ", which vigil has no type for",
           std::string("use one of ") + kTypeList + hint);
  }
  return *native;
}

Moved movedType(const py::array& array, const char* name, std::optional<vigilDataType_t> explicitType,
                const Where& where) {
  const py::dtype dtype = array.dtype();
  if (explicitType || nativeType(dtype)) return {elementType(array, name, explicitType, where), 1};
  // bool, int16, uint16, complex, other structured dtypes, ...: their bytes.
  return {vigilUint8, static_cast<size_t>(dtype.itemsize())};
}

Moved reducedType(const py::array& array, const char* name, std::optional<vigilDataType_t> explicitType,
                  vigilRedOp_t op, const Where& where) {
  const py::dtype dtype = array.dtype();
  std::string opName = std::to_string(int(op));
  for (const OpRow& row : kOps) {
    if (row.op == op) opName = row.name;
  }
  if (!explicitType && isBool(dtype)) {
    // numpy bools are bytes of 0 or 1, which these reductions keep 0 or 1.
    const bool defined = op == vigilBand || op == vigilBor || op == vigilBxor || op == vigilLand || op == vigilLor ||
                         op == vigilLxor || op == vigilMax || op == vigilMin;
    if (!defined) {
      refuse("VG-API-003", where, "reduction " + opName + " is not defined on the bool array " + name,
             "reduce bools with 'land', 'lor', 'lxor', 'band', 'bor', 'bxor', 'max' or 'min'; to count them, reduce "
             "x.astype(numpy.int32) with 'sum'");
    }
    return {vigilUint8, 1};
  }
  if (!explicitType && dtype.kind() == 'c' && dtype.byteorder() != '>' &&
      (dtype.itemsize() == 8 || dtype.itemsize() == 16)) {
    // A complex sum is the sum of the real and the imaginary parts.
    if (op != vigilSum && op != vigilAvg) {
      refuse("VG-API-003", where,
             "reduction " + opName + " is not defined on the complex array " + std::string(name) + " (" +
                 dtypeName(dtype) + ")",
             "reduce complex arrays with 'sum' or 'avg'");
    }
    return {dtype.itemsize() == 8 ? vigilFloat32 : vigilFloat64, 2};
  }
  return {elementType(array, name, explicitType, where), 1};
}

void requireSameDtype(const py::array& out, const py::array& like, const Where& where) {
  if (out.dtype().equal(like.dtype())) return;
  refuse("VG-PY-001", where,
         "out has dtype " + dtypeName(out.dtype()) + " but the input has " + dtypeName(like.dtype()),
         "pass an out array of the input's dtype (or out=None)");
}

py::array outputArray(const py::object& out, const py::array& like, size_t count, const std::vector<py::ssize_t>& shape,
                      const Where& where) {
  if (out.is_none()) return py::array(like.dtype(), shape);
  py::array array = requireArray(out, "out", where, true);
  requireSameDtype(array, like, where);
  if (static_cast<size_t>(array.size()) != count) {
    refuse("VG-PY-001", where,
           "out (" + describe(array) + ") has " + std::to_string(array.size()) + " elements; this call writes " +
               std::to_string(count),
           "pass an out array of " + std::to_string(count) + " elements (or out=None)");
  }
  return array;
}

std::vector<py::ssize_t> shapeOf(const py::array& array) {
  return std::vector<py::ssize_t>(array.shape(), array.shape() + array.ndim());
}

std::vector<py::ssize_t> shareShape(const py::array& whole, int parts) {
  if (whole.ndim() >= 1 && whole.shape(0) == parts)
    return std::vector<py::ssize_t>(whole.shape() + 1, whole.shape() + whole.ndim());
  return {whole.size() / parts};
}

std::vector<py::ssize_t> stackedShape(const py::array& one, int parts) {
  std::vector<py::ssize_t> shape{parts};
  for (py::ssize_t d = 0; d < one.ndim(); ++d) shape.push_back(one.shape(d));
  return shape;
}

std::vector<size_t> countList(const py::object& value, const char* name, int n, const Where& where) {
  std::vector<size_t> counts;
  bool valid = true;
  try {
    for (py::handle item : py::iter(value)) {
      // Integers only (operator.index): a float count is a bug, not a count.
      PyObject* index = PyNumber_Index(item.ptr());
      if (index == nullptr) throw py::error_already_set();
      const long long v = py::reinterpret_steal<py::object>(index).cast<long long>();
      valid = valid && v >= 0;
      counts.push_back(static_cast<size_t>(v));
    }
  } catch (py::error_already_set&) {
    valid = false;
  } catch (py::cast_error&) {
    valid = false;
  }
  if (!valid || counts.size() != static_cast<size_t>(n)) {
    refuse("VG-PY-001", where,
           std::string(name) + "=" + std::string(py::repr(value)) + " is not a list of " + std::to_string(n) +
               " integers >= 0 (one per rank)",
           std::string("pass one element count per rank of the communicator for ") + name);
  }
  return counts;
}

std::string describe(const py::array& array) {
  std::string shape = "(";
  for (py::ssize_t d = 0; d < array.ndim(); ++d) shape += (d ? ", " : "") + std::to_string(array.shape(d));
  if (array.ndim() == 1) shape += ",";
  return dtypeName(array.dtype()) + " array of shape " + shape + ")";
}

void registerTypes(py::module_& m) {
  py::enum_<vigilDataType_t>(m, "DataType",
                             "The element types of vigil (vigilDataType_t). numpy arrays map to them by dtype;\n"
                             "numpy has no bfloat16, so BFLOAT16 is a uint16 array passed with dtype='bfloat16'\n"
                             "(or an ml_dtypes.bfloat16 array).")
      .value("INT8", vigilInt8)
      .value("UINT8", vigilUint8)
      .value("INT32", vigilInt32)
      .value("UINT32", vigilUint32)
      .value("INT64", vigilInt64)
      .value("UINT64", vigilUint64)
      .value("FLOAT16", vigilFloat16)
      .value("FLOAT32", vigilFloat32)
      .value("FLOAT64", vigilFloat64)
      .value("BFLOAT16", vigilBfloat16)
      .value("FLOAT32_INT32", vigilFloat32Int32)
      .value("FLOAT64_INT32", vigilFloat64Int32)
      .value("INT32_INT32", vigilInt32Int32)
      .value("INT64_INT32", vigilInt64Int32);
  py::enum_<vigilRedOp_t>(m, "ReduceOp",
                          "Reductions (vigilRedOp_t). AVG divides the sum by the rank count (integers truncate);\n"
                          "float16 and bfloat16 are reduced in float32 and rounded once per step.\n"
                          "Wherever an op is taken, its name ('sum', 'prod', 'max', 'min', 'avg') works too.")
      .value("SUM", vigilSum)
      .value("PROD", vigilProd)
      .value("MAX", vigilMax)
      .value("MIN", vigilMin)
      .value("AVG", vigilAvg)
      .value("BAND", vigilBand)
      .value("BOR", vigilBor)
      .value("BXOR", vigilBxor)
      .value("LAND", vigilLand)
      .value("LOR", vigilLor)
      .value("LXOR", vigilLxor)
      .value("MINLOC", vigilMinLoc)
      .value("MAXLOC", vigilMaxLoc);
}

}  // namespace vigil::python
