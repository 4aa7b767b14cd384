#include "errors.hpp"

#include "core/error_text.hpp"

namespace vigil::torchpg {

void raiseAfterStop(const OpSite& site) {
  raise(site, ids::TorchAfterExit,
        "issued after the interpreter began to exit: vigil.torch stopped the group's threads at exit (atexit) and "
        "destroyed its communicators, telling the peers",
        "issue the group's operations before the program ends: not from an atexit handler registered before "
        "vigil.torch was imported, nor from a __del__ that runs while the interpreter shuts down");
}

void raise(const OpSite& site, ids::Id id, const std::string& cause, const std::string& remedy) {
  vigil::ErrorFields fields{.id = id.id,
                            .rank = site.rank,
                            .nranks = site.size,
                            .commName = site.comm,
                            .op = site.op,
                            .cause = withFullStop(cause),
                            .remedy = withFullStop(remedy)};
  const std::string text =
      errorText({fields.id, fields.rank, fields.nranks, fields.commName, fields.op, -1, fields.cause, fields.remedy});
  throw vigil::Error(id.result, text, std::move(fields));
}

void check(vigilResult_t result, vigilComm_t comm) {
  vigil::check(result, comm);  // the library's error, from its fields
}

}  // namespace vigil::torchpg
