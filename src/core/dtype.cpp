#include "core/dtype.hpp"

namespace vigil {

const char* dtypeName(vigilDataType_t dtype) {
  static const char* const kNames[] = {"int8",          "uint8",         "int32",       "uint32",     "int64",
                                       "uint64",        "float16",       "float32",     "float64",    "bfloat16",
                                       "float32_int32", "float64_int32", "int32_int32", "int64_int32"};
  return validDataType(dtype) ? kNames[dtype] : "invalid-dtype";
}

const char* redOpName(vigilRedOp_t op) {
  static const char* const kNames[] = {"sum",  "prod", "max", "min",  "avg",    "band",  "bor",
                                       "bxor", "land", "lor", "lxor", "minloc", "maxloc"};
  if (op == kRedOpPreMulSum) return "premulsum";
  return validRedOp(op) ? kNames[op] : "invalid-redop";
}

}  // namespace vigil
