#pragma once
// vigil-doctor's view of the flight-recorder dumps that comm/flight_recorder.cpp writes
// (schema documented in flight_recorder.hpp), and the entry points of its subcommands.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace vigil::doctor {

struct DumpEntry {
  uint64_t id = 0;
  int64_t seq = -1;  // -1: point-to-point
  std::string op, dtype;
  std::optional<std::string> redop;
  uint64_t count = 0;
  int root = -1;
  std::vector<int> peers;
  std::string stream, state;  // state: enqueued, started, completed, failed
  int64_t enqueuedNs = 0, startedNs = 0, endedNs = 0;
  std::optional<std::string> error;

  bool collective() const { return seq >= 0; }
  bool completed() const { return state == "completed"; }
  bool open() const { return state == "enqueued" || state == "started"; }  // neither completed nor failed
};

struct Dump {
  std::string file;
  int rank = 0, nranks = 0;
  std::string comm, host, reason;
  int64_t pid = 0, dumpedNs = 0, capacity = -1, lastCompletedSeq = -1;
  std::vector<DumpEntry> entries;  // oldest first
};

// A dump that cannot be read or does not follow the schema; what() names the file and the field.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

std::vector<Dump> loadDumps(const std::vector<std::string>& paths);
// loadDumps, printing the reason to stderr instead of throwing.
std::optional<std::vector<Dump>> loadDumpsOrReport(const std::vector<std::string>& paths);

// "allreduce(float32, count 1024, sum)", "broadcast(float32, count 8, root 0)", "send(int8, count 4, peer 1)".
std::string describeOp(const DumpEntry& entry);
// "0", "0,2", "0-7,9": short enough for thousands of ranks.
std::string joinRanks(const std::vector<int>& ranks);

// "  label: text" wrapped at 100 columns, the text of every line starting at column indent.
void printWrapped(const std::string& label, const std::string& text, size_t indent);

// Subcommands; each returns the process exit code.
int runExplain(const std::string& id, const std::string& docsPath);
int runDumps(const std::vector<std::string>& files);
int runTrace(const std::vector<std::string>& files, const std::string& outPath);

}  // namespace vigil::doctor
