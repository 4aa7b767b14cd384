#pragma once
// vigil-run's command line: its options, their help text, and their parsing
// (a bad option prints the reason and exits 2).

#include <sys/types.h>

#include <vector>

namespace vigil::run {

constexpr int kMaxRanks = 4096;

struct Options {
  int nranks = 0;
  double timeoutS = 0;  // 0 = no timeout
  double graceS = 5;
  double dumpGraceS = 5;
  pid_t dumpPid = 0;        // --dump PID: only ask that launcher for dumps
  std::vector<char*> argv;  // program and its args, null-terminated for execvp
};

// Exits with the help text (-h) or a usage error; otherwise returns the options.
Options parseArgs(int argc, char** argv);

// `vigil-run --dump PID`: checks that PID is a vigil-run, sends it SIGUSR1 and returns the
// exit code (0, or 1 with the reason on stderr).
int askForDumps(pid_t pid);

}  // namespace vigil::run
