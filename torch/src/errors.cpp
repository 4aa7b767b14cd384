#include "errors.hpp"

#include <string_view>

namespace vigil::torchpg {

void raise(const OpSite& site, vigilResult_t result, const char* id, const std::string& cause,
           const std::string& remedy) {
  std::string text = std::string(id) + ": rank " + std::to_string(site.rank) + "/" + std::to_string(site.size);
  if (!site.comm.empty()) text += " (comm '" + site.comm + "')";
  text += ": " + std::string(site.op) + ": " + cause;
  if (text.back() != '.') text += '.';
  text += " Remedy: " + remedy;
  if (text.back() != '.') text += '.';
  throw vigil::Error(result, text);
}

void check(vigilResult_t result, vigilComm_t comm) {
  if (result == vigilSuccess) return;
  std::string text = vigilGetLastError(comm);
  // The group's communicators take their timeout from the process group's
  // timeout through vigilConfig: name it as the torch user set it.
  static constexpr std::string_view kConfigSource = "(vigilConfig.timeoutMs)";
  if (auto at = text.find(kConfigSource); at != std::string::npos) {
    text.replace(at, kConfigSource.size(), "(the process group's timeout)");
  }
  throw vigil::Error(result, text);
}

}  // namespace vigil::torchpg
