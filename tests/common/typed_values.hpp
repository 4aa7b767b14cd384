#pragma once
// Reading and writing elements of any vigil data type as doubles, for
// building inputs and references in tests.

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/dtype.hpp"
#include "reduce/half.hpp"

namespace vigil::test {

inline void storeValue(vigilDataType_t t, void* base, size_t i, double v) {
  auto* p = static_cast<uint8_t*>(base) + i * dtypeSize(t);
  auto put = [&](auto x) { std::memcpy(p, &x, sizeof x); };
  switch (t) {
    case vigilInt8: put(static_cast<int8_t>(static_cast<int64_t>(v))); break;
    case vigilUint8: put(static_cast<uint8_t>(static_cast<int64_t>(v))); break;
    case vigilInt32: put(static_cast<int32_t>(v)); break;
    case vigilUint32: put(static_cast<uint32_t>(static_cast<int64_t>(v))); break;
    case vigilInt64: put(static_cast<int64_t>(v)); break;
    case vigilUint64: put(static_cast<uint64_t>(static_cast<int64_t>(v))); break;
    case vigilFloat16: put(floatToHalf(static_cast<float>(v))); break;
    case vigilFloat32: put(static_cast<float>(v)); break;
    case vigilFloat64: put(v); break;
    case vigilBfloat16: put(floatToBfloat16(static_cast<float>(v))); break;
    // The (value, index) pairs: v and the element's position.
    case vigilFloat32Int32: put(vigilFloat32Int32_t{static_cast<float>(v), static_cast<int32_t>(i)}); break;
    case vigilFloat64Int32: put(vigilFloat64Int32_t{v, static_cast<int32_t>(i), 0}); break;
    case vigilInt32Int32: put(vigilInt32Int32_t{static_cast<int32_t>(v), static_cast<int32_t>(i)}); break;
    case vigilInt64Int32: put(vigilInt64Int32_t{static_cast<int64_t>(v), static_cast<int32_t>(i), 0}); break;
  }
}

inline std::vector<uint8_t> bytesOf(vigilDataType_t t, size_t count) {
  return std::vector<uint8_t>(count * dtypeSize(t));
}

constexpr vigilDataType_t kAllTypes[] = {vigilInt8,   vigilUint8,   vigilInt32,   vigilUint32,  vigilInt64,
                                         vigilUint64, vigilFloat16, vigilFloat32, vigilFloat64, vigilBfloat16};
constexpr vigilRedOp_t kAllOps[] = {vigilSum, vigilProd, vigilMax, vigilMin, vigilAvg};

// An input value that keeps every reduction exact in every type (so any
// order of reduction gives the same bits): products of 1s and 2s, sums of
// small integers that fit bfloat16's 8-bit mantissa.
inline double inputValue(vigilRedOp_t op, int rank, size_t i) {
  if (op == vigilProd) return 1.0 + static_cast<double>((i + static_cast<size_t>(rank)) % 2);
  return static_cast<double>((rank + 1) * static_cast<int>(i % 7 + 1));
}

}  // namespace vigil::test
