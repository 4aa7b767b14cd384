// vigil-run's command line (see run_options.hpp).

#include "run_options.hpp"

#include <signal.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>

namespace vigil::run {
namespace {

constexpr int kExitUsage = 2;

constexpr const char* kUsage =
    "usage: vigil-run -n N [--timeout S] [--grace S] [--dump-grace S] [--] prog [args...]\n"
    "       vigil-run --dump PID\n"
    "  -n, --np N       number of ranks to start on this host (1..4096)\n"
    "  --timeout S      stop all ranks after S seconds (fractions allowed) and exit 124\n"
    "  --grace S        seconds from SIGTERM to SIGKILL when stopping ranks (default 5)\n"
    "  --dump-grace S   with VIGIL_DUMP_DIR set: seconds the ranks get to write their flight\n"
    "                   recorders (SIGUSR1) before SIGTERM when a rank failed or on --timeout\n"
    "                   (default 5; 0 = no dumps first)\n"
    "  --dump PID       ask the vigil-run with this pid to have its running ranks write their\n"
    "                   flight recorders to VIGIL_DUMP_DIR now (it sends them SIGUSR1 and reports\n"
    "                   each rank's dump on its stderr); the job goes on\n"
    "  -h, --help       print this help\n"
    "Each rank gets VIGIL_ROOT_INFO, VIGIL_RANK, VIGIL_WORLD_SIZE, VIGIL_LOCAL_RANK,\n"
    "VIGIL_LOCAL_SIZE and VIGIL_DUMP_NOTIFY_FD; stdin is /dev/null; each output line is prefixed\n"
    "\"[rank] \". When a rank fails the others are stopped (after their dumps, see --dump-grace);\n"
    "the exit code is the first failing rank's (128+signal if it was killed), 124 on --timeout,\n"
    "0 if every rank exits 0. SIGUSR1 to vigil-run is the same as --dump.\n";

[[noreturn]] void usageError(const std::string& msg) {
  std::fprintf(stderr, "vigil-run: %s\nTry 'vigil-run --help'.\n", msg.c_str());
  std::exit(kExitUsage);
}

// The whole text must be a number in [lo, hi]; `expected` tells the user what was wanted.
double parseNumber(const std::string& opt, const char* text, double lo, double hi, bool integer, const char* expected) {
  char* end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (*text == '\0' || *end != '\0' || errno != 0 || !(v >= lo && v <= hi) || (integer && v != std::floor(v)))
    usageError("bad value for " + opt + ": '" + text + "' (expected " + expected + ")");
  return v;
}

}  // namespace

Options parseArgs(int argc, char** argv) {
  constexpr const char* kSecs = "seconds, e.g. 30 or 0.5";
  constexpr const char* kCount = "an integer 1..4096";
  constexpr const char* kPid = "the process id of a running vigil-run";
  Options o;
  int i = 1;
  for (; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // first non-option: the program starts here
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    }
    // Long options also take their value as --np=4.
    std::string name(a.starts_with("--") ? a.substr(0, a.find('=')) : a);
    const char* value = nullptr;
    if (name.size() < a.size())
      value = argv[i] + name.size() + 1;
    else if (i + 1 < argc)
      value = argv[++i];
    else
      usageError("option " + name + " needs a value");
    if (name == "-n" || name == "--np")
      o.nranks = static_cast<int>(parseNumber(name, value, 1, kMaxRanks, true, kCount));
    else if (name == "--timeout")
      o.timeoutS = parseNumber(name, value, 1e-3, 1e9, false, kSecs);
    else if (name == "--grace")
      o.graceS = parseNumber(name, value, 0, 1e9, false, kSecs);
    else if (name == "--dump-grace")
      o.dumpGraceS = parseNumber(name, value, 0, 1e9, false, kSecs);
    else if (name == "--dump")
      o.dumpPid = static_cast<pid_t>(parseNumber(name, value, 1, 4194304, true, kPid));
    else
      usageError("unknown option '" + std::string(a) + "'");
  }
  if (o.dumpPid != 0) {
    if (o.nranks != 0 || i < argc) usageError("--dump PID takes no other options and no program");
    return o;
  }
  if (o.nranks == 0) usageError("missing -n N (number of ranks)");
  if (i >= argc) usageError("no program given");
  o.argv.assign(argv + i, argv + argc);
  o.argv.push_back(nullptr);
  return o;
}

// `vigil-run --dump PID`: checks that PID is a vigil-run and sends it SIGUSR1.
int askForDumps(pid_t pid) {
  std::string comm;
  std::ifstream(std::string("/proc/") + std::to_string(pid) + "/comm") >> comm;
  if (comm.empty()) {
    std::fprintf(stderr, "vigil-run: no process %d\n", pid);
    return 1;
  }
  if (comm != "vigil-run") {
    std::fprintf(stderr, "vigil-run: process %d is '%s', not a vigil-run; nothing sent\n", pid, comm.c_str());
    return 1;
  }
  if (::kill(pid, SIGUSR1) != 0) {
    std::fprintf(stderr, "vigil-run: cannot signal process %d: %s\n", pid, std::strerror(errno));
    return 1;
  }
  std::printf(
      "vigil-run: asked vigil-run (pid %d) for its ranks' flight recorders; it reports each rank's dump on its "
      "stderr\n",
      pid);
  return 0;
}

}  // namespace vigil::run
