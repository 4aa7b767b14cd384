#pragma once
// Which algorithm runs a collective: one table per collective, by message
// size, rank count and transport (select.cpp), overridable with VIGIL_ALGO
// for tests and tuning. The choice travels in every fingerprint, so ranks
// that would run different algorithms report a mismatch instead of hanging.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/op_kind.hpp"

namespace vigil::algo {

enum class Algo : uint8_t {
  None = 0,
  Ring = 1,               // allreduce, allgather, reduce-scatter over point-to-point steps
  RecursiveDoubling = 2,  // allreduce, latency-bound sizes
  Binomial = 3,           // broadcast, reduce
  Direct = 4,             // all-to-all(v), gather, scatter: every pair at once
  Dissemination = 5,      // barrier
  Shm = 6,                // shared-memory staging buffers, read in place by every rank
  Hierarchical = 7,       // multi-host: inside each host, across host leaders, back inside
};
constexpr int kAlgoCount = 8;
constexpr size_t kOpSlots = 16;  // indexed by OpKind's value

const char* algoName(Algo a);
std::optional<Algo> algoFromName(std::string_view name);

// VIGIL_ALGO: "ring" (every collective that has a ring algorithm) or
// "allreduce=shm,broadcast=binomial". Unset entries use the table.
struct AlgoOverrides {
  std::array<Algo, kOpSlots> forced{};  // by OpKind; None = the table decides
  // Parses; on a bad value returns nothing and sets `error` to what is wrong.
  static std::optional<AlgoOverrides> parse(std::string_view text, std::string* error);
};

struct Topology {
  int nranks = 1;
  bool shm = false;           // every rank reaches the others through one shared segment
  bool hierarchical = false;  // ranks on several hosts, several on one: per-host and leader communicators exist
};

// Whether `a` can run `kind` on this topology.
bool algoApplies(Algo a, OpKind kind, const Topology& topo);

// The table: the algorithm for `kind` moving `bytes` per rank (the larger
// buffer, as the benchmarks count it). A forced algorithm wins when it applies.
Algo selectAlgo(OpKind kind, size_t bytes, const Topology& topo, const AlgoOverrides& overrides);

}  // namespace vigil::algo
