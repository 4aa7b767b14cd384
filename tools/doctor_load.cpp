// Reading flight-recorder dumps. Every field is checked, so a truncated or hand-edited dump is
// reported with its file and field instead of producing a wrong diagnosis.

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <type_traits>

#include "doctor_dump.hpp"

namespace vigil::doctor {
namespace {

using nlohmann::json;

constexpr int kSchemaVersion = 1;

// Reads obj[key] as T (an integer type or std::string); `where` names the object in errors.
template <class T>
T field(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw InputError(where + ": missing field \"" + key + "\"");
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) throw InputError(where + ": field \"" + key + "\" must be a string, not " + it->dump());
  } else {
    if (!it->is_number_integer()) {
      throw InputError(where + ": field \"" + key + "\" must be an integer, not " + it->dump());
    }
  }
  return it->get<T>();
}

std::optional<std::string> nullableString(const json& obj, const char* key, const std::string& where) {
  const auto it = obj.find(key);
  if (it != obj.end() && it->is_null()) return std::nullopt;
  return field<std::string>(obj, key, where);
}

DumpEntry parseEntry(const json& e, const std::string& where) {
  if (!e.is_object()) throw InputError(where + ": must be an object, not " + e.dump());
  DumpEntry entry;
  entry.id = field<uint64_t>(e, "id", where);
  entry.seq = field<int64_t>(e, "seq", where);
  entry.op = field<std::string>(e, "op", where);
  entry.dtype = field<std::string>(e, "dtype", where);
  entry.redop = nullableString(e, "redop", where);
  entry.count = field<uint64_t>(e, "count", where);
  entry.root = field<int>(e, "root", where);
  const auto peers = e.find("peers");
  if (peers == e.end() || !peers->is_array()) throw InputError(where + ": field \"peers\" must be an array");
  for (const json& peer : *peers) {
    if (!peer.is_number_integer()) throw InputError(where + ": \"peers\" must hold integers, not " + peer.dump());
    entry.peers.push_back(peer.get<int>());
  }
  entry.stream = field<std::string>(e, "stream", where);
  entry.state = field<std::string>(e, "state", where);
  if (!entry.open() && !entry.completed() && entry.state != "failed") {
    throw InputError(where + ": unknown state \"" + entry.state + "\" (expected enqueued, started, completed, failed)");
  }
  entry.enqueuedNs = field<int64_t>(e, "enqueued_ns", where);
  entry.startedNs = field<int64_t>(e, "started_ns", where);
  entry.endedNs = field<int64_t>(e, "ended_ns", where);
  entry.error = nullableString(e, "error", where);
  return entry;
}

json readJson(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError("cannot open " + path + ": " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    // what() starts with "[json.exception.parse_error.101] "; the rest is the useful part.
    std::string what = e.what();
    const size_t bracket = what.find("] ");
    throw InputError(path + ": not valid JSON: " + (bracket == std::string::npos ? what : what.substr(bracket + 2)));
  }
}

Dump parseDump(const std::string& path) {
  const json root = readJson(path);
  if (!root.is_object() || !root.contains("vigil_flight_recorder")) {
    throw InputError(path + ": not a vigil flight-recorder dump (no \"vigil_flight_recorder\" field)");
  }
  const auto version = field<int>(root, "vigil_flight_recorder", path);
  if (version != kSchemaVersion) {
    throw InputError(path + ": dump format version " + std::to_string(version) + ", but this vigil-doctor reads " +
                     std::to_string(kSchemaVersion) + "; use the vigil-doctor of the vigil that wrote it");
  }
  Dump dump;
  dump.file = path;
  dump.rank = field<int>(root, "rank", path);
  dump.nranks = field<int>(root, "nranks", path);
  if (dump.nranks < 1 || dump.rank < 0 || dump.rank >= dump.nranks) {
    throw InputError(path + ": rank " + std::to_string(dump.rank) + " is outside [0, nranks " +
                     std::to_string(dump.nranks) + ")");
  }
  dump.comm = field<std::string>(root, "comm", path);
  dump.host = root.contains("host") ? field<std::string>(root, "host", path) : "?";
  dump.reason = root.contains("reason") ? field<std::string>(root, "reason", path) : "?";
  dump.pid = root.contains("pid") ? field<int64_t>(root, "pid", path) : 0;
  dump.dumpedNs = field<int64_t>(root, "dumped_ns", path);
  dump.capacity = root.contains("capacity") ? field<int64_t>(root, "capacity", path) : -1;
  dump.lastCompletedSeq = field<int64_t>(root, "last_completed_seq", path);
  const auto entries = root.find("entries");
  if (entries == root.end() || !entries->is_array()) throw InputError(path + ": field \"entries\" must be an array");
  for (size_t i = 0; i < entries->size(); ++i) {
    dump.entries.push_back(parseEntry((*entries)[i], path + ": entries[" + std::to_string(i) + "]"));
  }
  return dump;
}

}  // namespace

std::vector<Dump> loadDumps(const std::vector<std::string>& paths) {
  std::vector<Dump> dumps;
  for (const std::string& path : paths) dumps.push_back(parseDump(path));
  return dumps;
}

std::string describeOp(const DumpEntry& entry) {
  std::string text = entry.op + "(" + entry.dtype + ", count " + std::to_string(entry.count);
  if (entry.redop) text += ", " + *entry.redop;
  if (entry.root >= 0) text += ", root " + std::to_string(entry.root);
  if (!entry.peers.empty()) {
    text += entry.peers.size() == 1 ? ", peer " : ", peers ";
    for (size_t i = 0; i < entry.peers.size(); ++i) {
      if (i > 0) text += ',';
      text += std::to_string(entry.peers[i]);
    }
  }
  return text + ")";
}

std::string joinRanks(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += std::to_string(ranks[i]);
    if (j > i) {
      out += j > i + 1 ? '-' : ',';  // a run of three or more, or just two
      out += std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

std::optional<std::vector<Dump>> loadDumpsOrReport(const std::vector<std::string>& paths) {
  try {
    return loadDumps(paths);
  } catch (const InputError& e) {
    std::cerr << "vigil-doctor: " << e.what() << "\n";
    return std::nullopt;
  }
}

}  // namespace vigil::doctor
