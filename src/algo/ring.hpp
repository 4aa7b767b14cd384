#pragma once
// The ring schedule, written once: reduce-scatter and allgather over n
// blocks laid out by Blocks, where rank r owns block r. Allreduce is the
// two in a row (allreduce_ring.cpp). Every step moves one block to the
// right neighbour in pieces of kPipelineBytes, so a piece is reduced while
// the next one already streams in.

#include <cstddef>
#include <cstdint>

#include "algo/algo.hpp"
#include "vigil/vigil.h"

namespace vigil::algo {

struct RingReduceScatter {
  const uint8_t* input = nullptr;  // this rank's contribution to every block, laid out by `blocks`
  uint8_t* owned = nullptr;        // where block `rank` ends, reduced over all ranks; may be its input block
  // Where the partial results of the other blocks are kept, laid out by
  // `blocks` (the allreduce's output, which may be `input`); null: scratch.
  uint8_t* partials = nullptr;
  Blocks blocks{0, 1};
  vigilDataType_t dtype = vigilUint8;
  vigilRedOp_t op = vigilSum;
};

// Needs two or more ranks. Block `rank` ends reduced (divided for vigilAvg) at `owned`.
void ringReduceScatter(StepRunner& r, const RingReduceScatter& args);

// Needs two or more ranks. Every rank's block `rank` is in place in `data`
// (laid out by `blocks`, `elem` bytes an element); afterwards every block is.
void ringAllGather(StepRunner& r, uint8_t* data, const Blocks& blocks, size_t elem);

// The allgather row, for the library's own exchanges (checks.cpp).
void allGatherRing(StepRunner& r, const OpDesc& op);

}  // namespace vigil::algo
