#pragma once
// vigil-doctor's log reader: the signature knowledge base (tools/log_signatures.json, data, not
// code) and the lines of a job's logs matched against it.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

namespace vigil::doctor {

// One known log line: what it looks like, what it extracts, and what it means.
struct Signature {
  std::string id, system, role;  // role: cause, symptom (a rank that only waited) or context
  std::string needle;            // literal text every matching line holds: the pre-filter
  std::string pattern;
  std::regex re;
  std::vector<std::pair<std::string, int>> fields;  // field name -> capture group
  std::string title, meaning, remedy, vigil, source;
  std::vector<std::string> causes, samples;
  // Where its fields apply: its own line; the indented lines of the same entry that follow
  // (torchrun's failure report gives the rank once per entry); or the entry that follows is the
  // one the launcher names as the first failure ("Root Cause (first observed failure):").
  enum class Scope { Line, Entry, FirstEntry } scope = Scope::Line;

  bool cause() const { return role == "cause"; }
  bool symptom() const { return role == "symptom"; }
};

// The knowledge base, in file order. load() throws InputError naming the entry and the field.
struct KnowledgeBase {
  std::string path;
  std::vector<Signature> signatures;

  static KnowledgeBase load(const std::string& path);
  // --signatures PATH, else $VIGIL_SIGNATURES, the install prefix or the source tree.
  static std::string locate(const std::string& explicitPath);
};

// Where a data file of the source tree or the install prefix is, seen from this executable:
// $ENV_VAR/NAME, then PREFIX/share/..., then the source tree relative to a build directory.
std::vector<std::string> dataFileCandidates(const char* envVar, const std::string& installRel,
                                            const std::string& sourceRel);

// The one-line meaning of each vigil error id, from the table of docs/errors.md (empty when
// the file is not found).
std::map<std::string, std::string> vigilErrorMeanings();

// One line of the logs that matched a signature.
struct Hit {
  const Signature* sig = nullptr;
  size_t file = 0;                // index into the file list
  size_t line = 0;                // 1-based
  std::optional<int64_t> timeMs;  // from the line's own timestamp, when it has one
  std::optional<int> rank;
  std::string host;
  std::map<std::string, std::string> fields;
  std::string text;
  bool namedFirst = false;  // in the entry the launcher names as the first failure
};

struct LogFile {
  std::string path;
  std::optional<int> rank;  // from the file's name or, failing that, from its lines
  std::string host;
  size_t lines = 0;
  bool mixedRanks = false;  // lines carry their own rank prefixes (launcher output)
};

// Everything read from the logs: the files, the hits and where every rank's lines are.
struct LogScan {
  std::vector<LogFile> files;
  std::vector<Hit> hits;
  std::deque<Signature> synthesized;  // vigil error ids met in the logs but not in the knowledge base
  std::set<int> ranksWithLines;
  std::set<std::string> hosts;
  std::map<int, std::string> hostOfRank;
  std::map<std::string, std::string> vigilMeanings;  // docs/errors.md's table, read once
  std::optional<int> nranks;
  size_t lines = 0;
};

// Reads every file (directories recursively) and matches every line; throws InputError.
LogScan scanLogs(const KnowledgeBase& kb, const std::vector<std::string>& inputs);

// What the ranks say together: one sentence, the lines it rests on, and the rank it names.
struct Finding {
  std::string text;
  std::vector<const Hit*> evidence;
  std::optional<int> blame;  // the rank the finding names as the origin, if any
  bool decisive = false;     // it explains the job without naming one rank (diverged programs)
};

// The verdict over a scan, for every output (text, JSON, HTML).
struct Report {
  enum class Kind { None, Failure, PeerLost, Reasoning, WaitsOnly } kind = Kind::None;
  const Hit* hit = nullptr;       // the verdict's line (Failure, PeerLost, WaitsOnly)
  std::optional<size_t> finding;  // the finding the verdict rests on (Reasoning)
  std::optional<int> origin;      // the rank the verdict names
  std::string originHost, headline, peerNote;
  std::set<int> onlyWaited;  // ranks with waits and no failure of their own
  std::vector<Finding> findings;
  std::vector<const Hit*> ordered;  // every hit, in time order
  size_t timed = 0;                 // hits with a time

  std::vector<const Hit*> firstPerRankAndSignature() const;
};

Report analyse(const LogScan& scan);
std::string formatTimeMs(int64_t ms);
std::tuple<int, int, int> civilFromDays(
    int64_t days);  // days since 1970-01-01 -> {year, month, day}  // "2024-05-01 12:34:56.789"
// "path/to/file.log:12"
std::string hitLocation(const LogScan& scan, const Hit& hit);

struct LogsOutput {
  std::string signatures;  // --signatures, or found
  size_t maxEvidence = 24;
  bool json = false;
  std::string htmlPath;
};

void printText(const LogScan& scan, const KnowledgeBase& kb, const Report& report, size_t maxEvidence);
void printJson(const LogScan& scan, const KnowledgeBase& kb, const Report& report);
bool writeHtml(const LogScan& scan, const KnowledgeBase& kb, const Report& report, const std::string& path);

// Subcommands; each returns the process exit code.
int runCheckSignatures(const std::string& path, size_t minimum);
int runLogs(const std::vector<std::string>& inputs, const LogsOutput& output);

}  // namespace vigil::doctor
