// `vigil-doctor trace FILE... -o out.json`: the dumps as a Chrome trace-event file (chrome://tracing,
// ui.perfetto.dev): one process per rank, one thread per stream, one slice per operation.

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "doctor_dump.hpp"

namespace vigil::doctor {
namespace {

using nlohmann::json;

// Timestamps are taken relative to the earliest one: absolute epoch microseconds would lose
// sub-microsecond precision in the viewers' doubles.
int64_t earliestNs(const std::vector<Dump>& dumps) {
  int64_t origin = INT64_MAX;
  for (const Dump& d : dumps) {
    origin = std::min(origin, d.dumpedNs);
    for (const DumpEntry& e : d.entries) {
      for (int64_t ns : {e.enqueuedNs, e.startedNs}) {
        if (ns > 0) origin = std::min(origin, ns);
      }
    }
  }
  return origin == INT64_MAX ? 0 : origin;
}

std::string sliceName(const DumpEntry& e) {
  if (e.collective()) return e.op + " seq " + std::to_string(e.seq);
  std::string name = e.op;
  for (size_t i = 0; i < e.peers.size(); ++i)
    name += (i ? "," : e.op == "recv" ? " from " : " to ") + std::to_string(e.peers[i]);
  return name;
}

json sliceArgs(const DumpEntry& e, const Dump& d) {
  json args = {{"comm", d.comm},   {"seq", e.seq},     {"id", e.id},        {"dtype", e.dtype},
               {"count", e.count}, {"state", e.state}, {"stream", e.stream}};
  if (e.redop) args["redop"] = *e.redop;
  if (e.root >= 0) args["root"] = e.root;
  if (!e.peers.empty()) args["peers"] = e.peers;
  if (e.error) args["error"] = *e.error;
  args["enqueued_ns"] = e.enqueuedNs;
  args["started_ns"] = e.startedNs;
  args["ended_ns"] = e.endedNs;
  return args;
}

struct Track {
  int tid = 0;
  int64_t lastEndNs = 0;  // slices of one track must not overlap, or viewers misdraw them
};

void addDump(const Dump& d, bool severalComms, int64_t originNs, std::map<std::string, Track>& tracks, json& events) {
  auto us = [originNs](int64_t ns) { return static_cast<double>(ns - originNs) / 1000.0; };
  std::vector<const DumpEntry*> entries;
  for (const DumpEntry& e : d.entries) {
    if (e.enqueuedNs > 0 || e.startedNs > 0) entries.push_back(&e);
  }
  // Finished: enqueued -> ended. Unfinished: started (or enqueued) -> the moment of the dump.
  auto beginOf = [](const DumpEntry* e) {
    return e->endedNs > 0 && e->enqueuedNs > 0 ? e->enqueuedNs : e->startedNs ? e->startedNs : e->enqueuedNs;
  };
  std::stable_sort(entries.begin(), entries.end(),
                   [&](const DumpEntry* a, const DumpEntry* b) { return beginOf(a) < beginOf(b); });
  for (const DumpEntry* e : entries) {
    const std::string trackName = (severalComms ? d.comm + " " : "") +
                                  (e->stream == "null" ? std::string("blocking calls") : "stream " + e->stream);
    auto [it, isNew] = tracks.try_emplace(trackName, Track{static_cast<int>(tracks.size()), 0});
    Track& track = it->second;
    if (isNew) {
      events.push_back(
          {{"ph", "M"}, {"name", "thread_name"}, {"pid", d.rank}, {"tid", track.tid}, {"args", {{"name", trackName}}}});
    }
    // Queue time behind the previous op of an in-order stream belongs to that op, not this one.
    const int64_t begin = std::max(beginOf(e), track.lastEndNs);
    const int64_t end = std::max(begin, e->endedNs > 0 ? e->endedNs : d.dumpedNs);
    track.lastEndNs = end;
    events.push_back({{"ph", "X"},
                      {"name", sliceName(*e)},
                      {"cat", e->collective() ? "collective" : "p2p"},
                      {"pid", d.rank},
                      {"tid", track.tid},
                      {"ts", us(begin)},
                      {"dur", us(end) - us(begin)},
                      {"args", sliceArgs(*e, d)}});
  }
  events.push_back({{"ph", "i"},
                    {"s", "p"},
                    {"name", "dump (" + d.reason + ")"},
                    {"pid", d.rank},
                    {"tid", 0},
                    {"ts", us(d.dumpedNs)}});
}

}  // namespace

int runTrace(const std::vector<std::string>& files, const std::string& outPath) {
  std::optional<std::vector<Dump>> loaded = loadDumpsOrReport(files);
  if (!loaded) return 1;
  std::vector<Dump>& dumps = *loaded;
  std::map<std::string, int> commCount;
  for (const Dump& d : dumps) ++commCount[d.comm];
  const bool severalComms = commCount.size() > 1;
  const int64_t originNs = earliestNs(dumps);

  json events = json::array();
  std::map<int, std::map<std::string, Track>> tracksByRank;
  for (const Dump& d : dumps) {
    if (!tracksByRank.contains(d.rank)) {
      events.push_back({{"ph", "M"},
                        {"name", "process_name"},
                        {"pid", d.rank},
                        {"args", {{"name", "rank " + std::to_string(d.rank)}}}});
      events.push_back(
          {{"ph", "M"}, {"name", "process_sort_index"}, {"pid", d.rank}, {"args", {{"sort_index", d.rank}}}});
    }
    addDump(d, severalComms, originNs, tracksByRank[d.rank], events);
  }
  const json trace = {{"traceEvents", events},
                      {"displayTimeUnit", "ms"},
                      {"otherData", {{"generator", "vigil-doctor"}, {"origin_ns", originNs}}}};

  std::ofstream out(outPath, std::ios::binary | std::ios::trunc);
  if (!out) {
    std::cerr << "vigil-doctor: cannot create " << outPath << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  out << trace.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
  out.close();
  if (!out) {
    std::cerr << "vigil-doctor: cannot write " << outPath << ": " << std::strerror(errno) << "\n";
    return 1;
  }
  std::cout << "wrote " << events.size() << " trace events for " << tracksByRank.size() << " ranks to " << outPath
            << " (open in ui.perfetto.dev or chrome://tracing)\n";
  return 0;
}

}  // namespace vigil::doctor
