#include "core/dtype.hpp"

namespace vigil {

const char* dtypeName(vigilDataType_t dtype) {
  static const char* const kNames[] = {"int8",   "uint8",   "int32",   "uint32",  "int64",
                                       "uint64", "float16", "float32", "float64", "bfloat16"};
  return validDataType(dtype) ? kNames[dtype] : "invalid-dtype";
}

const char* redOpName(vigilRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max",  "min", "avg", "band",
                                       "bor", "bxor", "land", "lor", "lxor"};
  return validRedOp(op) ? kNames[op] : "invalid-redop";
}

}  // namespace vigil
