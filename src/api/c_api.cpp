// The C API: check the arguments that need no communicator, describe the
// call as an OpDesc, hand it to the communicator (or the open group), and
// map exceptions to result codes. Nothing else lives here.

#include <algorithm>
#include <cstring>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "api/handles.hpp"
#include "api/submit.hpp"
#include "bootstrap/launch_env.hpp"
#include "comm/registry.hpp"
#include "core/dtype.hpp"
#include "runtime/group.hpp"
#include "runtime/stream.hpp"
#include "symm/heap.hpp"
#include "vigil/vigil.h"

using namespace vigil;

namespace {

// The communicators of this thread's open group: a failed vigilGroupEnd is
// also the last error of each of them (vigilGetLastError(comm) after it).
thread_local std::vector<vigilComm_t> groupComms;

vigilResult_t initComm(int nranks, const RootInfo& root, int rank, const vigilConfig* config, vigilComm_t* comm) {
  CommConfig resolved = CommConfig::resolve(config, processConfig());
  if (resolved.groupRanksGiven != nullptr && nranks > 0) {
    resolved.groupRanks.assign(resolved.groupRanksGiven, resolved.groupRanksGiven + nranks);
    for (int r = 0; r < nranks; ++r) {
      if (resolved.groupRanks[static_cast<size_t>(r)] < 0) {
        ErrorBuilder(Errc::ApiBadConfig)
            .cause("vigilConfig.groupRanks[", r, "] = ", resolved.groupRanks[static_cast<size_t>(r)], " is not valid")
            .remedy("give each rank's rank in the group, >= 0")
            .raise();
      }
    }
  }
  resolved.groupRanksGiven = nullptr;
  *comm = api::makeHandle(Communicator::create(nranks, root, rank, resolved));
  return vigilSuccess;
}

}  // namespace

namespace vigil::api {

vigilResult_t submit(vigilComm_t comm, vigilStream_t stream, const OpDesc& given) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    std::shared_ptr<Stream> s = api::streamOf(stream);
    OpDesc resolved;  // a call naming an operator of vigilRedOpCreatePreMulSum
    const OpDesc& op = given.hasRedOp() && createdRedOp(given.redop) ? (resolved = c->resolveRedOp(given)) : given;
    if (group::active() && op.tagged && op.peer == VIGIL_ANY_SOURCE) {
      c->validate(op);
      c->error(Errc::ApiBadTag)
          .op(opName(op.kind))
          .cause(
              "a receive from VIGIL_ANY_SOURCE inside a group: the batch's other transfers could not progress "
              "while it waits for whichever peer sends first")
          .raise();
    }
    if (!group::active() && isPointToPoint(op.kind) && op.peer == c->rank() && !op.tagged) {
      c->validate(op);
      c->error(Errc::ApiSelfUnpaired)
          .op(opName(op.kind))
          .cause(op.kind == OpKind::Send ? "a send to" : "a receive from", " this rank itself (", op.peer,
                 ") outside a group: it has no counterpart to complete with")
          .raise();
    }
    if (group::active()) {
      group::add(std::move(c), op, std::move(s));
      if (std::find(groupComms.begin(), groupComms.end(), comm) == groupComms.end()) groupComms.push_back(comm);
    } else if (!s) {
      c->run(op);
    } else {
      // Checked now, run later: a bad argument or a broken communicator is
      // reported by this call; what happens on the wire, at synchronize.
      c->validate(op);
      c->checkUsable();
      const uint64_t record = c->recordEnqueued(op, s->name());
      s->enqueue([c, owned = OwnedOpDesc(op, c->nranks()), record] {
        try {
          c->run(owned.get(), record);
        } catch (const Error& e) {
          c->keepAsyncError(e);
          throw;
        }
      });
    }
  });
}

}  // namespace vigil::api

extern "C" {

vigilResult_t vigilGetVersion(int* version) {
  return api::guarded(nullptr, [&] {
    if (version == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilGetVersion").cause("version is NULL").raise();
    *version = VIGIL_VERSION_CODE;
  });
}

const char* vigilGetErrorString(vigilResult_t result) {
  switch (result) {
    case vigilSuccess: return "success";
    case vigilInvalidArgument: return "invalid argument";
    case vigilInvalidUsage: return "invalid usage";
    case vigilSystemError: return "system error";
    case vigilInternalError: return "internal error";
    case vigilRemoteError: return "remote error (a peer died, left or failed)";
    case vigilTimeout: return "timeout";
    case vigilMismatch: return "mismatch between ranks";
    case vigilAborted: return "aborted";
    case vigilInProgress: return "in progress";
    case vigilNumericError: return "numeric error (NaN/Inf)";
  }
  return "unknown result code";
}

const char* vigilGetLastError(vigilComm_t comm) {
  const Error* error = api::lastError(comm);
  return error != nullptr ? error->text().c_str() : "";
}

vigilResult_t vigilGetLastErrorInfo(vigilComm_t comm, vigilErrorInfo* info) {
  // Checked before the last error is read: a refusal replaces it.
  const vigilResult_t refused = api::guarded(comm, [&] {
    if (info == nullptr) {
      ErrorBuilder(Errc::ApiNullArgument).op("vigilGetLastErrorInfo").cause("info is NULL").raise();
    }
    if (info->structSize < sizeof(vigilErrorInfo)) {
      ErrorBuilder(Errc::ApiBadStructSize)
          .op("vigilGetLastErrorInfo")
          .cause("info->structSize is ", info->structSize, "; this version of vigilErrorInfo has ",
                 sizeof(vigilErrorInfo), " bytes")
          .remedy("set structSize to sizeof(vigilErrorInfo) (initialise the struct with VIGIL_ERROR_INFO_INIT)")
          .raise();
    }
  });
  if (refused != vigilSuccess) return refused;
  // Fields beyond this version's struct (a caller built with a newer vigil.h)
  // are left as the caller set them.
  const Error* error = api::lastError(comm);
  info->result = error != nullptr ? error->result() : vigilSuccess;
  info->id = error != nullptr ? error->id() : "";
  info->rank = error != nullptr ? error->rank() : -1;
  info->nranks = error != nullptr ? error->nranks() : -1;
  info->commName = error != nullptr ? error->comm().c_str() : "";
  info->op = error != nullptr ? error->op().c_str() : "";
  info->seq = error != nullptr ? error->seq() : -1;
  info->peer = error != nullptr ? error->peer() : -1;
  info->cause = error != nullptr ? error->cause().c_str() : "";
  info->remedy = error != nullptr ? error->remedy().c_str() : "";
  info->text = error != nullptr ? error->text().c_str() : "";
  return vigilSuccess;
}

vigilResult_t vigilGetRootInfo(vigilRootInfo* info) {
  return api::guarded(nullptr, [&] {
    if (info == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilGetRootInfo").cause("info is NULL").raise();
    installExitHandler();
    createRoot(processConfig()).encode(info);
  });
}

vigilResult_t vigilRootInfoToString(const vigilRootInfo* info, char* out, size_t outBytes) {
  return api::guarded(nullptr, [&] {
    if (info == nullptr || out == nullptr) {
      ErrorBuilder(Errc::ApiNullArgument).op("vigilRootInfoToString").cause(info ? "out" : "info", " is NULL").raise();
    }
    if (outBytes < 2 * VIGIL_ROOT_INFO_BYTES + 1) {
      ErrorBuilder(Errc::ApiCountOverflow)
          .op("vigilRootInfoToString")
          .cause("outBytes is ", outBytes, "; the text needs ", 2 * VIGIL_ROOT_INFO_BYTES + 1)
          .remedy("pass a buffer of at least 2*VIGIL_ROOT_INFO_BYTES+1 bytes")
          .raise();
    }
    std::string hex = rootInfoToHex(*info);
    std::memcpy(out, hex.c_str(), hex.size() + 1);
  });
}

vigilResult_t vigilRootInfoFromString(const char* text, vigilRootInfo* info) {
  return api::guarded(nullptr, [&] {
    if (text == nullptr || info == nullptr) {
      ErrorBuilder(Errc::ApiNullArgument)
          .op("vigilRootInfoFromString")
          .cause(text ? "info" : "text", " is NULL")
          .raise();
    }
    *info = rootInfoFromHex(text);
  });
}

vigilResult_t vigilCommInitRootInfo(int nranks, const vigilRootInfo* info, int rank, vigilComm_t* comm) {
  return vigilCommInitRootInfoConfig(nranks, info, rank, nullptr, comm);
}

vigilResult_t vigilCommInitRootInfoConfig(int nranks, const vigilRootInfo* info, int rank, const vigilConfig* config,
                                          vigilComm_t* comm) {
  return api::guarded(nullptr, [&] {
    if (info == nullptr || comm == nullptr) {
      ErrorBuilder(Errc::ApiNullArgument).op("init").cause(info ? "comm" : "info", " is NULL").raise();
    }
    *comm = nullptr;
    initComm(nranks, RootInfo::decode(*info), rank, config, comm);
  });
}

vigilResult_t vigilCommInitAll(vigilComm_t* comms, int n) {
  return api::guarded(nullptr, [&] {
    if (comms == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilCommInitAll").cause("comms is NULL").raise();
    if (n < 1)
      ErrorBuilder(Errc::ApiBadRank).op("vigilCommInitAll").cause("n is ", n, "; it must be at least 1").raise();
    std::fill(comms, comms + n, nullptr);
    installExitHandler();
    const RootInfo root = createRoot(processConfig());
    // Init is collective: each rank waits for the others, so each needs a thread of its own.
    std::vector<std::exception_ptr> failed(static_cast<size_t>(n));
    const auto initOne = [&](int rank) {
      try {
        initComm(n, root, rank, nullptr, &comms[rank]);
      } catch (...) {
        failed[static_cast<size_t>(rank)] = std::current_exception();
      }
    };
    std::vector<std::thread> others;
    others.reserve(static_cast<size_t>(n - 1));
    for (int rank = 1; rank < n; ++rank) others.emplace_back(initOne, rank);
    initOne(0);
    for (std::thread& t : others) t.join();
    const auto first = std::find_if(failed.begin(), failed.end(), [](const std::exception_ptr& e) { return e; });
    if (first == failed.end()) return;
    for (int rank = 0; rank < n; ++rank) {
      if (comms[rank] != nullptr) vigilCommDestroy(comms[rank]);
      comms[rank] = nullptr;
    }
    std::rethrow_exception(*first);
  });
}

vigilResult_t vigilCommInitFromEnv(vigilComm_t* comm) {
  return api::guarded(nullptr, [&] {
    if (comm == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("init").cause("comm is NULL").raise();
    *comm = nullptr;
    LaunchEnv env = resolveLaunchEnv([](const char* var) { return std::getenv(var); });
    installExitHandler();
    if (env.hostsRoot) hostRootAt(env, processConfig());
    initComm(env.nranks, env.root, env.rank, nullptr, comm);
  });
}

vigilResult_t vigilCommSplit(vigilComm_t comm, int color, int key, vigilComm_t* newcomm) {
  return api::guarded(comm, [&] {
    if (newcomm == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilCommSplit").cause("newcomm is NULL").raise();
    *newcomm = nullptr;
    std::shared_ptr<Communicator> parent = api::acquire(comm);
    if (group::active()) {
      parent->error(Errc::ApiSplitInGroup)
          .op("vigilCommSplit")
          .cause("vigilCommSplit(color ", color, ", key ", key, ") was called inside vigilGroupStart/vigilGroupEnd")
          .raise();
    }
    std::shared_ptr<Communicator> child = parent->split(color, key);
    if (child) *newcomm = api::makeHandle(std::move(child));
  });
}

vigilResult_t vigilCommCount(vigilComm_t comm, int* count) {
  return api::guarded(comm, [&] {
    if (count == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilCommCount").cause("count is NULL").raise();
    *count = api::acquire(comm)->nranks();
  });
}

vigilResult_t vigilCommUserRank(vigilComm_t comm, int* rank) {
  return api::guarded(comm, [&] {
    if (rank == nullptr) ErrorBuilder(Errc::ApiNullArgument).op("vigilCommUserRank").cause("rank is NULL").raise();
    *rank = api::acquire(comm)->rank();
  });
}

vigilResult_t vigilCommGetAsyncError(vigilComm_t comm, vigilResult_t* asyncError) {
  return api::guarded(comm, [&] {
    if (asyncError == nullptr) {
      ErrorBuilder(Errc::ApiNullArgument).op("vigilCommGetAsyncError").cause("asyncError is NULL").raise();
    }
    std::optional<Error> error = api::acquire(comm)->asyncError();
    *asyncError = error ? error->result() : vigilSuccess;
    if (error) api::setLastError(comm, *error);
  });
}

vigilResult_t vigilCommDumpFlightRecorder(vigilComm_t comm, const char* path) {
  return api::guarded(comm, [&] { api::acquire(comm)->dumpFlightRecorder(path ? path : "", "request"); });
}

vigilResult_t vigilCommFinalize(vigilComm_t comm) {
  return api::guarded(comm, [&] { api::acquire(comm)->finalize(); });
}

vigilResult_t vigilCommDestroy(vigilComm_t comm) {
  return api::guarded(comm, [&] {
    if (std::shared_ptr<Communicator> c = api::retire(comm)) c->destroy();
  });
}

vigilResult_t vigilProcessExiting(const char* uncaughtError) {
  return api::guarded(nullptr, [&] { destroyAllForExit(uncaughtError != nullptr ? uncaughtError : ""); });
}

vigilResult_t vigilCommAbort(vigilComm_t comm) {
  return vigilCommAbortWithReason(comm, nullptr);
}

namespace {

// An aborted communicator with a symmetric heap stays in memory until the
// process exits, its heap mapped: threads of the program may still load and
// store through peer pointers (a compute kernel that overlaps the
// communication, a Python array over the heap) when another thread aborts,
// and must not fault. Its threads and connections are gone; only the memory
// stays. Never destroyed: exit reclaims it.
void keepHeapMapped(std::shared_ptr<Communicator> c) {
  static std::mutex mutex;
  static auto* kept = new std::vector<std::shared_ptr<Communicator>>();
  std::lock_guard lock(mutex);
  kept->push_back(std::move(c));
}

}  // namespace

vigilResult_t vigilCommAbortWithReason(vigilComm_t comm, const char* reason) {
  constexpr size_t kMaxReasonBytes = 200;
  return api::guarded(comm, [&] {
    const std::string why = reason != nullptr ? std::string(reason).substr(0, kMaxReasonBytes) : std::string();
    if (std::shared_ptr<Communicator> c = api::retire(comm)) {
      c->abort(why);
      if (SymmetricHeap::of(*c, /*create=*/false) != nullptr) keepHeapMapped(std::move(c));
    }
  });
}

// ---- Collectives and point-to-point ----------------------------------------

vigilResult_t vigilAllReduce(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype,
                             vigilRedOp_t op, vigilComm_t comm, vigilStream_t stream) {
  OpDesc d{OpKind::AllReduce, sendbuff, recvbuff, count, datatype, op};
  return api::submit(comm, stream, d);
}

vigilResult_t vigilBroadcast(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype, int root,
                             vigilComm_t comm, vigilStream_t stream) {
  OpDesc d{OpKind::Broadcast, sendbuff, recvbuff, count, datatype};
  d.root = root;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilBcast(void* buff, size_t count, vigilDataType_t datatype, int root, vigilComm_t comm,
                         vigilStream_t stream) {
  return vigilBroadcast(buff, buff, count, datatype, root, comm, stream);
}

vigilResult_t vigilReduce(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype, vigilRedOp_t op,
                          int root, vigilComm_t comm, vigilStream_t stream) {
  OpDesc d{OpKind::Reduce, sendbuff, recvbuff, count, datatype, op};
  d.root = root;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, vigilDataType_t datatype,
                             vigilComm_t comm, vigilStream_t stream) {
  return api::submit(
      comm, stream,
      OpDesc{.kind = OpKind::AllGather, .send = sendbuff, .recv = recvbuff, .count = sendcount, .dtype = datatype});
}

vigilResult_t vigilReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, vigilDataType_t datatype,
                                 vigilRedOp_t op, vigilComm_t comm, vigilStream_t stream) {
  return api::submit(comm, stream,
                     OpDesc{.kind = OpKind::ReduceScatter,
                            .send = sendbuff,
                            .recv = recvbuff,
                            .count = recvcount,
                            .dtype = datatype,
                            .redop = op});
}

vigilResult_t vigilAllToAll(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype,
                            vigilComm_t comm, vigilStream_t stream) {
  return api::submit(
      comm, stream,
      OpDesc{.kind = OpKind::AllToAll, .send = sendbuff, .recv = recvbuff, .count = count, .dtype = datatype});
}

vigilResult_t vigilAllToAllV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls, void* recvbuff,
                             const size_t* recvcounts, const size_t* rdispls, vigilDataType_t datatype,
                             vigilComm_t comm, vigilStream_t stream) {
  OpDesc d{OpKind::AllToAllV, sendbuff, recvbuff, 0, datatype};
  d.sendcounts = sendcounts;
  d.sdispls = sdispls;
  d.recvcounts = recvcounts;
  d.rdispls = rdispls;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilGather(const void* sendbuff, void* recvbuff, size_t sendcount, vigilDataType_t datatype, int root,
                          vigilComm_t comm, vigilStream_t stream) {
  OpDesc d{OpKind::Gather, sendbuff, recvbuff, sendcount, datatype};
  d.root = root;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilScatter(const void* sendbuff, void* recvbuff, size_t recvcount, vigilDataType_t datatype, int root,
                           vigilComm_t comm, vigilStream_t stream) {
  OpDesc d{OpKind::Scatter, sendbuff, recvbuff, recvcount, datatype};
  d.root = root;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilBarrier(vigilComm_t comm, vigilStream_t stream) {
  return api::submit(comm, stream, OpDesc{.kind = OpKind::Barrier});
}

vigilResult_t vigilSend(const void* sendbuff, size_t count, vigilDataType_t datatype, int peer, vigilComm_t comm,
                        vigilStream_t stream) {
  OpDesc d{OpKind::Send, sendbuff, nullptr, count, datatype};
  d.peer = peer;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilRecv(void* recvbuff, size_t count, vigilDataType_t datatype, int peer, vigilComm_t comm,
                        vigilStream_t stream) {
  OpDesc d{OpKind::Recv, nullptr, recvbuff, count, datatype};
  d.peer = peer;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilSendTag(const void* sendbuff, size_t count, vigilDataType_t datatype, int peer, int tag,
                           vigilComm_t comm, vigilStream_t stream) {
  OpDesc d{OpKind::Send, sendbuff, nullptr, count, datatype};
  d.peer = peer;
  d.tagged = true;
  d.tag = tag;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilRecvTag(void* recvbuff, size_t count, vigilDataType_t datatype, int peer, int tag, vigilComm_t comm,
                           vigilStatus* status, vigilStream_t stream) {
  OpDesc d{OpKind::Recv, nullptr, recvbuff, count, datatype};
  d.peer = peer;
  d.tagged = true;
  d.tag = tag;
  d.status = status;
  return api::submit(comm, stream, d);
}

vigilResult_t vigilProbe(int peer, int tag, vigilComm_t comm, vigilStatus* status) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    if (status == nullptr) c->error(Errc::ApiNullArgument).op("probe").cause("status is NULL").raise();
    c->probe(peer, tag, /*wait=*/true, status);
  });
}

vigilResult_t vigilIprobe(int peer, int tag, vigilComm_t comm, int* flag, vigilStatus* status) {
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    if (flag == nullptr) c->error(Errc::ApiNullArgument).op("iprobe").cause("flag is NULL").raise();
    *flag = c->probe(peer, tag, /*wait=*/false, status) ? 1 : 0;
  });
}

vigilResult_t vigilSendRecv(const void* sendbuff, size_t sendcount, vigilDataType_t sendtype, int dest, int sendtag,
                            void* recvbuff, size_t recvcount, vigilDataType_t recvtype, int source, int recvtag,
                            vigilComm_t comm, vigilStatus* status, vigilStream_t stream) {
  OpDesc ops[2] = {{OpKind::Send, sendbuff, nullptr, sendcount, sendtype},
                   {OpKind::Recv, nullptr, recvbuff, recvcount, recvtype}};
  ops[0].peer = dest;
  ops[0].tag = sendtag;
  ops[1].peer = source;
  ops[1].tag = recvtag;
  ops[1].status = status;
  for (OpDesc& op : ops) op.tagged = true;
  return api::guarded(comm, [&] {
    std::shared_ptr<Communicator> c = api::acquire(comm);
    std::shared_ptr<Stream> s = api::streamOf(stream);
    for (const OpDesc& op : ops) c->validate(op);
    // From any source: as two requests (the send progresses while the receive waits for the first sender).
    const bool anySource = source == VIGIL_ANY_SOURCE;
    if (anySource && group::active()) {
      c->error(Errc::ApiBadTag)
          .op("sendrecv")
          .cause(
              "source VIGIL_ANY_SOURCE inside a group: the group's sends could not progress while the receive "
              "waits for whichever peer sends first")
          .remedy("name the source, or call vigilSendRecv from VIGIL_ANY_SOURCE outside the group")
          .raise();
    }
    if (group::active()) {
      for (const OpDesc& op : ops) group::add(c, op, s);
      if (std::find(groupComms.begin(), groupComms.end(), comm) == groupComms.end()) groupComms.push_back(comm);
    } else if (!s) {
      anySource ? c->sendRecvAnySource(ops[0], ops[1]) : c->runPointToPoint(ops);
    } else {
      c->checkUsable();
      uint64_t records[2] = {};
      if (!anySource)
        records[0] = c->recordEnqueued(ops[0], s->name()), records[1] = c->recordEnqueued(ops[1], s->name());
      s->enqueue([c, send = OwnedOpDesc(ops[0], 1), recv = OwnedOpDesc(ops[1], 1), records, anySource] {
        const OpDesc batch[2] = {send.get(), recv.get()};
        try {
          if (anySource) {
            c->sendRecvAnySource(batch[0], batch[1]);
            return;
          }
          c->runPointToPoint(batch, records);
        } catch (const Error& e) {
          c->keepAsyncError(e);
          throw;
        }
      });
    }
  });
}

vigilResult_t vigilGroupStart(void) {
  return api::guarded(nullptr, [] { group::start(); });
}

vigilResult_t vigilGroupEnd(void) {
  const vigilResult_t rc = api::guarded(nullptr, [] { group::end(); });
  if (group::active()) return rc;  // an inner end: the group is still open
  const std::vector<vigilComm_t> comms = std::exchange(groupComms, {});
  if (rc != vigilSuccess) {
    if (const Error* error = api::lastError(nullptr)) {
      const Error failed = *error;
      for (vigilComm_t c : comms) api::setLastError(c, failed);
    }
  }
  return rc;
}

}  // extern "C"
