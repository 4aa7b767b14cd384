#include "errors.hpp"

#include "core/error_text.hpp"

namespace vigil::torchpg {

void raise(const OpSite& site, ids::Id id, const std::string& cause, const std::string& remedy) {
  const std::string stoppedCause = withFullStop(cause);
  const std::string stoppedRemedy = withFullStop(remedy);
  throw vigil::Error(id.result,
                     errorText({id.id, site.rank, site.size, site.comm, site.op, -1, stoppedCause, stoppedRemedy}));
}

void check(vigilResult_t result, vigilComm_t comm) {
  if (result == vigilSuccess) return;
  vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;
  if (vigilGetLastErrorInfo(comm, &info) != vigilSuccess || *info.text == '\0') {
    throw vigil::Error(result, std::string("vigil call failed: ") + vigilGetErrorString(result));
  }
  throw vigil::Error(info.result, errorText({info.id, info.rank, info.nranks, info.commName, info.op, info.seq,
                                             info.cause, info.remedy}));
}

}  // namespace vigil::torchpg
