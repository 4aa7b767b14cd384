#pragma once
// The one way a C API call hands an operation over: resolved (created
// reduction operators), checked, then run now, added to the open group, or
// queued on the stream.

#include "algo/op_desc.hpp"
#include "vigil/vigil.h"

namespace vigil::api {

vigilResult_t submit(vigilComm_t comm, vigilStream_t stream, const OpDesc& op);

}  // namespace vigil::api
