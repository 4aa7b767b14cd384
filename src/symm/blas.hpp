#pragma once
// The BLAS that vigil's GEMM kernels call (symm/gemm.cpp): OpenBLAS, loaded
// with dlopen on first use (Debian: libopenblas-dev / libopenblas0), so
// vigil builds and runs without it and a program that never calls a GEMM
// kernel never starts OpenBLAS's threads. Without it a kernel fails with
// VG-SYM-008 naming the package.

#include <cstddef>
#include <string>

#include "vigil/vigil.h"

namespace vigil::blas {

// `ranksOnHost`: the ranks that share this host's cores; the first call
// gives OpenBLAS its share of them unless OPENBLAS_NUM_THREADS or
// OMP_NUM_THREADS is set.
//
// Where the library came from ("libopenblas.so.0 (OpenBLAS 0.3.21 ...)"); raises VG-SYM-008 when absent.
const std::string& describe(int ranksOnHost);

// C[m x n] = A[m x k] @ B[k x n], row-major, leading dimensions in elements;
// float32 or float64. Raises VG-SYM-008 without a BLAS, VG-API-003 for
// another data type or a dimension past INT_MAX.
void gemm(int ranksOnHost, vigilDataType_t dtype, size_t m, size_t n, size_t k, const void* a, size_t lda, const void* b, size_t ldb,
          void* c, size_t ldc);

}  // namespace vigil::blas
