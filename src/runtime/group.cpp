#include "runtime/group.hpp"

#include <optional>
#include <vector>

#include "comm/communicator.hpp"

namespace vigil::group {
namespace {

struct Pending {
  std::shared_ptr<Communicator> comm;
  OpDesc op;
};

struct GroupState {
  int depth = 0;
  std::vector<Pending> ops;
};

thread_local GroupState state;

}  // namespace

bool active() {
  return state.depth > 0;
}

void start() {
  ++state.depth;
}

void add(std::shared_ptr<Communicator> comm, const OpDesc& op) {
  comm->validate(op);  // a bad argument fails at its own call, not at GroupEnd
  state.ops.push_back({std::move(comm), op});
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

  // Per communicator, in order of first use; within one, issue order.
  std::vector<Communicator*> order;
  for (const Pending& p : ops) {
    bool seen = false;
    for (Communicator* c : order) seen |= c == p.comm.get();
    if (!seen) order.push_back(p.comm.get());
  }
  std::optional<Error> first;
  for (Communicator* comm : order) {
    std::vector<OpDesc> p2p;
    auto flush = [&] {
      if (p2p.empty()) return;
      try {
        comm->runPointToPoint(p2p);
      } catch (const Error& e) {
        if (!first) first = e;
      }
      p2p.clear();
    };
    for (const Pending& p : ops) {
      if (p.comm.get() != comm) continue;
      if (isPointToPoint(p.op.kind)) {
        p2p.push_back(p.op);
        continue;
      }
      flush();
      try {
        comm->run(p.op);
      } catch (const Error& e) {
        if (!first) first = e;
      }
    }
    flush();
  }
  if (first) throw *first;
}

}  // namespace vigil::group
