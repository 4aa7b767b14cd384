#pragma once
// Which algorithm runs a collective: the first row of the table (table.cpp)
// that applies to the ranks' topology and covers the message size,
// overridable with VIGIL_ALGO for tests and tuning.

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "algo/table.hpp"

namespace vigil::algo {

constexpr size_t kOpSlots = 32;  // indexed by OpKind's value
static_assert(static_cast<size_t>(OpKind::Exscan) < kOpSlots);

// The row's name for an id ("none" for Algo::None, "unknown" for an id no
// row has, e.g. one from a newer peer).
const char* algoName(Algo a);
std::optional<Algo> algoFromName(std::string_view name);

// "ring, recursive_doubling, ..." in id order, for help and error texts.
std::string knownAlgoNames();

// VIGIL_ALGO: "ring" (every collective that has a ring algorithm) or
// "allreduce=shm,broadcast=binomial". Unset entries use the table.
struct AlgoOverrides {
  std::array<Algo, kOpSlots> forced{};  // by OpKind; None = the table decides
  // Throws VG-CFG-001 naming VIGIL_ALGO, the value and what is wrong with it.
  static AlgoOverrides parse(std::string_view text);
  // Parses; on a bad value returns nothing and sets `error` to what is wrong.
  static std::optional<AlgoOverrides> tryParse(std::string_view text, std::string* error);
};

// The row of `kind` with id `a`, or null.
const AlgoRow* findRow(OpKind kind, Algo a);

// The row that runs `kind` moving `bytes` per rank (the larger buffer, as
// the benchmarks count it): a forced one when it applies, else the table's
// pick; null for point-to-point.
const AlgoRow* selectAlgo(OpKind kind, size_t bytes, const Topology& topo, const AlgoOverrides& overrides);

}  // namespace vigil::algo
