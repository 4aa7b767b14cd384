#include "errors.hpp"

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
  if (result != vigilSuccess) throw vigil::Error(result, vigilGetLastError(comm));
}

}  // namespace vigil::torchpg
