#pragma once
// The collectives vigil-perf measures: how "bytes" maps to each one's count argument and
// buffers (the nccl-tests convention), its bus-bandwidth factor, one call through the C API,
// and the check of its result.

#include <vigil/vigil.h>

#include <cstddef>

#include "perf_data.hpp"
#include "perf_options.hpp"

namespace vigil::perf {

struct CollInfo {
  Coll coll;
  const char* name;
  bool reduction;      // takes a vigilRedOp_t
  bool rooted;         // takes a root
  bool splitsByRanks;  // its count argument is bytes / nranks elements
};

const CollInfo& collInfo(Coll coll);
// Every collective, in the order `-c all` runs them.
const CollInfo* allColls(size_t* howMany);

// busbw / algbw: the fraction of the data that crosses a link per rank (see --help).
double busBandwidthFactor(Coll coll, int nranks);

// One call as every rank issues it.
struct Call {
  Coll coll;
  vigilComm_t comm;
  int rank;
  int nranks;
  int root;
  vigilDataType_t dtype;
  vigilRedOp_t op;
  size_t count;  // the count argument of the C call
  void* send;
  void* recv;
};

// The count argument for a size in bytes (already a multiple of nranks * element size).
size_t countFor(Coll coll, size_t bytes, int nranks, vigilDataType_t dtype);

// Issues the call once (sendrecv: one send and one receive in a group).
vigilResult_t runCall(const Call& call);

// Writes the check pattern into the inputs and poisons the outputs.
void prepareCheck(const Call& call, const Pattern& pattern);
// Fills only the inputs, so timed calls work on the same kind of values as the checked one.
void fillInputs(const Call& call, const Pattern& pattern);
// Outputs of this rank that differ from what the pattern predicts (0 where this rank
// receives nothing, e.g. a non-root of reduce or gather).
size_t countWrongOutputs(const Call& call, const Pattern& pattern);

}  // namespace vigil::perf
