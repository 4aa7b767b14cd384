#pragma once
// Element-wise reduction kernels used by every reducing collective.
//
// Preconditions (validated by the API layer, not here): dtype and op are
// values of the public enums, counts fit the buffers, and dst/src do not
// overlap. An unknown dtype or op makes these functions do nothing rather than
// abort, so a validation slip upstream shows up as a wrong result that the
// fingerprint/NaN checks can report, never as a dead rank that peers hang on.
//
// Numeric contract, identical on every rank so that all ranks produce the same
// bits:
//  - integer sum/prod wrap modulo 2^bits (two's complement);
//  - float max/min return NaN if either input is NaN, and otherwise one of the
//    inputs as stored: they compare exact values (DAZ does not apply) and
//    give the second input on ties (+0 vs -0);
//  - float16/bfloat16 are widened to float32 per element, combined, and
//    rounded back once (round to nearest even);
//  - vigilAvg reduces as vigilSum; the caller finishes it with divideInPlace;
//  - vigilMinLoc/vigilMaxLoc reduce the (value, index) pair types
//    (reduce_loc.cpp), and nothing else; the other ops never meet those.
// NaN payloads are deterministic too: a NaN result is the first operand's NaN
// (dst's, or a's) if it has one, else the second's; sum/prod/avg quiet it.
//
// The kernels are chosen once per process from the CPU (AVX2 + F16C, else
// portable loops); both sets return the same bits for every input and do not
// depend on the FP environment's rounding mode for the half conversions.

#include <cstddef>

#include "vigil/vigil.h"

namespace vigil::reduce {

// dst[i] = dst[i] OP src[i] for i in [0, count).
void reduceInPlace(void* dst, const void* src, size_t count, vigilDataType_t dtype, vigilRedOp_t op);

// dst[i] = a[i] OP b[i] for i in [0, count), with a as the first operand (the
// role dst plays above). dst may be a itself; otherwise dst must not overlap a
// or b. a and b may overlap each other.
void reduceInto(void* dst, const void* a, const void* b, size_t count, vigilDataType_t dtype, vigilRedOp_t op);

// buf[i] = the identity of op for i in [0, count): 0 for sum (and avg, bor,
// bxor, lor, lxor), 1 for prod and land, all bits set for band, -inf (the
// lowest integer) for max, +inf (the highest integer) for min.
void fillIdentity(void* buf, size_t count, vigilDataType_t dtype, vigilRedOp_t op);

// dst[i] = scalar * src[i] for i in [0, count) (a pre-multiplied sum's
// input), with scalar one element of dtype; in dtype's arithmetic as prod
// (integers wrap, half types through float32, rounded once). dst may be src.
void scaleInto(void* dst, const void* src, size_t count, vigilDataType_t dtype, const void* scalar);

// buf[i] /= divisor for i in [0, count). Integers truncate toward zero; floats
// use IEEE division (half types through float32). divisor must be >= 1 (it is
// the rank count); smaller values do nothing.
void divideInPlace(void* buf, size_t count, vigilDataType_t dtype, int divisor);

// acc[i] += w * x[i] for i in [0, count), in float32, with x float32,
// float16 or bfloat16 (widened exactly; other types do nothing): one
// multiply and one add per element, each rounded (never fused), so every
// kernel set gives the same bits. x may be unaligned. (MoE combine.)
void weightedAccumulate(float* acc, float w, const void* x, size_t count, vigilDataType_t xType);

// Index of the first NaN or +-Inf element (for the float pairs: value), or
// SIZE_MAX if there is none. Integer types never hold one, so they always
// give SIZE_MAX.
size_t findNonFinite(const void* buf, size_t count, vigilDataType_t dtype);

}  // namespace vigil::reduce
