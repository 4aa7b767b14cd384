#pragma once
// Log lines look like "vigil[rank 2 pid 4711] WARN <text>". The level check
// is one relaxed atomic load, so disabled logging costs nothing on hot paths.

#include <atomic>
#include <chrono>
#include <cstddef>
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

// Bounds the lines of one repeated event that strangers can trigger at will
// (a flood of bad connections): the first `burst` are logged in full, the
// rest are counted and summarised at most once per `interval` and at flush().
// Not thread-safe: one owner (e.g. the rendezvous root's thread) uses it.
class RateLimitedLog {
 public:
  RateLimitedLog(LogLevel level, size_t burst, std::chrono::milliseconds interval)
      : level_(level), burst_(burst), interval_(interval) {}
  ~RateLimitedLog() { flush(); }
  RateLimitedLog(const RateLimitedLog&) = delete;
  RateLimitedLog& operator=(const RateLimitedLog&) = delete;

  // What a summary line says before its count, e.g. "rendezvous root at 10.0.0.1:29500 closed".
  void setSummary(std::string prefix, std::string noun) {
    summaryPrefix_ = std::move(prefix);
    summaryNoun_ = std::move(noun);
  }

  template <typename... Parts>
  void write(const Parts&... parts) {
    if (!Logger::instance().enabled(level_)) return;
    if (logged_ < burst_) {
      ++logged_;
      Logger::instance().write(
          level_, -1, cat(parts..., logged_ == burst_ ? " (further ones are counted, not logged one by one)" : ""));
      return;
    }
    ++suppressed_;
    auto now = std::chrono::steady_clock::now();
    if (now >= nextSummary_) flush();
  }

  // Logs the count of the events not logged since the last summary, if any.
  void flush();

 private:
  LogLevel level_;
  size_t burst_;
  std::chrono::milliseconds interval_;
  size_t logged_ = 0;
  size_t suppressed_ = 0;
  std::chrono::steady_clock::time_point nextSummary_ = std::chrono::steady_clock::now() + interval_;
  std::string summaryPrefix_ = "suppressed";
  std::string summaryNoun_ = "similar events";
};

}  // namespace vigil
