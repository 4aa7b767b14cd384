// The algorithm table. Within a collective the rows are in order of
// preference: multi-host first, then shared memory (every rank reads the
// others' staging buffers in place, at every size), then the step
// algorithms, the latency-bound ones with a size limit before the
// bandwidth-bound ones.

#include "algo/table.hpp"

namespace vigil::algo {

// The run functions, each defined in the algorithm's own file.
void allReduceRing(StepRunner& r, const OpDesc& op);
void allReduceRecursiveDoubling(StepRunner& r, const OpDesc& op);
void allReduceShm(StepRunner& r, const OpDesc& op);
void broadcastBinomial(StepRunner& r, const OpDesc& op);
void broadcastShm(StepRunner& r, const OpDesc& op);
void reduceBinomial(StepRunner& r, const OpDesc& op);
void reduceShm(StepRunner& r, const OpDesc& op);
void allGatherRing(StepRunner& r, const OpDesc& op);
void allGatherShm(StepRunner& r, const OpDesc& op);
void reduceScatterRing(StepRunner& r, const OpDesc& op);
void reduceScatterShm(StepRunner& r, const OpDesc& op);
void allToAllBruck(StepRunner& r, const OpDesc& op);
void allToAllDirect(StepRunner& r, const OpDesc& op);
void allToAllShm(StepRunner& r, const OpDesc& op);
void allToAllVDirect(StepRunner& r, const OpDesc& op);
void gatherDirect(StepRunner& r, const OpDesc& op);
void gatherShm(StepRunner& r, const OpDesc& op);
void scatterDirect(StepRunner& r, const OpDesc& op);
void scatterShm(StepRunner& r, const OpDesc& op);
void barrierDissemination(StepRunner& r, const OpDesc& op);
void allGatherVRing(StepRunner& r, const OpDesc& op);
void gatherVDirect(StepRunner& r, const OpDesc& op);
void scatterVDirect(StepRunner& r, const OpDesc& op);
void reduceScatterVRing(StepRunner& r, const OpDesc& op);
void scanRecursiveDoubling(StepRunner& r, const OpDesc& op);
void barrierShm(StepRunner& r, const OpDesc& op);

namespace {

void hierarchical(StepRunner& r, const OpDesc& op) {
  requireHierarchy(r).runHierarchical(op);
}

// Below this, an allreduce over sockets is bound by latency: log2(n) steps
// of the whole vector beat 2(n-1) steps of slices.
constexpr size_t kTcpAllReduceLatencyBytes = 16 << 10;

// An all-to-all of small blocks among eight or more ranks over sockets is
// bound by the number of messages: Bruck's ceil(log2 n) per rank beat the
// direct exchange's n-1 (MPICH draws the line at 256-byte blocks and eight
// ranks too). vigil-perf over loopback TCP, 8 ranks: 2 KiB per rank 370 us
// against 646 us, 16 KiB about even, 128 KiB and up direct twice as fast.
constexpr size_t kBruckAllToAllBytes = 2 << 10;
constexpr int kBruckAllToAllRanks = 8;

// Ids travel in fingerprints: never renumber one.
constexpr Algo kRing{1}, kRecursiveDoubling{2}, kBinomial{3}, kDirect{4}, kDissemination{5}, kShm{6}, kHierarchical{7},
    kBruck{8};

constexpr const char* kShmWhat = "shared-memory staging buffers, read in place by every rank";
constexpr const char* kHierWhat = "inside each host, across host leaders, back inside";

// clang-format off
constexpr AlgoRow kTable[] = {
  {.kind = OpKind::AllReduce, .id = kHierarchical, .name = "hierarchical", .description = kHierWhat,
   .needs = Needs::Hierarchy, .run = hierarchical},
  {.kind = OpKind::AllReduce, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = allReduceShm},
  {.kind = OpKind::AllReduce, .id = kRecursiveDoubling, .name = "recursive_doubling",
   .description = "log2(n) steps of the whole vector", .pickUpTo = kTcpAllReduceLatencyBytes,
   .checksEveryRank = true, .run = allReduceRecursiveDoubling},
  {.kind = OpKind::AllReduce, .id = kRing, .name = "ring",
   .description = "ring reduce-scatter then ring allgather, pipelined", .run = allReduceRing},

  {.kind = OpKind::Broadcast, .id = kHierarchical, .name = "hierarchical", .description = kHierWhat,
   .needs = Needs::Hierarchy, .run = hierarchical},
  {.kind = OpKind::Broadcast, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = broadcastShm},
  {.kind = OpKind::Broadcast, .id = kBinomial, .name = "binomial", .description = "binomial tree from the root",
   .run = broadcastBinomial},

  {.kind = OpKind::Reduce, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = reduceShm},
  {.kind = OpKind::Reduce, .id = kBinomial, .name = "binomial", .description = "binomial tree into the root",
   .run = reduceBinomial},

  {.kind = OpKind::AllGather, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = allGatherShm},
  {.kind = OpKind::AllGather, .id = kRing, .name = "ring", .description = "n-1 ring steps, pipelined",
   .run = allGatherRing},

  {.kind = OpKind::ReduceScatter, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = reduceScatterShm},
  {.kind = OpKind::ReduceScatter, .id = kRing, .name = "ring", .description = "n-1 ring steps, pipelined",
   .run = reduceScatterRing},

  {.kind = OpKind::AllToAll, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = allToAllShm},
  {.kind = OpKind::AllToAll, .id = kBruck, .name = "bruck", .description = "ceil(log2 n) steps of packed blocks",
   .pickUpTo = kBruckAllToAllBytes, .pickFromRanks = kBruckAllToAllRanks, .run = allToAllBruck},
  {.kind = OpKind::AllToAll, .id = kDirect, .name = "direct", .description = "every pair at once, one step",
   .run = allToAllDirect},

  {.kind = OpKind::AllToAllV, .id = kDirect, .name = "direct", .description = "every pair at once, one step",
   .run = allToAllVDirect},

  {.kind = OpKind::Gather, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = gatherShm},
  {.kind = OpKind::Gather, .id = kDirect, .name = "direct", .description = "the root receives from all at once",
   .run = gatherDirect},

  {.kind = OpKind::Scatter, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = scatterShm},
  {.kind = OpKind::Scatter, .id = kDirect, .name = "direct", .description = "the root sends to all at once",
   .run = scatterDirect},

  // The v-variants and the prefix reductions move their blocks as point-to-point
  // messages on every transport (shared memory's byte rings included).
  {.kind = OpKind::AllGatherV, .id = kRing, .name = "ring", .description = "n-1 ring steps, blocks as laid out",
   .run = allGatherVRing},
  {.kind = OpKind::GatherV, .id = kDirect, .name = "direct", .description = "the root receives from all at once",
   .run = gatherVDirect},
  {.kind = OpKind::ScatterV, .id = kDirect, .name = "direct", .description = "the root sends to all at once",
   .run = scatterVDirect},
  {.kind = OpKind::ReduceScatterV, .id = kRing, .name = "ring", .description = "n-1 ring steps, pipelined",
   .run = reduceScatterVRing},
  {.kind = OpKind::Scan, .id = kRecursiveDoubling, .name = "recursive_doubling",
   .description = "ceil(log2 n) rounds of the whole vector", .run = scanRecursiveDoubling},
  {.kind = OpKind::Exscan, .id = kRecursiveDoubling, .name = "recursive_doubling",
   .description = "ceil(log2 n) rounds of the whole vector", .run = scanRecursiveDoubling},

  {.kind = OpKind::Barrier, .id = kHierarchical, .name = "hierarchical", .description = kHierWhat,
   .needs = Needs::Hierarchy, .run = hierarchical},
  {.kind = OpKind::Barrier, .id = kShm, .name = "shm", .description = kShmWhat,
   .needs = Needs::LoadStore, .run = barrierShm},
  {.kind = OpKind::Barrier, .id = kDissemination, .name = "dissemination",
   .description = "ceil(log2 n) rounds of empty messages", .run = barrierDissemination},
};
// clang-format on

constexpr bool sameText(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) ++a, ++b;
  return *a == *b;
}

// One name per id and one id per name (VIGIL_ALGO and the fingerprint
// report name algorithms by either), one row per (collective, id). (That
// every row has a run function is a unit test: under -fsanitize=undefined
// GCC does not fold a function pointer's comparison with null.)
constexpr bool wellFormed() {
  for (const AlgoRow& a : kTable) {
    if (a.id == Algo::None || a.name[0] == '\0') return false;
    for (const AlgoRow& b : kTable) {
      if (&a == &b) continue;
      if ((a.id == b.id) != sameText(a.name, b.name)) return false;
      if (a.id == b.id && a.kind == b.kind) return false;
    }
  }
  return true;
}
static_assert(wellFormed(), "the algorithm table has a duplicate row or an id with two names");

}  // namespace

std::span<const AlgoRow> algorithmTable() {
  return kTable;
}

}  // namespace vigil::algo
