#pragma once
// vigilGroupStart/End: operations issued between them on one thread are
// collected and run as one batch at the outermost GroupEnd: inline for the
// NULL stream, or as one piece of work on the group's stream. Consecutive
// point-to-point ops on a communicator progress together (batch_isend_irecv);
// every buffer of the batch stays in use until the whole batch completes, so
// an event recorded after the group covers all of them.

#include <memory>

#include "algo/op_desc.hpp"

namespace vigil {

class Communicator;
class Stream;

namespace group {

bool active();
void start();
// Runs or enqueues the batch; throws the first Error (every op is still attempted).
void end();
// Validates now (a bad argument fails at its own call) and queues the op.
void add(std::shared_ptr<Communicator> comm, const OpDesc& op, std::shared_ptr<Stream> stream);

}  // namespace group
}  // namespace vigil
