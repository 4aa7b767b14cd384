#include "core/config.hpp"

#include <charconv>
#include <cstdlib>
#include <mutex>
#include <optional>

#include "core/errors.hpp"
#include "core/log.hpp"

namespace vigil {

void raiseBadValue(std::string_view var, std::string_view value, std::string_view accepted) {
  ErrorBuilder(Errc::CfgBadValue)
      .cause(var, "='", value, "' is not valid")
      .remedy("set ", var, " to ", accepted, ", or unset it to use the default")
      .raise();
}

namespace {

std::optional<long long> parseInt(std::string_view text) {
  long long value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

int parsePositiveMs(const char* var, const char* text) {
  auto value = parseInt(text);
  if (!value || *value <= 0 || *value > 0x7fffffffLL) {
    raiseBadValue(var, text, "a positive number of milliseconds (1 to 2147483647)");
  }
  return static_cast<int>(*value);
}

bool parseSwitch(const char* var, const char* text) {
  std::string_view v(text);
  if (v == "1") return true;
  if (v == "0") return false;
  raiseBadValue(var, text, "0 or 1");
}

PortRange parsePortRange(const char* text) {
  std::string_view v(text);
  if (v == "auto") return {};
  size_t dash = v.find('-');
  auto lo = dash == std::string_view::npos ? std::nullopt : parseInt(v.substr(0, dash));
  auto hi = dash == std::string_view::npos ? std::nullopt : parseInt(v.substr(dash + 1));
  if (!lo || !hi || *lo < 1 || *hi > 65535 || *lo > *hi) {
    raiseBadValue("VIGIL_PORT_RANGE", text, "'auto' or 'lo-hi' with 1 <= lo <= hi <= 65535 (e.g. 29500-29599)");
  }
  return {static_cast<uint16_t>(*lo), static_cast<uint16_t>(*hi)};
}

// "1073741824", "512M", "1G", "64k": 4 KiB to 1 TiB.
size_t parseHeapBytes(const char* text) {
  std::string_view v(text);
  uint64_t unit = 1;
  if (!v.empty()) {
    switch (v.back()) {
      case 'k':
      case 'K': unit = uint64_t{1} << 10; break;
      case 'm':
      case 'M': unit = uint64_t{1} << 20; break;
      case 'g':
      case 'G': unit = uint64_t{1} << 30; break;
      default: break;
    }
    if (unit != 1) v.remove_suffix(1);
  }
  auto n = parseInt(v);
  constexpr uint64_t kMax = uint64_t{1} << 40;
  if (!n || *n <= 0 || static_cast<uint64_t>(*n) > kMax / unit || static_cast<uint64_t>(*n) * unit < 4096) {
    raiseBadValue("VIGIL_SYMMETRIC_HEAP", text,
                  "bytes per rank from 4096 to 1T, optionally with a K, M or G suffix (e.g. 2G)");
  }
  return static_cast<size_t>(static_cast<uint64_t>(*n) * unit);
}

}  // namespace

const char* toString(LogLevel level) {
  switch (level) {
    case LogLevel::Error: return "error";
    case LogLevel::Warn: return "warn";
    case LogLevel::Info: return "info";
    case LogLevel::Debug: return "debug";
    case LogLevel::Trace: return "trace";
  }
  return "?";
}

const char* toString(TransportKind kind) {
  switch (kind) {
    case TransportKind::Auto: return "auto";
    case TransportKind::Tcp: return "tcp";
    case TransportKind::Shm: return "shm";
    case TransportKind::Ucx: return "ucx";
  }
  return "?";
}

std::string PortRange::describe() const {
  return isAuto() ? std::string("auto") : cat(lo, "-", hi);
}

EnvConfig EnvConfig::parse(const std::function<const char*(const char*)>& lookup) {
  EnvConfig cfg;
  auto get = [&](const char* var) -> const char* {
    const char* value = lookup(var);
    return value != nullptr && *value != '\0' ? value : nullptr;
  };
  if (const char* v = get("VIGIL_TIMEOUT_MS")) {
    cfg.timeoutMs = parsePositiveMs("VIGIL_TIMEOUT_MS", v);
    cfg.timeoutFromEnv = true;
  }
  if (const char* v = get("VIGIL_CONNECT_TIMEOUT_MS")) {
    cfg.connectTimeoutMs = parsePositiveMs("VIGIL_CONNECT_TIMEOUT_MS", v);
  }
  if (const char* v = get("VIGIL_PORT_RANGE")) cfg.portRange = parsePortRange(v);
  if (const char* v = get("VIGIL_SOCKET_IFNAME")) cfg.socketIfname = v;
  if (const char* v = get("VIGIL_TRANSPORT")) {
    std::string_view t(v);
    if (t == "auto") {
      cfg.transport = TransportKind::Auto;
    } else if (t == "tcp") {
      cfg.transport = TransportKind::Tcp;
    } else if (t == "shm") {
      cfg.transport = TransportKind::Shm;
    } else if (t == "ucx") {
      cfg.transport = TransportKind::Ucx;
    } else {
      raiseBadValue("VIGIL_TRANSPORT", v, "'auto', 'shm', 'tcp' or 'ucx'");
    }
  }
  if (const char* v = get("VIGIL_FINGERPRINT")) cfg.fingerprint = parseSwitch("VIGIL_FINGERPRINT", v);
  if (const char* v = get("VIGIL_NAN_CHECK")) cfg.nanCheck = parseSwitch("VIGIL_NAN_CHECK", v);
  if (const char* v = get("VIGIL_BUFFER_GUARD")) {
    cfg.bufferGuard = parseSwitch("VIGIL_BUFFER_GUARD", v);
  }
  if (const char* v = get("VIGIL_LOG")) {
    std::string_view l(v);
    bool found = false;
    for (LogLevel level : {LogLevel::Error, LogLevel::Warn, LogLevel::Info, LogLevel::Debug, LogLevel::Trace}) {
      if (l == toString(level)) {
        cfg.logLevel = level;
        found = true;
      }
    }
    if (!found) raiseBadValue("VIGIL_LOG", v, "one of error, warn, info, debug, trace");
  }
  if (const char* v = get("VIGIL_LOG_FILE")) cfg.logFile = v;
  if (const char* v = get("VIGIL_DUMP_DIR")) cfg.dumpDir = v;
  if (const char* v = get("VIGIL_FLIGHT_RECORDER")) {
    auto n = parseInt(v);
    if (!n || *n < 0 || *n > 1000000) {
      raiseBadValue("VIGIL_FLIGHT_RECORDER", v, "a number of entries from 0 to 1000000");
    }
    cfg.flightRecorder = static_cast<int>(*n);
  }
  if (const char* v = get("VIGIL_SYMMETRIC_HEAP")) cfg.symmetricHeapBytes = parseHeapBytes(v);
  if (const char* v = get("VIGIL_ALGO")) cfg.algoText = v;
  return cfg;
}

std::string EnvConfig::describe() const {
  return cat("VIGIL_TIMEOUT_MS=", timeoutMs, " VIGIL_CONNECT_TIMEOUT_MS=", connectTimeoutMs,
             " VIGIL_PORT_RANGE=", portRange.describe(),
             " VIGIL_SOCKET_IFNAME=", socketIfname.empty() ? "(default)" : socketIfname,
             " VIGIL_TRANSPORT=", toString(transport), " VIGIL_FINGERPRINT=", fingerprint,
             " VIGIL_NAN_CHECK=", nanCheck, " VIGIL_BUFFER_GUARD=", bufferGuard, " VIGIL_LOG=", toString(logLevel),
             " VIGIL_LOG_FILE=", logFile.empty() ? "stderr" : logFile,
             " VIGIL_DUMP_DIR=", dumpDir.empty() ? "(none)" : dumpDir, " VIGIL_FLIGHT_RECORDER=", flightRecorder,
             " VIGIL_SYMMETRIC_HEAP=", symmetricHeapBytes, " VIGIL_ALGO=", algoText.empty() ? "(table)" : algoText);
}

const EnvConfig& processConfig() {
  // Parsed once; an invalid environment is remembered and reported on every
  // call, so each init names the bad variable instead of running with a default.
  static std::once_flag once;
  static EnvConfig config;
  static std::optional<Error> error;
  std::call_once(once, [] {
    try {
      config = EnvConfig::parse([](const char* var) { return std::getenv(var); });
      Logger::instance().configure(config.logLevel, config.logFile);
      VIGIL_LOG_AT(LogLevel::Info, -1, "configuration: ", config.describe());
    } catch (const Error& e) {
      error = e;
    }
  });
  if (error) throw *error;
  return config;
}

CommConfig CommConfig::resolve(const vigilConfig* user, const EnvConfig& env) {
  CommConfig cfg;
  cfg.timeoutMs = env.timeoutMs;
  if (env.timeoutFromEnv) cfg.timeoutSource = "VIGIL_TIMEOUT_MS";
  cfg.connectTimeoutMs = env.connectTimeoutMs;
  cfg.fingerprint = env.fingerprint;
  cfg.nanCheck = env.nanCheck;
  cfg.bufferGuard = env.bufferGuard;
  cfg.transport = env.transport;
  cfg.algoText = env.algoText;
  if (user == nullptr) return cfg;

  auto bad = [](const char* field, long long value, const char* accepted) {
    ErrorBuilder(Errc::ApiBadConfig)
        .cause("vigilConfig.", field, " = ", value, " is not valid")
        .remedy("set vigilConfig.", field, " to ", accepted)
        .raise();
  };
  // Older callers may pass a smaller struct: read only the fields it has.
  if (user->size < offsetof(vigilConfig, commName) + sizeof(user->commName) || user->size > 4096) {
    bad("size", static_cast<long long>(user->size), "sizeof(vigilConfig) (use VIGIL_CONFIG_INIT)");
  }
  auto milliseconds = [&](const char* field, int value, int& out) {
    if (value == -1) return;
    if (value <= 0) bad(field, value, "-1 (from the environment) or a positive number of milliseconds");
    out = value;
  };
  auto flag = [&](const char* field, int value, bool& out) {
    if (value == -1) return;
    if (value != 0 && value != 1) bad(field, value, "-1 (from the environment), 0 or 1");
    out = value == 1;
  };
  milliseconds("timeoutMs", user->timeoutMs, cfg.timeoutMs);
  if (user->timeoutMs != -1) cfg.timeoutSource = "vigilConfig.timeoutMs";
  milliseconds("connectTimeoutMs", user->connectTimeoutMs, cfg.connectTimeoutMs);
  flag("fingerprint", user->fingerprint, cfg.fingerprint);
  flag("nanCheck", user->nanCheck, cfg.nanCheck);
  flag("bufferGuard", user->bufferGuard, cfg.bufferGuard);
  if (user->commName != nullptr) {
    std::string_view name(user->commName);
    if (name.size() > 64) bad("commName (length)", static_cast<long long>(name.size()), "at most 64 characters");
    cfg.name = name;
  }
  const bool hasTimeoutName = user->size >= offsetof(vigilConfig, timeoutName) + sizeof(user->timeoutName);
  if (hasTimeoutName && user->timeoutName != nullptr && user->timeoutMs != -1) {
    std::string_view source(user->timeoutName);
    if (source.empty() || source.size() > 64) {
      bad("timeoutName (length)", static_cast<long long>(source.size()), "NULL or 1 to 64 characters");
    }
    cfg.timeoutSource = source;
  }
  const bool hasGroup = user->size >= offsetof(vigilConfig, groupRanks) + sizeof(user->groupRanks);
  if (hasGroup && (user->groupName != nullptr || user->groupRanks != nullptr)) {
    if (user->groupName == nullptr || user->groupRanks == nullptr) {
      ErrorBuilder(Errc::ApiBadConfig)
          .cause("vigilConfig.", user->groupName == nullptr ? "groupRanks" : "groupName", " is set but vigilConfig.",
                 user->groupName == nullptr ? "groupName" : "groupRanks", " is NULL")
          .remedy("set both groupName and groupRanks, or neither")
          .raise();
    }
    std::string_view group(user->groupName);
    if (group.empty() || group.size() > 64) {
      bad("groupName (length)", static_cast<long long>(group.size()), "1 to 64 characters");
    }
    cfg.groupName = group;
    cfg.groupRanksGiven = user->groupRanks;
  }
  return cfg;
}

}  // namespace vigil
