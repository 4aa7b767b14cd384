#pragma once
// A point in time by which something must happen. All waits in vigil take
// one, so no wait is unbounded.

#include <algorithm>
#include <chrono>
#include <cstdint>

namespace vigil {

using Clock = std::chrono::steady_clock;

class Deadline {
 public:
  static Deadline afterMs(int64_t ms) { return Deadline(Clock::now() + std::chrono::milliseconds(ms)); }
  static Deadline never() { return Deadline(Clock::time_point::max()); }
  explicit Deadline(Clock::time_point at) : at_(at) {}

  bool expired() const { return Clock::now() >= at_; }
  Clock::time_point at() const { return at_; }
  // Milliseconds left, clamped to [0, capMs], rounded up so a poll never
  // wakes a hair before the deadline and spins.
  int pollTimeoutMs(int capMs = 1 << 30) const {
    if (at_ == Clock::time_point::max()) return capMs;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(at_ - Clock::now()).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, capMs));
  }
  Deadline earlier(Deadline other) const { return Deadline(std::min(at_, other.at_)); }

 private:
  Clock::time_point at_;
};

inline double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace vigil
