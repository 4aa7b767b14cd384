#pragma once
// Collective algorithms over an abstract step runner: they know peers,
// messages and reduction kernels, never sockets. One function per
// algorithm, one file per collective.

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/data_plane.hpp"
#include "transport/shm_plane.hpp"
#include "vigil/vigil.h"

namespace vigil::algo {

// What an algorithm may do: run one step of concurrent messages (throws a
// vigil::Error when the step fails) and borrow persistent scratch memory.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  virtual void exchange(std::span<const Transfer> transfers) = 0;
  // At least `bytes` of scratch, kept for the communicator's life; valid
  // until the next call.
  virtual uint8_t* scratch(size_t bytes) = 0;

  // Shared-memory algorithms (null when the ranks talk over sockets).
  // Protocol: take a staging buffer (waits until every rank is done reading
  // what it held before), write into it, sync (post the next step and wait
  // for every rank to post it; the first sync of an op also compares the
  // ranks' fingerprints), read the others' buffers, and release the buffer
  // with the last step after which it was read.
  virtual ShmDataPlane* shm() { return nullptr; }
  virtual int shmTakeBuffer() { return 0; }
  virtual uint64_t shmSync() { return 0; }
  virtual void shmRelease(int /*buffer*/, uint64_t /*lastReadStep*/) {}
};

// Splits `count` elements into `parts` nearly equal contiguous blocks.
struct Blocks {
  size_t count;
  int parts;
  size_t begin(int i) const {
    size_t base = count / static_cast<size_t>(parts), extra = count % static_cast<size_t>(parts);
    size_t ii = static_cast<size_t>(i);
    return ii * base + (ii < extra ? ii : extra);
  }
  size_t size(int i) const { return begin(i + 1) - begin(i); }
};

// Ring steps over sockets move large blocks in pieces of this size.
constexpr size_t kPipelineBytes = 512u << 10;

inline int mod(int a, int n) {
  return ((a % n) + n) % n;
}

void allReduceRing(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype, vigilRedOp_t op);
void broadcastBinomial(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype, int root);
void reduceBinomial(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype, vigilRedOp_t op,
                    int root);
void allGatherRing(StepRunner& r, const void* send, void* recv, size_t sendcount, vigilDataType_t dtype);
void reduceScatterRing(StepRunner& r, const void* send, void* recv, size_t recvcount, vigilDataType_t dtype,
                       vigilRedOp_t op);
// AllToAll is AllToAllV with equal counts; counts and displacements in elements.
void allToAllVDirect(StepRunner& r, const void* send, const size_t* sendcounts, const size_t* sdispls, void* recv,
                     const size_t* recvcounts, const size_t* rdispls, vigilDataType_t dtype);
void gatherDirect(StepRunner& r, const void* send, void* recv, size_t sendcount, vigilDataType_t dtype, int root);
void scatterDirect(StepRunner& r, const void* send, void* recv, size_t recvcount, vigilDataType_t dtype, int root);
void barrierDissemination(StepRunner& r);
void allReduceRecursiveDoubling(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype,
                                vigilRedOp_t op);

// Shared memory (r.shm() != null).
void allReduceShm(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype, vigilRedOp_t op);
void broadcastShm(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype, int root);
void reduceShm(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype, vigilRedOp_t op,
               int root);
void gatherShm(StepRunner& r, const void* send, void* recv, size_t sendcount, vigilDataType_t dtype, int root);
void scatterShm(StepRunner& r, const void* send, void* recv, size_t recvcount, vigilDataType_t dtype, int root);
void allGatherShm(StepRunner& r, const void* send, void* recv, size_t sendcount, vigilDataType_t dtype);
void reduceScatterShm(StepRunner& r, const void* send, void* recv, size_t recvcount, vigilDataType_t dtype,
                      vigilRedOp_t op);
void allToAllShm(StepRunner& r, const void* send, void* recv, size_t count, vigilDataType_t dtype);
void barrierShm(StepRunner& r);

}  // namespace vigil::algo
