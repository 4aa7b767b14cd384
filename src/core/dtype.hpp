#pragma once
// Data type and reduction tables.

#include <cstddef>

#include "vigil/vigil.h"

namespace vigil {

inline bool validDataType(int dtype) {
  return dtype >= vigilInt8 && dtype <= vigilInt64Int32;
}
// The built-in operators. A pre-multiplied sum (vigilRedOpCreatePreMulSum)
// reaches the communicator as kRedOpPreMulSum with its scalar in the OpDesc.
inline bool validRedOp(int op) {
  return op >= vigilSum && op <= vigilMaxLoc;
}
inline constexpr vigilRedOp_t kRedOpPreMulSum = static_cast<vigilRedOp_t>(64);
inline bool createdRedOp(int op) {
  return op >= VIGIL_REDOP_CREATED_FIRST;
}

// The (value, index) pair types and the two operators defined on them (and
// only on them).
inline bool isLocPairType(vigilDataType_t dtype) {
  return dtype >= vigilFloat32Int32 && dtype <= vigilInt64Int32;
}
inline bool locRedOp(vigilRedOp_t op) {
  return op == vigilMinLoc || op == vigilMaxLoc;
}

// The bitwise and logical reductions: defined on integer data types only.
inline bool integerOnlyRedOp(vigilRedOp_t op) {
  return op >= vigilBand && op <= vigilLxor;
}

inline bool isFloatingType(vigilDataType_t dtype) {
  return dtype == vigilFloat16 || dtype == vigilFloat32 || dtype == vigilFloat64 || dtype == vigilBfloat16;
}

inline size_t dtypeSize(vigilDataType_t dtype) {
  switch (dtype) {
    case vigilInt8:
    case vigilUint8: return 1;
    case vigilFloat16:
    case vigilBfloat16: return 2;
    case vigilInt32:
    case vigilUint32:
    case vigilFloat32: return 4;
    case vigilInt64:
    case vigilUint64:
    case vigilFloat64: return 8;
    case vigilFloat32Int32:
    case vigilInt32Int32: return 8;
    case vigilFloat64Int32:
    case vigilInt64Int32: return 16;
  }
  return 0;
}

inline bool isFloating(vigilDataType_t dtype) {
  return dtype == vigilFloat16 || dtype == vigilFloat32 || dtype == vigilFloat64 || dtype == vigilBfloat16;
}

const char* dtypeName(vigilDataType_t dtype);
const char* redOpName(vigilRedOp_t op);

}  // namespace vigil
