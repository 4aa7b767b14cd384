#pragma once
// Building message text. Only used on error, log and report paths.

#include <sstream>
#include <string>
#include <vector>

namespace vigil {

template <class... Parts>
std::string cat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

// "0, 3, 5" — or "0-7" style runs for long lists, so a report about 4096
// ranks stays readable.
std::string joinRanks(const std::vector<int>& ranks);

}  // namespace vigil
