#include "algo/select.hpp"

#include <algorithm>
#include <vector>

#include "core/config.hpp"
#include "core/strcat.hpp"

namespace vigil::algo {

namespace {

const AlgoRow* firstRowNamed(std::string_view name) {
  for (const AlgoRow& row : algorithmTable()) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

// Whether some row runs the collective called `name`.
bool isCollectiveName(std::string_view name) {
  return std::any_of(algorithmTable().begin(), algorithmTable().end(),
                     [&](const AlgoRow& row) { return name == opName(row.kind); });
}

// Applies one VIGIL_ALGO item ("ring" or "allreduce=ring") to `out`.
bool applyItem(std::string_view item, AlgoOverrides& out, std::string* error) {
  std::string_view collName, algoWord = item;
  if (size_t eq = item.find('='); eq != std::string_view::npos) {
    collName = item.substr(0, eq);
    algoWord = item.substr(eq + 1);
  }
  const AlgoRow* named = firstRowNamed(algoWord);
  if (named == nullptr) {
    *error = cat("unknown algorithm '", algoWord, "' (known: ", knownAlgoNames(), ")");
    return false;
  }
  if (!collName.empty() && !isCollectiveName(collName)) {
    *error = cat("unknown collective '", collName, "' in '", item, "'");
    return false;
  }
  bool matched = false;
  for (const AlgoRow& row : algorithmTable()) {
    if (row.id != named->id || (!collName.empty() && collName != opName(row.kind))) continue;
    out.forced[static_cast<size_t>(row.kind)] = row.id;
    matched = true;
  }
  if (!matched) *error = cat(collName, " has no '", algoWord, "' algorithm");
  return matched;
}

}  // namespace

const char* algoName(Algo a) {
  if (a == Algo::None) return "none";
  for (const AlgoRow& row : algorithmTable()) {
    if (row.id == a) return row.name;
  }
  return "unknown";
}

std::optional<Algo> algoFromName(std::string_view name) {
  const AlgoRow* row = firstRowNamed(name);
  if (row == nullptr) return std::nullopt;
  return row->id;
}

std::string knownAlgoNames() {
  std::vector<Algo> ids;
  for (const AlgoRow& row : algorithmTable()) {
    if (std::find(ids.begin(), ids.end(), row.id) == ids.end()) ids.push_back(row.id);
  }
  std::sort(ids.begin(), ids.end());
  std::string out;
  for (Algo a : ids) out += cat(out.empty() ? "" : ", ", algoName(a));
  return out;
}

std::optional<AlgoOverrides> AlgoOverrides::tryParse(std::string_view text, std::string* error) {
  AlgoOverrides out;
  size_t pos = 0;
  while (!text.empty()) {
    size_t end = std::min(text.find(',', pos), text.size());
    if (!applyItem(text.substr(pos, end - pos), out, error)) return std::nullopt;
    if (end == text.size()) break;
    pos = end + 1;
  }
  return out;
}

AlgoOverrides AlgoOverrides::parse(std::string_view text) {
  std::string why;
  std::optional<AlgoOverrides> forced = tryParse(text, &why);
  if (!forced) raiseBadValue("VIGIL_ALGO", text, cat("'<algorithm>' or '<collective>=<algorithm>,...': ", why));
  return *forced;
}

const AlgoRow* findRow(OpKind kind, Algo a) {
  for (const AlgoRow& row : algorithmTable()) {
    if (row.kind == kind && row.id == a) return &row;
  }
  return nullptr;
}

const AlgoRow* selectAlgo(OpKind kind, size_t bytes, const Topology& topo, const AlgoOverrides& overrides) {
  if (kind == OpKind::Split) kind = OpKind::AllGather;  // moves its records as an all-gather
  const Algo forced = overrides.forced[static_cast<size_t>(kind)];
  if (const AlgoRow* row = findRow(kind, forced); row != nullptr && row->applies(topo)) return row;
  for (const AlgoRow& row : algorithmTable()) {
    if (row.kind != kind || !row.applies(topo) || topo.nranks < row.pickFromRanks) continue;
    if (row.pickUpTo && bytes <= *row.pickUpTo) return &row;
  }
  return nullptr;
}

}  // namespace vigil::algo
