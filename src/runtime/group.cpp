#include "runtime/group.hpp"

#include <algorithm>
#include <optional>
#include <vector>

#include "comm/communicator.hpp"
#include "runtime/stream.hpp"

namespace vigil::group {
namespace {

struct Pending {
  std::shared_ptr<Communicator> comm;
  OwnedOpDesc op;
  uint64_t record;  // flight-recorder entry (and buffer-guard digest) taken at the call
};

struct GroupState {
  int depth = 0;
  std::vector<Pending> ops;
  std::shared_ptr<Stream> stream;
  bool mixedStreams = false;
};

thread_local GroupState state;

// One communicator after the other, in the order of their names, which all
// ranks of a communicator share: every rank then serves the communicators
// of a group in the same order, whatever order the ops were issued in (a
// send on A and a receive on B on one rank, the reverse on another).
// Within one communicator, issue order.
void runBatch(const std::vector<Pending>& ops) {
  std::vector<Communicator*> order;
  for (const Pending& p : ops) {
    bool seen = false;
    for (Communicator* c : order) seen |= c == p.comm.get();
    if (!seen) order.push_back(p.comm.get());
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const Communicator* a, const Communicator* b) { return a->name() < b->name(); });
  std::optional<Error> first;
  for (Communicator* comm : order) {
    std::vector<OpDesc> p2p;
    std::vector<uint64_t> records;
    auto flush = [&] {
      if (p2p.empty()) return;
      try {
        comm->runPointToPoint(p2p, records);
      } catch (const Error& e) {
        if (!first) first = e;
      }
      p2p.clear();
      records.clear();
    };
    for (const Pending& p : ops) {
      if (p.comm.get() != comm) continue;
      if (isPointToPoint(p.op.get().kind)) {
        p2p.push_back(p.op.get());
        records.push_back(p.record);
        continue;
      }
      flush();
      try {
        comm->run(p.op.get(), p.record);
      } catch (const Error& e) {
        if (!first) first = e;
      }
    }
    flush();
  }
  if (first) throw *first;
}

}  // namespace

bool active() {
  return state.depth > 0;
}

void start() {
  ++state.depth;
}

void add(std::shared_ptr<Communicator> comm, const OpDesc& op, std::shared_ptr<Stream> stream) {
  comm->validate(op);
  if (state.ops.empty()) {
    state.stream = stream;
  } else if (state.stream != stream) {
    state.mixedStreams = true;
  }
  const int nranks = comm->nranks();
  const uint64_t record = comm->recordEnqueued(op, stream ? stream->name() : "group");
  state.ops.push_back({std::move(comm), OwnedOpDesc(op, nranks), record});
}

void end() {
  if (state.depth == 0) {
    ErrorBuilder(Errc::ApiGroupMisuse)
        .op("vigilGroupEnd")
        .cause("vigilGroupEnd without a matching vigilGroupStart")
        .raise();
  }
  if (--state.depth > 0) return;
  std::vector<Pending> ops;
  ops.swap(state.ops);
  std::shared_ptr<Stream> stream = std::move(state.stream);
  const bool mixed = std::exchange(state.mixedStreams, false);
  if (mixed) {
    ErrorBuilder(Errc::ApiGroupMisuse)
        .op("vigilGroupEnd")
        .cause("the operations of one group were issued on different streams; nothing was run")
        .remedy("issue every operation of a group on the same stream")
        .raise();
  }
  if (!stream) {
    runBatch(ops);
    return;
  }
  auto batch = std::make_shared<std::vector<Pending>>(std::move(ops));
  stream->enqueue([batch] {
    try {
      runBatch(*batch);
    } catch (const Error& e) {
      for (Pending& p : *batch) p.comm->keepAsyncError(e);
      throw;
    }
  });
}

}  // namespace vigil::group
