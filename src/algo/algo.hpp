#pragma once
// What collective algorithms run on: an abstract step runner. Algorithms
// know peers, messages and reduction kernels, never sockets. Each one is a
// function run(StepRunner&, const OpDesc&) in its own file and a row of the
// algorithm table (algo/table.cpp).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "algo/op_desc.hpp"
#include "transport/transport.hpp"

namespace vigil::algo {

// What every algorithm may do: run one step of concurrent messages (throws
// a vigil::Error when the step fails) and borrow persistent scratch memory.
class StepRunner {
 public:
  virtual ~StepRunner() = default;
  virtual int rank() const = 0;
  virtual int nranks() const = 0;
  void exchange(std::span<const Transfer> transfers) { exchange(transfers, nullptr); }
  // The same, running units of `work` whenever the messages cannot move
  // (transport.hpp: ExchangeWork); units still pending afterwards are the
  // caller's.
  virtual void exchange(std::span<const Transfer> transfers, ExchangeWork* work) = 0;
  // At least `bytes` of scratch, kept for the communicator's life; valid
  // until the next call.
  virtual uint8_t* scratch(size_t bytes) = 0;
};

// The load/store capability (a transport with Capability::LoadStore, such
// as shm), for the staging algorithms only.
// Protocol: take a staging buffer (waits until every rank is done reading
// what it held before), write into it, sync (post the next step and wait
// for every rank to post it; the first sync of an op also compares the
// ranks' fingerprints), read the others' buffers, and release the buffer
// with the last step after which it was read.
class LoadStoreRunner : public StepRunner {
 public:
  // Whether the transport offers it; loadStoreDomain() only then.
  virtual bool hasLoadStore() = 0;
  virtual LoadStoreDomain& loadStoreDomain() = 0;
  virtual int takeStagingBuffer() = 0;
  virtual uint64_t syncStep() = 0;
  virtual void releaseStagingBuffer(int buffer, uint64_t lastReadStep) = 0;
};

// The multi-host capability: the communicator runs the op over its per-host
// and host-leader communicators.
class HierarchicalRunner {
 public:
  virtual ~HierarchicalRunner() = default;
  virtual void runHierarchical(const OpDesc& op) = 0;
};

// The capabilities of `r`, asked for by the rows that need them. A runner
// without one throws VG-INT-001: the table selected a row this runner
// cannot run, which is a bug and never a reason to fall back silently.
LoadStoreRunner& requireLoadStore(StepRunner& r);
HierarchicalRunner& requireHierarchy(StepRunner& r);

// Splits `count` elements into `parts` nearly equal contiguous blocks, or,
// for the v-variants, lays out `parts` blocks of sizes[i] elements at
// starts[i] (arrays of `parts` entries; count unused).
struct Blocks {
  size_t count;
  int parts;
  const size_t* starts = nullptr;
  const size_t* sizes = nullptr;
  size_t begin(int i) const {
    if (starts != nullptr) return starts[i];
    size_t base = count / static_cast<size_t>(parts), extra = count % static_cast<size_t>(parts);
    size_t ii = static_cast<size_t>(i);
    return ii * base + (ii < extra ? ii : extra);
  }
  size_t size(int i) const { return sizes != nullptr ? sizes[i] : begin(i + 1) - begin(i); }
  size_t largest() const {
    if (sizes == nullptr) return size(0);
    size_t most = 0;
    for (int i = 0; i < parts; ++i) most = std::max(most, sizes[i]);
    return most;
  }
};

// Up to this size a load/store allreduce is one step: each rank reduces the
// whole vector from everyone's buffer (latency beats the redundant arithmetic).
constexpr size_t kSmallAllReduceBytes = 16u << 10;

// Ring steps over sockets move large blocks in pieces of this size.
constexpr size_t kPipelineBytes = 512u << 10;

inline int mod(int a, int n) {
  return ((a % n) + n) % n;
}

}  // namespace vigil::algo
