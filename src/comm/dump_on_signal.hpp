#pragma once
// Flight-recorder dumps on demand: SIGUSR1 makes every live communicator of
// the process write its flight recorder to VIGIL_DUMP_DIR ("reason":"signal"),
// e.g. from `vigil-run --dump`, or from vigil-run itself before it stops the
// ranks of a failed job. The handler only signals an eventfd; a thread of its
// own writes the dumps, outside the signal handler.
//
// Under vigil-run, VIGIL_DUMP_NOTIFY_FD names a pipe on which each round of
// dumps is acknowledged, so the launcher stops the ranks as soon as all of
// them have written theirs: one DumpNotice per round, and one when the
// handler is installed, so that the launcher never sends SIGUSR1 to a rank
// that would die of it (a rank before its first init, or not a vigil program).

#include <cstdint>

namespace vigil {

struct DumpNotice {
  int32_t launcherRank;  // VIGIL_RANK, -1 if unset
  int32_t pid;
  int32_t dumpsWritten;  // kHandlerInstalled: sent once, when the handler is in place
  static constexpr int32_t kHandlerInstalled = -1;
};
static_assert(sizeof(DumpNotice) == 12, "written to a pipe in one piece");

// Installs the SIGUSR1 handler and starts the dump thread, once per process,
// if SIGUSR1 still has its default action (a program's own handler is kept).
void installDumpOnSignal();
// Joins the dump thread (process exit). The handler stays, harmlessly.
void stopDumpOnSignal();

}  // namespace vigil
