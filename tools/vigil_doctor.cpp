// vigil-doctor: explains error ids and reads the flight-recorder dumps that ranks write on a
// timeout, mismatch or abort (VIGIL_DUMP_DIR) or on demand (vigilCommDumpFlightRecorder).
//
// Exit codes: 0 done (also when the dumps show a problem: finding it is the job), 1 unreadable
// or invalid input/output, 2 bad usage or unknown error id.

#include <algorithm>
#include <iostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "doctor_dump.hpp"
#include "doctor_logs.hpp"

namespace {

using namespace vigil::doctor;

constexpr const char* kUsage = R"(usage:
  vigil-doctor explain VG-XXX-NNN [--docs PATH/errors.md]
      print the long form of an error id (cause and remedy) from docs/errors.md;
      the file is found via $VIGIL_DOCS_DIR, the install prefix or the build tree
  vigil-doctor dumps FILE...
      merge the flight-recorder dumps of all ranks (grouped by communicator): missing ranks,
      where each rank is, the first seq where ranks diverge, ranks behind or stuck, failures;
      the world size comes from the dumps, and with a rank's dump missing the verdict is
      marked partial (`vigil-run --dump PID` or SIGUSR1 makes running ranks write theirs)
  vigil-doctor trace FILE... -o OUT.json
      write a Chrome/Perfetto trace: one process per rank, one thread per stream
  vigil-doctor logs FILE|DIR... [--json] [--html REPORT.html] [--signatures KB.json] [--evidence N]
      read the logs of a failed job (plain or .gz; directories recursively; one file per rank
      or host, or launcher output with torchrun/mpirun/srun rank prefixes) and print a verdict:
      the first failure in time across ranks, its signature, cause and remedy (and the vigil
      error id of that situation), the ranks that only waited on it, and what the ranks say
      together (the straggler behind a collective timeout, diverged collectives, ports in use
      by host, ranks missing at init, ranks that exited early), with the file:line of each;
      --json prints it for programs, --html also writes a self-contained report with a timeline
  vigil-doctor logs --check-signatures [KB.json] [--minimum N]
      prove the signature knowledge base: every sample matches its own signature with every
      field, and no other (the installed tools/log_signatures.json by default, at least 60)
  vigil-doctor --help
)";

int usageError(const std::string& what) {
  std::cerr << "vigil-doctor: " << what << "\n" << kUsage;
  return 2;
}

// --name VALUE or --name=VALUE; advances i past a separate value.
bool optionValue(const std::vector<std::string>& args, size_t& i, std::string_view name, std::string& value) {
  const std::string& arg = args[i];
  if (arg == name) {
    if (i + 1 >= args.size()) throw std::invalid_argument(std::string(name) + " needs a value");
    value = args[++i];
    return true;
  }
  if (arg.starts_with(std::string(name) + "=")) {
    value = arg.substr(name.size() + 1);
    return true;
  }
  return false;
}

int explainCommand(const std::vector<std::string>& args) {
  std::string id, docs;
  for (size_t i = 0; i < args.size(); ++i) {
    if (optionValue(args, i, "--docs", docs)) continue;
    if (args[i].starts_with("-")) return usageError("explain: unknown option " + args[i]);
    if (!id.empty()) return usageError("explain takes one error id, got " + id + " and " + args[i]);
    id = args[i];
  }
  if (id.empty()) return usageError("explain needs an error id, e.g. vigil-doctor explain VG-OP-001");
  return runExplain(id, docs);
}

int dumpsCommand(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  for (const std::string& arg : args) {
    if (arg.starts_with("-")) return usageError("dumps: unknown option " + arg);
    files.push_back(arg);
  }
  if (files.empty()) return usageError("dumps needs at least one dump file (vigil-<comm>-rank<r>.json)");
  return runDumps(files);
}

int traceCommand(const std::vector<std::string>& args) {
  std::vector<std::string> files;
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (optionValue(args, i, "-o", out) || optionValue(args, i, "--output", out)) continue;
    if (args[i].starts_with("-")) return usageError("trace: unknown option " + args[i]);
    files.push_back(args[i]);
  }
  if (files.empty()) return usageError("trace needs at least one dump file");
  if (out.empty()) return usageError("trace needs an output file: -o OUT.json");
  return runTrace(files, out);
}

int logsCommand(const std::vector<std::string>& args) {
  std::vector<std::string> inputs;
  std::string signatures, evidence = "24", minimum, html;
  bool check = false, json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (optionValue(args, i, "--signatures", signatures) || optionValue(args, i, "--evidence", evidence) ||
        optionValue(args, i, "--minimum", minimum) || optionValue(args, i, "--html", html))
      continue;
    if (args[i] == "--check-signatures" || args[i] == "--json") {
      (args[i] == "--json" ? json : check) = true;
      continue;
    }
    if (args[i].starts_with("-")) return usageError("logs: unknown option " + args[i]);
    inputs.push_back(args[i]);
  }
  const auto count = [](const std::string& text, const char* what) {
    if (text.empty() || text.size() > 6 || !std::all_of(text.begin(), text.end(), ::isdigit))
      throw std::invalid_argument(std::string(what) + " needs a count, got '" + text + "'");
    return static_cast<size_t>(std::stoul(text));
  };
  if (check) {
    if (inputs.size() > 1) return usageError("logs --check-signatures takes at most one knowledge-base file");
    const std::string path = inputs.empty() ? signatures : inputs[0];
    // The shipped knowledge base must hold at least 60; a file of one's own, at least one.
    return runCheckSignatures(path, minimum.empty() ? (path.empty() ? 60 : 1) : count(minimum, "--minimum"));
  }
  if (inputs.empty()) return usageError("logs needs at least one log file or directory");
  return runLogs(inputs, LogsOutput{signatures, count(evidence, "--evidence"), json, html});
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> all(argv + 1, argv + argc);
  if (all.empty()) return usageError("missing command");
  const std::string& command = all[0];
  const std::vector<std::string> args(all.begin() + 1, all.end());
  const auto isHelp = [](const std::string& arg) { return arg == "--help" || arg == "-h" || arg == "help"; };
  if (isHelp(command) || std::any_of(args.begin(), args.end(), isHelp)) {
    std::cout << kUsage;
    return 0;
  }
  try {
    if (command == "explain") return explainCommand(args);
    if (command == "dumps") return dumpsCommand(args);
    if (command == "trace") return traceCommand(args);
    if (command == "logs") return logsCommand(args);
  } catch (const std::invalid_argument& e) {
    return usageError(e.what());
  }
  return usageError("unknown command '" + command + "'");
}
