#pragma once
// Run-time choice of the reduction kernel set (internal to src/reduce and its
// tests). The library is built for baseline x86-64, so the AVX2 kernels live
// in functions compiled for that target alone and are only called after the
// CPU has been checked; everything else stays runnable on any x86-64.

#include <cstddef>

#include "vigil/vigil.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define VIGIL_REDUCE_HAVE_AVX2 1
#else
#define VIGIL_REDUCE_HAVE_AVX2 0
#endif

namespace vigil::reduce {

enum class KernelIsa { kScalar, kAvx2 };

// The best set this CPU and OS can run: kAvx2 needs AVX2, F16C and the OS
// saving ymm state.
KernelIsa supportedKernelIsa();

// The set the entry points of reduce.hpp use now.
KernelIsa activeKernelIsa();

// Makes the entry points use `isa` (clamped to supportedKernelIsa()), so that
// tests can run the portable loops as the reference for the vector ones on the
// same machine. Returns the set that was active before.
KernelIsa setKernelIsaForTesting(KernelIsa isa);

// The (value, index) pairs (reduce_loc.cpp): false, having done nothing, for
// any other data type.
bool locReduceInto(void* dst, const void* a, const void* b, size_t count, vigilDataType_t dtype, vigilRedOp_t op);
bool locFillIdentity(void* buf, size_t count, vigilDataType_t dtype, vigilRedOp_t op);
size_t locFindNonFinite(const void* buf, size_t count, vigilDataType_t dtype);

#if VIGIL_REDUCE_HAVE_AVX2
namespace avx2 {

// Same contracts as the entry points of reduce.hpp. Call only when
// supportedKernelIsa() is kAvx2. They return false, having done nothing, for
// what they do not vectorise (integer division, unknown enums), which the
// caller then hands to the portable loops.
bool reduceInto(void* dst, const void* a, const void* b, size_t count, vigilDataType_t dtype, vigilRedOp_t op);
bool divideInPlace(void* buf, size_t count, vigilDataType_t dtype, int divisor);
bool findNonFinite(const void* buf, size_t count, vigilDataType_t dtype, size_t* index);
bool weightedAccumulate(float* acc, float w, const void* x, size_t count, vigilDataType_t xType);

}  // namespace avx2
#endif

}  // namespace vigil::reduce
