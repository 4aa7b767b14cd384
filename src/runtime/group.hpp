#pragma once
// vigilGroupStart/End: operations issued between them on one thread are
// collected and run as one batch at the outermost GroupEnd. Consecutive
// point-to-point ops on a communicator progress together (batch_isend_irecv);
// every buffer of the batch stays referenced until the batch completes.

#include <memory>

#include "comm/op_desc.hpp"

namespace vigil {

class Communicator;

namespace group {

bool active();
void start();
// Runs the batch; throws the first Error (every op is still attempted).
void end();
void add(std::shared_ptr<Communicator> comm, const OpDesc& op);

}  // namespace group
}  // namespace vigil
