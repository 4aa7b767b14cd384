#pragma once
// Log lines look like "vigil[rank 2 pid 4711] WARN <text>". The level check
// is one relaxed atomic load, so disabled logging costs nothing on hot paths.

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/config.hpp"
#include "core/strcat.hpp"

namespace vigil {

class Logger {
 public:
  // Never destroyed: threads and exit handlers may log until the very end.
  static Logger& instance();

  void configure(LogLevel level, std::string fileTemplate);
  bool enabled(LogLevel level) const { return static_cast<int>(level) <= level_.load(std::memory_order_relaxed); }
  // rank < 0: the process, not a rank (root server, launcher, config).
  void write(LogLevel level, int rank, std::string_view text);

 private:
  Logger() = default;
  int fdFor(int rank);

  std::atomic<int> level_{static_cast<int>(LogLevel::Warn)};
  std::mutex mutex_;
  std::string fileTemplate_;
  std::unordered_map<int, int> fdByRank_;  // only with %r in VIGIL_LOG_FILE
};

#define VIGIL_LOG_AT(level, rank, ...)                                           \
  do {                                                                           \
    if (::vigil::Logger::instance().enabled(level)) {                            \
      ::vigil::Logger::instance().write(level, rank, ::vigil::cat(__VA_ARGS__)); \
    }                                                                            \
  } while (0)

}  // namespace vigil
