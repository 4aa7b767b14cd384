#include "core/log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <ctime>

namespace vigil {

Logger& Logger::instance() {
  static Logger* const logger = new Logger();  // intentionally immortal (see header)
  return *logger;
}

void Logger::configure(LogLevel level, std::string fileTemplate) {
  std::lock_guard lock(mutex_);
  level_.store(static_cast<int>(level), std::memory_order_relaxed);
  fileTemplate_ = std::move(fileTemplate);
  // Files of the previous template are not written again.
  for (auto& [rank, fd] : fdByRank_) {
    if (fd != STDERR_FILENO) ::close(fd);
  }
  fdByRank_.clear();
}

int Logger::fdFor(int rank) {
  if (fileTemplate_.empty()) return STDERR_FILENO;
  auto it = fdByRank_.find(rank);
  if (it != fdByRank_.end()) return it->second;
  std::string path;
  for (size_t i = 0; i < fileTemplate_.size(); ++i) {
    if (fileTemplate_[i] == '%' && i + 1 < fileTemplate_.size()) {
      char c = fileTemplate_[i + 1];
      if (c == 'r') {
        path += rank >= 0 ? std::to_string(rank) : std::string("proc");
        ++i;
        continue;
      }
      if (c == 'p') {
        path += std::to_string(getpid());
        ++i;
        continue;
      }
    }
    path += fileTemplate_[i];
  }
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) fd = STDERR_FILENO;  // logging must never fail a job
  fdByRank_.emplace(rank, fd);
  return fd;
}

void Logger::write(LogLevel level, int rank, std::string_view text) {
  static const char* const kNames[] = {"ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  std::string line = rank >= 0 ? cat("vigil[rank ", rank, " pid ", getpid(), "] ") : cat("vigil[pid ", getpid(), "] ");
  line += kNames[static_cast<int>(level)];
  line += ' ';
  line += text;
  line += '\n';
  std::lock_guard lock(mutex_);
  int fd = fdFor(rank);
  // One write per line keeps lines whole when ranks share a file.
  ssize_t ignored = ::write(fd, line.data(), line.size());
  (void)ignored;
}

void RateLimitedLog::flush() {
  nextSummary_ = std::chrono::steady_clock::now() + interval_;
  if (suppressed_ == 0) return;
  Logger::instance().write(level_, -1,
                           cat(summaryPrefix_, " ", suppressed_, " more ", summaryNoun_, " (not logged one by one)"));
  suppressed_ = 0;
}

}  // namespace vigil
