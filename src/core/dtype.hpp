#pragma once
// Data type and reduction tables.

#include <cstddef>

#include "vigil/vigil.h"

namespace vigil {

inline bool validDataType(int dtype) {
  return dtype >= vigilInt8 && dtype <= vigilBfloat16;
}
inline bool validRedOp(int op) {
  return op >= vigilSum && op <= vigilLxor;
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
  }
  return 0;
}

inline bool isFloating(vigilDataType_t dtype) {
  return dtype == vigilFloat16 || dtype == vigilFloat32 || dtype == vigilFloat64 || dtype == vigilBfloat16;
}

const char* dtypeName(vigilDataType_t dtype);
const char* redOpName(vigilRedOp_t op);

}  // namespace vigil
