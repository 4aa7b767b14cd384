// The communicator's flight recorder: what it ran, when, and how it ended,
// written as JSON when something goes wrong (timeout, mismatch, abort) and
// on demand, for vigil-doctor to merge across ranks.

#include "comm/communicator.hpp"
#include "core/log.hpp"

namespace vigil {

uint64_t Communicator::recordEnqueued(const OpDesc& op, const std::string& stream) {
  FlightEntry entry;
  entry.op = op.kind;
  entry.dtype = op.dtype;
  entry.redop = op.redop;
  entry.hasRedop = op.hasRedOp();
  entry.count = op.count;
  entry.root = op.hasRoot() ? op.root : -1;
  if (isPointToPoint(op.kind)) entry.peers.push_back(op.peer);
  entry.stream = stream;
  // With the recorder off, ids still come from a counter: the buffer guard keys on them.
  uint64_t id = recorder_.enqueue(std::move(entry));
  if (id == 0) id = (uint64_t{1} << 63) | unrecordedIds_.fetch_add(1);
  guardSendBuffer(id, op);
  return id;
}

void Communicator::dumpFlightRecorder(const std::string& path, const std::string& reason) const {
  std::string target = path;
  if (target.empty()) {
    if (dumpDir_.empty()) {
      error(Errc::CommDumpFailed)
          .op("vigilCommDumpFlightRecorder")
          .cause("no path was given and VIGIL_DUMP_DIR is not set")
          .remedy("pass a file path, or set VIGIL_DUMP_DIR to a writable directory")
          .raise();
    }
    target = FlightRecorder::dumpPath(dumpDir_, name_, rank_);
  }
  std::string problem = recorder_.writeJson(target, rank_, nranks_, name_, reason);
  if (!problem.empty()) error(Errc::CommDumpFailed).op("vigilCommDumpFlightRecorder").cause(problem).raise();
}

void Communicator::dumpAfterFailure(const Error& e) {
  const char* reason = e.result() == vigilTimeout    ? "timeout"
                       : e.result() == vigilMismatch ? "mismatch"
                       : e.result() == vigilAborted  ? "abort"
                       // A peer died, left or reported an error: this rank's story is part of the picture.
                       : e.result() == vigilRemoteError ? "peer"
                                                        : nullptr;
  if (reason == nullptr || dumpDir_.empty() || dumped_.exchange(true)) return;
  try {
    dumpFlightRecorder({}, reason);
    VIGIL_LOG_AT(LogLevel::Warn, rank_, "flight recorder written to ", FlightRecorder::dumpPath(dumpDir_, name_, rank_),
                 " (", reason, ")");
  } catch (const Error& failure) {
    VIGIL_LOG_AT(LogLevel::Warn, rank_, failure.text());
  }
}

}  // namespace vigil
