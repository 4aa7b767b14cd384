#include "symm/blas.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <mutex>

#include "core/errors.hpp"
#include "core/log.hpp"
#include "core/strcat.hpp"

namespace vigil::blas {

namespace {

// The CBLAS ABI (cblas.h): enums are ints, blasint is int in Debian's
// OpenBLAS (LP64).
constexpr int kRowMajor = 101;
constexpr int kNoTrans = 111;
using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*,
                       int);
using Dgemm = void (*)(int, int, int, int, int, int, double, const double*, int, const double*, int, double, double*,
                       int);
using SetThreads = void (*)(int);
using GetConfig = const char* (*)();

struct Library {
  Sgemm sgemm = nullptr;
  Dgemm dgemm = nullptr;
  std::string where;
  std::string why;  // when absent
};

// OpenBLAS starts a thread per core; ranks that share a host would
// oversubscribe it, so unless the user chose (OPENBLAS_NUM_THREADS,
// OMP_NUM_THREADS) each rank gets its share of the cores. (Threads-as-ranks
// share one process and one pool: the setting is the same for all.)
void chooseThreads(void* lib, int ranksOnHost, std::string& where) {
  auto set = reinterpret_cast<SetThreads>(::dlsym(lib, "openblas_set_num_threads"));
  if (set == nullptr || std::getenv("OPENBLAS_NUM_THREADS") != nullptr || std::getenv("OMP_NUM_THREADS") != nullptr) {
    return;
  }
  const long cores = ::sysconf(_SC_NPROCESSORS_ONLN);
  const int threads = static_cast<int>(std::max(1L, cores / std::max(1, ranksOnHost)));
  set(threads);
  where += cat(", ", threads, " thread(s) per rank: ", ranksOnHost, " rank(s) on ", cores, " cores");
}

Library load(int ranksOnHost) {
  Library l;
  void* lib = nullptr;
  std::string tried;
  for (const char* name : {"libopenblas.so.0", "libopenblas.so", "libblas.so.3"}) {
    lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib != nullptr) {
      l.sgemm = reinterpret_cast<Sgemm>(::dlsym(lib, "cblas_sgemm"));
      l.dgemm = reinterpret_cast<Dgemm>(::dlsym(lib, "cblas_dgemm"));
      if (l.sgemm != nullptr && l.dgemm != nullptr) {
        auto config = reinterpret_cast<GetConfig>(::dlsym(lib, "openblas_get_config"));
        l.where = cat(name, config != nullptr ? cat(" (OpenBLAS ", config(), ")") : std::string(" (CBLAS)"));
        chooseThreads(lib, ranksOnHost, l.where);
        VIGIL_LOG_AT(LogLevel::Info, -1, "symmetric GEMM kernels use ", l.where);
        return l;  // never unloaded: its threads live as long as the process
      }
      tried += cat(name, " has no cblas_sgemm/cblas_dgemm; ");
      ::dlclose(lib);
      l.sgemm = nullptr;
      l.dgemm = nullptr;
    } else {
      const char* err = ::dlerror();
      tried += cat(err != nullptr ? err : name, "; ");
    }
  }
  l.why = tried;
  return l;
}

const Library& library(int ranksOnHost) {
  static std::once_flag once;
  static Library lib;
  std::call_once(once, [&] { lib = load(ranksOnHost); });
  if (lib.sgemm == nullptr) {
    ErrorBuilder(Errc::SymNoBlas).cause("no BLAS library with CBLAS could be loaded: ", lib.why).raise();
  }
  return lib;
}

int dim(size_t v, const char* name) {
  if (v > static_cast<size_t>(INT_MAX)) {
    ErrorBuilder(Errc::ApiCountOverflow).cause("GEMM dimension ", name, " = ", v, " exceeds the BLAS limit ", INT_MAX).raise();
  }
  return static_cast<int>(v);
}

}  // namespace

const std::string& describe(int ranksOnHost) { return library(ranksOnHost).where; }

void gemm(int ranksOnHost, vigilDataType_t dtype, size_t m, size_t n, size_t k, const void* a, size_t lda, const void* b, size_t ldb,
          void* c, size_t ldc) {
  const Library& lib = library(ranksOnHost);
  const int M = dim(m, "M"), N = dim(n, "N"), K = dim(k, "K");
  const int LDA = dim(lda, "lda"), LDB = dim(ldb, "ldb"), LDC = dim(ldc, "ldc");
  if (M == 0 || N == 0) return;
  switch (dtype) {
    case vigilFloat32:
      lib.sgemm(kRowMajor, kNoTrans, kNoTrans, M, N, K, 1.0f, static_cast<const float*>(a), LDA,
                static_cast<const float*>(b), LDB, 0.0f, static_cast<float*>(c), LDC);
      return;
    case vigilFloat64:
      lib.dgemm(kRowMajor, kNoTrans, kNoTrans, M, N, K, 1.0, static_cast<const double*>(a), LDA,
                static_cast<const double*>(b), LDB, 0.0, static_cast<double*>(c), LDC);
      return;
    default:
      ErrorBuilder(Errc::ApiBadDataType)
          .cause("the GEMM kernels take vigilFloat32 or vigilFloat64, not data type ", static_cast<int>(dtype))
          .raise();
  }
}

}  // namespace vigil::blas
