// The symmetric-memory benchmark over OpenSHMEM (Open MPI's oshmem), the
// loops of bench/common/symm_driver.hpp. OpenSHMEM 1.4 has no put-with-signal:
// the data is put, shmem_fence orders it, and shmem_uint64_p sets the signal.
//   oshrun -np 2 --mca sshmem mmap -x UCX_TLS=sm,self build-bench/shmem_perf
#include <shmem.h>

#include <cstdlib>
#include <string>

#include "symm_driver.hpp"

namespace {

struct ShmemApi {
  int rank() const { return shmem_my_pe(); }
  void* alloc(size_t bytes) {
    void* p = shmem_malloc(bytes);
    if (p == nullptr) std::abort();
    std::memset(p, 0, bytes);
    shmem_barrier_all();
    return p;
  }
  void put(void* dest, const void* src, size_t bytes, int peer) { shmem_putmem(dest, src, bytes, peer); }
  void get(void* dest, const void* src, size_t bytes, int peer) { shmem_getmem(dest, src, bytes, peer); }
  void putSignal(void* dest, const void* src, size_t bytes, uint64_t* signal, uint64_t value, int peer) {
    shmem_putmem(dest, src, bytes, peer);
    shmem_fence();
    shmem_uint64_p(signal, value, peer);
  }
  void waitGe(uint64_t* signal, uint64_t value) { shmem_uint64_wait_until(signal, SHMEM_CMP_GE, value); }
  void quiet() { shmem_quiet(); }
  void barrier() { shmem_barrier_all(); }
};

}  // namespace

int main(int argc, char** argv) {
  symmbench::Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--repeats") o.repeats = std::atoi(argv[i + 1]);
    if (a == "--iters") o.latencyIters = std::atoi(argv[i + 1]);
  }
  shmem_init();
  ShmemApi api;
  symmbench::run(api, "openshmem", o);
  shmem_finalize();
  return 0;
}
