#pragma once
// Collective algorithms over an abstract step runner: they know peers,
// messages and reduction kernels, never sockets. One function per
// algorithm, one file per collective.

#include <cstddef>
#include <cstdint>
#include <span>

#include "transport/data_plane.hpp"
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

}  // namespace vigil::algo
