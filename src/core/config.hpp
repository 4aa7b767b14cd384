#pragma once
// Every VIGIL_* tunable is declared here, read once per process, validated
// (a bad value is an Error, never a silent default) and printed once at
// VIGIL_LOG=info. Per-communicator settings (vigilConfig) override the
// environment field by field.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "vigil/vigil.h"

namespace vigil {

enum class LogLevel : int { Error = 0, Warn = 1, Info = 2, Debug = 3, Trace = 4 };
enum class TransportKind : uint8_t { Auto = 0, Tcp = 1, Shm = 2, Ucx = 3 };

const char* toString(LogLevel level);

// Throws Error(VG-CFG-001): `var`='`value`' is not valid; set it to `accepted`.
[[noreturn]] void raiseBadValue(std::string_view var, std::string_view value, std::string_view accepted);
const char* toString(TransportKind kind);

struct PortRange {
  uint16_t lo = 0;  // 0,0 = any free port ("auto")
  uint16_t hi = 0;
  bool isAuto() const { return lo == 0; }
  std::string describe() const;
};

struct EnvConfig {
  int timeoutMs = 600000;
  bool timeoutFromEnv = false;  // VIGIL_TIMEOUT_MS was set
  int connectTimeoutMs = 120000;
  PortRange portRange;
  std::string socketIfname;  // empty = first non-loopback interface that is up, else lo
  TransportKind transport = TransportKind::Auto;
  bool fingerprint = true;
  bool nanCheck = false;
  bool bufferGuard = false;
  LogLevel logLevel = LogLevel::Warn;
  std::string logFile;  // empty = stderr; %r = rank, %p = pid
  std::string dumpDir;
  int flightRecorder = 2048;
  // Each rank's part of a communicator's symmetric heap (VIGIL_SYMMETRIC_HEAP:
  // bytes, or with a K, M or G suffix). Address space only until allocated.
  size_t symmetricHeapBytes = size_t{1} << 30;
  // VIGIL_ALGO as written. The algorithm table (algo/, above core) parses
  // and validates it when a communicator is created.
  std::string algoText;

  // Parses from a lookup function (getenv in production, a map in tests).
  // Throws Error(VG-CFG-001) naming the variable, its value and what is accepted.
  static EnvConfig parse(const std::function<const char*(const char*)>& lookup);
  // "VIGIL_TIMEOUT_MS=600000 VIGIL_PORT_RANGE=auto ..." for the init log line.
  std::string describe() const;
};

// The process-wide configuration, parsed on first use. If the environment is
// invalid, every call throws the same Error.
const EnvConfig& processConfig();

// Resolved settings of one communicator: vigilConfig fields over the environment.
struct CommConfig {
  int timeoutMs = 600000;
  // Where timeoutMs came from, for error text: "VIGIL_TIMEOUT_MS",
  // "vigilConfig.timeoutMs", "the default", or what derived it (a split's
  // node-local communicator waits twice its parent's timeout).
  std::string timeoutSource = "the default";
  int connectTimeoutMs = 120000;
  bool fingerprint = true;
  bool nanCheck = false;
  bool bufferGuard = false;
  TransportKind transport = TransportKind::Auto;
  std::string algoText;  // forced algorithms (VIGIL_ALGO), parsed by algo::AlgoOverrides
  std::string name;
  // vigilConfig.groupName / groupRanks (the init call copies the ranks: it
  // knows nranks); empty: none. Splits clear them.
  std::string groupName;
  const int* groupRanksGiven = nullptr;
  std::vector<int> groupRanks;

  // Throws Error(VG-API-012) for an invalid field.
  static CommConfig resolve(const vigilConfig* user, const EnvConfig& env);
};

}  // namespace vigil
