// `vigil-doctor dumps FILE...`: merges the flight-recorder dumps of all ranks of each
// communicator and answers the questions asked after a hang or a mismatch: which ranks are
// missing (then the verdict is partial), where each rank is, the first seq where ranks ran different collectives, and
// which ranks are behind or stuck while the others wait for them.

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "doctor_dump.hpp"

namespace vigil::doctor {
namespace {

constexpr size_t kMaxFailuresShown = 20;

// What one rank's dump says, indexed for comparison with the others.
struct RankView {
  const Dump* dump = nullptr;
  std::map<int64_t, const DumpEntry*> bySeq;  // collective entries
  int64_t lastCompleted = -1;
  int64_t frontier = -1;            // highest seq this rank entered
  const DumpEntry* open = nullptr;  // first entry neither completed nor failed (any kind)
  const DumpEntry* openCollective = nullptr;
  bool recorded() const { return dump->capacity != 0; }
};

RankView viewOf(const Dump& dump) {
  RankView view;
  view.dump = &dump;
  view.lastCompleted = dump.lastCompletedSeq;
  for (const DumpEntry& e : dump.entries) {
    if (!view.open && e.open()) view.open = &e;
    if (!e.collective()) continue;
    view.bySeq[e.seq] = &e;
    if (!view.openCollective && e.open()) view.openCollective = &e;
    if (e.completed()) view.lastCompleted = std::max(view.lastCompleted, e.seq);
  }
  view.frontier = std::max(view.lastCompleted, view.bySeq.empty() ? -1 : view.bySeq.rbegin()->first);
  return view;
}

std::string ranksWord(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + joinRanks(ranks);
}

std::string secondsBefore(int64_t fromNs, int64_t toNs) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.2f s", static_cast<double>(toNs - fromNs) / 1e9);
  return buf;
}

std::string whereRankIs(const RankView& v) {
  std::string text = "last completed seq " + std::to_string(v.lastCompleted);
  if (!v.recorded()) return text + "; recorded no operations (VIGIL_FLIGHT_RECORDER=0)";
  if (!v.open) {
    const DumpEntry* last = v.dump->entries.empty() ? nullptr : &v.dump->entries.back();
    if (last && last->state == "failed") {
      return text + "; failed in " + describeOp(*last) +
             (last->collective() ? " seq " + std::to_string(last->seq) : "");
    }
    return text + "; idle (every recorded operation finished)";
  }
  const DumpEntry& e = *v.open;
  text += "; in " + describeOp(e) + (e.collective() ? " seq " + std::to_string(e.seq) : "") + ", " + e.state;
  const int64_t since = e.startedNs ? e.startedNs : e.enqueuedNs;
  if (since) text += " " + secondsBefore(since, v.dump->dumpedNs) + " before the dump";
  return text;
}

// The first seq where ranks recorded different collectives; "" if none.
std::string firstDivergence(const std::map<int, RankView>& views, int64_t& divergedSeq, int& laterCount) {
  std::set<int64_t> seqs;
  for (const auto& [rank, v] : views) {
    for (const auto& [seq, entry] : v.bySeq) seqs.insert(seq);
  }
  std::string first;
  for (int64_t seq : seqs) {
    std::map<std::string, std::vector<int>> ranksByOp;  // rank lists come out sorted: views is ordered
    for (const auto& [rank, v] : views) {
      if (const auto it = v.bySeq.find(seq); it != v.bySeq.end()) ranksByOp[describeOp(*it->second)].push_back(rank);
    }
    if (ranksByOp.size() < 2) continue;
    if (!first.empty()) {
      ++laterCount;
      continue;
    }
    std::vector<std::pair<std::vector<int>, std::string>> groups;
    for (const auto& [op, ranks] : ranksByOp) groups.emplace_back(ranks, op);
    std::sort(groups.begin(), groups.end());  // lowest rank first reads naturally
    first = "seq " + std::to_string(seq) + ": ";
    for (size_t i = 0; i < groups.size(); ++i) {
      first += (i ? ", " : "") + ranksWord(groups[i].first) + " ran " + groups[i].second;
    }
    divergedSeq = seq;
  }
  return first;
}

// Ranks behind the others: stuck in a seq that others completed, or not yet in the highest seq
// another rank entered. Ranks with the same story are reported together, so the detail text
// keeps a "%s" for has/have until the group size is known.
enum LagKind { kStuck, kBehind };

std::vector<std::string> laggingRanks(const std::map<int, RankView>& views) {
  int64_t front = -1;
  for (const auto& [rank, v] : views) front = std::max(front, v.frontier);
  std::map<std::tuple<LagKind, int64_t, std::string>, std::vector<int>> groups;  // (kind, seq, detail) -> ranks
  for (const auto& [rank, v] : views) {
    if (!v.recorded()) continue;
    if (const DumpEntry* e = v.openCollective) {
      // Only completion counts as ahead: with streams another rank may have enqueued later seqs
      // while it still runs this one, exactly like this rank.
      std::vector<int> ahead;
      for (const auto& [other, o] : views) {
        if (other != rank && o.recorded() && o.lastCompleted >= e->seq) ahead.push_back(other);
      }
      if (!ahead.empty()) {
        groups[{kStuck, e->seq, describeOp(*e) + " (" + e->state + ") while " + ranksWord(ahead) + " completed it"}]
            .push_back(rank);
      }
      continue;
    }
    if (v.frontier >= front) continue;
    const int64_t next = v.frontier + 1;
    std::vector<int> waiting, failedThere, past;
    for (const auto& [other, o] : views) {
      if (other == rank || o.frontier < next) continue;
      const auto it = o.bySeq.find(next);
      const DumpEntry* there = it == o.bySeq.end() ? nullptr : it->second;
      (there && there->open() ? waiting : there && there->state == "failed" ? failedThere : past).push_back(other);
    }
    const auto latest = v.bySeq.find(v.frontier);
    const bool failedLast = latest != v.bySeq.end() && latest->second->state == "failed";
    std::string detail = (failedLast ? "failed in seq " + std::to_string(v.frontier)
                                     : "last completed seq " + std::to_string(v.lastCompleted)) +
                         " and %s not entered seq " + std::to_string(next);
    std::vector<std::string> others;
    if (!waiting.empty()) others.push_back(ranksWord(waiting) + " wait");
    if (!failedThere.empty()) others.push_back(ranksWord(failedThere) + " failed");
    if (!past.empty()) others.push_back(ranksWord(past) + " got past it");
    for (size_t i = 0; i < others.size(); ++i) detail += (i ? "; " : ", where ") + others[i];
    if (v.open) detail += "; it is in " + describeOp(*v.open) + " (" + v.open->state + ")";
    groups[{kBehind, next, detail}].push_back(rank);
  }
  std::vector<std::string> lines;
  for (const auto& [key, ranks] : groups) {
    const auto& [kind, seq, detail] = key;
    const bool plural = ranks.size() > 1;
    if (kind == kStuck) {
      lines.push_back(ranksWord(ranks) + (plural ? " are" : " is") + " stuck in seq " + std::to_string(seq) + ": " +
                      detail);
    } else {
      std::string text = detail;
      text.replace(text.find("%s"), 2, plural ? "have" : "has");
      lines.push_back(ranksWord(ranks) + (plural ? " are" : " is") + " behind: " + text);
    }
  }
  return lines;
}

// "ranks 0-3 wait in seq 5 (allreduce(...))" when every rank is open in the same collective, else "".
std::string commonWait(const std::map<int, RankView>& views) {
  const DumpEntry* first = nullptr;
  std::vector<int> ranks;
  for (const auto& [rank, v] : views) {
    const DumpEntry* e = v.openCollective;
    if (!e || (first && e->seq != first->seq)) return "";
    first = first ? first : e;
    ranks.push_back(rank);
  }
  if (!first) return "";
  return ranksWord(ranks) + (ranks.size() == 1 ? " waits" : " all wait") + " in seq " + std::to_string(first->seq) +
         " (" + describeOp(*first) + ")";
}

std::string printFailures(const std::map<int, RankView>& views) {
  std::string firstFailure;
  size_t shown = 0, total = 0;
  for (const auto& [rank, v] : views) {
    for (const DumpEntry& e : v.dump->entries) {
      if (e.state != "failed") continue;
      const std::string what = "rank " + std::to_string(rank) + " failed in " + describeOp(e) +
                               (e.collective() ? " seq " + std::to_string(e.seq) : "");
      if (firstFailure.empty()) firstFailure = what;
      if (++total > kMaxFailuresShown) continue;
      if (shown++ == 0) std::cout << "failures:\n";
      std::string error = e.error.value_or("(no error text)");
      for (size_t pos = 0; (pos = error.find('\n', pos)) != std::string::npos; pos += 5)
        error.replace(pos, 1, "\n    ");
      std::cout << "  " << what << ":\n    " << error << "\n";
    }
  }
  if (total > shown) std::cout << "  ... and " << total - shown << " more failed operations\n";
  return firstFailure;
}

// Prints the report of one communicator and returns its verdict.
std::string analyzeComm(const std::string& comm, const std::vector<const Dump*>& dumps) {
  int nranks = 0;
  std::set<int> declared;
  for (const Dump* d : dumps) declared.insert(d->nranks), nranks = std::max(nranks, d->nranks);
  std::cout << "== comm '" << comm << "': " << nranks << (nranks == 1 ? " rank\n" : " ranks\n");
  if (declared.size() > 1) {
    std::cout << "warning: the dumps disagree on nranks (";
    for (const Dump* d : dumps) std::cout << (d == dumps.front() ? "" : ", ") << d->file << ": " << d->nranks;
    std::cout << "); using " << nranks << "\n";
  }
  std::map<int, const Dump*> byRank;
  for (const Dump* d : dumps) {
    const Dump*& slot = byRank[d->rank];
    if (slot) {
      const Dump* older = slot->dumpedNs <= d->dumpedNs ? slot : d;
      std::cout << "warning: rank " << d->rank << " has two dumps (" << slot->file << ", " << d->file
                << "); using the later one, not " << older->file << "\n";
      if (older == slot) slot = d;
    } else {
      slot = d;
    }
  }
  std::map<int, RankView> views;
  std::vector<int> present, missing;
  for (int rank = 0; rank < nranks; ++rank) {
    if (const auto it = byRank.find(rank); it != byRank.end()) {
      views.emplace(rank, viewOf(*it->second));
      present.push_back(rank);
    } else {
      missing.push_back(rank);
    }
  }
  std::cout << "ranks present: " << (present.empty() ? "none" : joinRanks(present))
            << "; missing: " << (missing.empty() ? "none" : joinRanks(missing)) << "\n";
  for (int rank = 0; rank < nranks; ++rank) {
    if (const auto it = views.find(rank); it != views.end()) {
      const Dump& d = *it->second.dump;
      std::cout << "  rank " << rank << ": " << whereRankIs(it->second) << "  [" << d.file << ", host " << d.host
                << ", pid " << d.pid << ", dumped on " << d.reason << "]\n";
    } else {
      std::cout << "  rank " << rank << ": no dump given (missing)\n";
    }
  }

  int64_t divergedSeq = -1;
  int laterDivergences = 0;
  const std::string divergence = firstDivergence(views, divergedSeq, laterDivergences);
  if (!divergence.empty()) {
    std::cout << "first divergence: " << divergence;
    if (laterDivergences) std::cout << " (and " << laterDivergences << " later seqs differ too)";
    std::cout << "\n";
  }
  const std::vector<std::string> lagging = laggingRanks(views);
  for (const std::string& line : lagging) std::cout << "lagging: " << line << "\n";
  const std::string firstFailure = printFailures(views);

  std::string verdict;
  if (!divergence.empty()) {
    verdict = "ranks diverge at seq " + std::to_string(divergedSeq) +
              " (mismatch): " + divergence.substr(divergence.find(": ") + 2);
  } else if (!lagging.empty()) {
    for (const std::string& line : lagging) verdict += (verdict.empty() ? "" : "; ") + line;
  } else if (const std::string common = commonWait(views); !common.empty()) {
    verdict = "no divergence: " + common + "; none is behind (look for a slow or blocked network path)";
  } else if (!firstFailure.empty()) {
    verdict = "no divergence; " + firstFailure + " (see failures above)";
  } else {
    verdict = missing.empty() ? "no divergence" : "no divergence among the dumps present";
  }
  if (!missing.empty()) {
    // What the absent ranks did is unknown: one of them may be the culprit, so
    // the verdict is only about the ranks present and says so first.
    const std::string absent = missing.size() == 1 ? "rank " + std::to_string(missing[0]) + "'s dump is missing"
                                                   : "the dumps of ranks " + joinRanks(missing) + " are missing";
    std::cout << "partial: " << absent << " (of " << nranks << " ranks); the verdict covers only "
              << (present.empty() ? "no rank" : ranksWord(present)) << " and a missing rank may be the culprit\n";
    verdict = "partial, " + absent + ": " + verdict;
  }
  return verdict;
}

}  // namespace

int runDumps(const std::vector<std::string>& files) {
  std::optional<std::vector<Dump>> loaded = loadDumpsOrReport(files);
  if (!loaded) return 1;
  std::vector<Dump>& dumps = *loaded;
  std::map<std::string, std::vector<const Dump*>> byComm;
  for (const Dump& d : dumps) byComm[d.comm].push_back(&d);
  std::string verdict;
  for (const auto& [comm, commDumps] : byComm) {
    const std::string commVerdict = analyzeComm(comm, commDumps);
    verdict +=
        byComm.size() == 1 ? commVerdict : (verdict.empty() ? "" : " | ") + ("comm '" + comm + "': ") + commVerdict;
  }
  std::cout << "verdict: " << verdict << "\n";
  return 0;
}

}  // namespace vigil::doctor
