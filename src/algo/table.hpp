#pragma once
// The algorithm table: one row per algorithm of one collective (table.cpp).
// Names, VIGIL_ALGO, selection and dispatch all read it (select.cpp), so a
// new algorithm is its own file, its row and its CMake source line.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "algo/algo.hpp"
#include "core/op_kind.hpp"

namespace vigil::algo {

// A row's id. It travels in every fingerprint (the frame header's `algo`
// field), so ranks that would run different algorithms report a mismatch
// instead of hanging; a row's id never changes.
enum class Algo : uint8_t { None = 0 };

// What a row needs from the ranks' topology and from the step runner.
enum class Needs : uint8_t {
  Steps,      // point-to-point steps: any transport
  LoadStore,  // the transport's load/store capability (LoadStoreRunner)
  Hierarchy,  // ranks on several hosts, several on one (HierarchicalRunner)
};

struct Topology {
  int nranks = 1;
  bool loadStore = false;     // the transport has Capability::LoadStore
  bool hierarchical = false;  // ranks on several hosts, several on one: per-host and leader communicators exist
};

// The table picks a row for messages up to `pickUpTo` bytes per rank on
// `pickFromRanks` ranks or more; kOnlyWhenForced rows run only when
// VIGIL_ALGO names them.
constexpr std::optional<size_t> kAnySize = SIZE_MAX;
constexpr std::optional<size_t> kOnlyWhenForced = std::nullopt;

struct AlgoRow {
  OpKind kind = OpKind::Barrier;
  Algo id = Algo::None;
  const char* name = "";  // VIGIL_ALGO's word for it; rows that share an id share the name
  const char* description = "";
  Needs needs = Needs::Steps;
  std::optional<size_t> pickUpTo = kAnySize;
  int pickFromRanks = 1;  // ... and on at least this many ranks
  // Every rank's result depends on every rank's input, and each step sends
  // only after the messages it combines were received (their headers
  // checked): a rank that completes has compared, through a chain of
  // checked headers, its fingerprint with every rank's. Such an op needs no
  // confirmation from the left neighbour over the control plane.
  bool checksEveryRank = false;
  void (*run)(StepRunner& runner, const OpDesc& op) = nullptr;

  bool applies(const Topology& topo) const {
    switch (needs) {
      case Needs::Steps: return true;
      case Needs::LoadStore: return topo.loadStore;
      case Needs::Hierarchy: return topo.hierarchical;
    }
    return false;
  }
};

// Every row; within a collective in order of preference (the first row
// that applies and covers the message size is the table's pick).
std::span<const AlgoRow> algorithmTable();

}  // namespace vigil::algo
