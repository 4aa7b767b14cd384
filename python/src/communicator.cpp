// vigil.Communicator's lifecycle (init, split, finalize, close, abort),
// vigil.Work (async operations on the communicator's stream) and vigil.group().

#include "communicator.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>

namespace py = pybind11;

namespace vigil::python {
namespace {

// The thread's open group: its depth, and where the outermost group keeps
// the arrays of the operations issued inside it.
struct GroupState {
  int depth = 0;
  std::vector<py::object>* keep = nullptr;
  std::vector<std::weak_ptr<Comm>>* comms = nullptr;
};
thread_local GroupState groupState;

int milliseconds(const py::object& seconds, const char* name) {
  if (seconds.is_none()) return -1;
  double value = 0;
  try {
    py::object total = py::hasattr(seconds, "total_seconds") ? seconds.attr("total_seconds")() : seconds;
    value = py::float_(total).cast<double>();
  } catch (py::error_already_set&) {
    value = std::nan("");
  }
  if (!(value > 0) || value * 1000.0 > static_cast<double>(INT_MAX)) {
    refuse("VG-API-012", Where{-1, 0, "init"},
           std::string(name) + "=" + std::string(py::repr(seconds)) + " is not a positive number of seconds",
           std::string("pass ") + name +
               " as seconds > 0 (a float or a datetime.timedelta), or None for the "
               "environment's value");
  }
  return static_cast<int>(std::ceil(value * 1000.0));
}

int flag(const py::object& value) {
  return value.is_none() ? -1 : (py::bool_(value) ? 1 : 0);
}

}  // namespace

// ---- StreamOwner, Work ------------------------------------------------------

StreamOwner::StreamOwner() {
  check(vigilStreamCreate(&stream_), nullptr);
}

StreamOwner::~StreamOwner() {
  if (stream_ != nullptr) vigilStreamDestroy(stream_);  // the worker drains and joins with the last holder
}

Work::Work(vigilEvent_t event, std::vector<py::object> keep, py::object result, Where where, std::weak_ptr<Comm> owner,
           vigilComm_t comm)
    : event_(event),
      keep_(std::move(keep)),
      result_(std::move(result)),
      where_(std::move(where)),
      owner_(std::move(owner)),
      comm_(comm) {}

Work::Work(vigilRequest_t request, vigilStatus* status, std::vector<py::object> keep, py::object result, Where where,
           std::weak_ptr<Comm> owner, vigilComm_t comm)
    : request_(request),
      status_(status),
      keep_(std::move(keep)),
      result_(std::move(result)),
      where_(std::move(where)),
      owner_(std::move(owner)),
      comm_(comm) {}

Work::~Work() {
  if (event_ != nullptr) vigilEventDestroy(event_);
  // Only the handle: a pending request still completes (its communicator kept this Work until it closed).
  if (request_ != VIGIL_REQUEST_NULL) vigilRequestFree(&request_);
}

py::object Work::wait() {
  InterruptibleCall watch({comm_});
  vigilResult_t rc = vigilSuccess;
  {
    py::gil_scoped_release nogil;
    if (event_ != nullptr) {
      rc = vigilEventSynchronize(event_);
    } else if (request_ != VIGIL_REQUEST_NULL) {
      rc = vigilWait(&request_, status_);
    }
  }
  if (watch.interrupted()) {
    const CallError failure = interruptedCallError(rc, nullptr);
    if (std::shared_ptr<Comm> owner = owner_.lock()) owner->forgetAborted();
    watch.raiseInterrupted(where_, failure);
  }
  check(rc, event_ != nullptr ? nullptr : comm_);
  return result_;
}

bool Work::isCompleted() {
  if (event_ == nullptr) {
    if (request_ == VIGIL_REQUEST_NULL) return true;
    int flag = 0;
    vigilResult_t rc;
    {
      py::gil_scoped_release nogil;
      rc = vigilTest(&request_, &flag, status_);
    }
    check(rc, comm_);
    return flag != 0;
  }
  const vigilResult_t rc = vigilEventQuery(event_);
  if (rc == vigilInProgress) return false;
  check(rc, nullptr);
  return true;
}

bool Work::reached() const {
  if (event_ == nullptr) return request_ == VIGIL_REQUEST_NULL;
  return vigilEventQuery(event_) != vigilInProgress;
}

// ---- Comm -------------------------------------------------------------------

Comm::Comm(vigilComm_t comm, std::string name) : comm_(comm), name_(std::move(name)) {
  check(vigilCommUserRank(comm_, &rank_), comm_);
  check(vigilCommCount(comm_, &size_), comm_);
}

Comm::~Comm() {
  try {
    close();
  } catch (const CallError&) {
    // A destructor cannot raise; close() raises for a caller that asks.
  }
  if (vigilComm_t later = std::exchange(closedLater_, nullptr)) {
    py::gil_scoped_release nogil;
    vigilCommDestroy(later);  // the last symmetric array over it went
  }
}

std::shared_ptr<Comm> Comm::fromRootInfo(const std::string& rootInfo, int rank, int worldSize,
                                         const InitOptions& options) {
  vigilRootInfo info{};
  check(vigilRootInfoFromString(rootInfo.c_str(), &info), nullptr);
  vigilConfig config = VIGIL_CONFIG_INIT;
  config.timeoutMs = milliseconds(options.timeout, "timeout");
  config.connectTimeoutMs = milliseconds(options.connectTimeout, "connect_timeout");
  config.fingerprint = flag(options.fingerprint);
  config.nanCheck = flag(options.nanCheck);
  config.bufferGuard = flag(options.bufferGuard);
  const std::string name = options.name.is_none() ? std::string() : py::str(options.name).cast<std::string>();
  if (!name.empty()) config.commName = name.c_str();
  vigilComm_t comm = nullptr;
  vigilResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = vigilCommInitRootInfoConfig(worldSize, &info, rank, &config, &comm);
  }
  check(rc, nullptr);
  return std::make_shared<Comm>(comm, name);
}

std::shared_ptr<Comm> Comm::fromEnv() {
  vigilComm_t comm = nullptr;
  vigilResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = vigilCommInitFromEnv(&comm);
  }
  check(rc, nullptr);
  return std::make_shared<Comm>(comm, std::string());
}

std::shared_ptr<Comm> Comm::initOrAlone() {
  vigilComm_t comm = nullptr;
  vigilResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = vigilCommInitFromEnv(&comm);
  }
  if (rc != vigilSuccess) {
    vigilErrorInfo info = VIGIL_ERROR_INFO_INIT;
    const bool noLauncher =
        vigilGetLastErrorInfo(nullptr, &info) == vigilSuccess && std::string(info.id) == "VG-BOOT-009";
    if (!noLauncher) check(rc, nullptr);
    vigilRootInfo root;
    py::gil_scoped_release nogil;
    rc = vigilGetRootInfo(&root);
    if (rc == vigilSuccess) rc = vigilCommInitRootInfo(1, &root, 0, &comm);
  }
  check(rc, nullptr);
  return std::make_shared<Comm>(comm, std::string());
}

vigilComm_t Comm::handle(const std::string& op) const {
  if (comm_ == nullptr) {
    refuse("VG-API-007", where(op), "this Communicator was closed or aborted",
           "do not use a communicator after close(), abort() or the end of its with-block; create a new one");
  }
  return comm_;
}

py::object Comm::issue(const std::string& op, bool asyncOp, std::vector<py::object> keep, py::object result,
                       const OpCall& call) {
  vigilComm_t comm = handle(op);
  vigilResult_t rc = vigilSuccess;
  if (!asyncOp || groupOpen()) {
    if (asyncOp) {
      refuse("VG-PY-002", where(op), "async_op=True inside vigil.group()",
             "issue the operations of a group without async_op; the group runs them as one batch when it ends");
    }
    drain(op);
    rc = interruptible(op, [&] { return call(comm, nullptr); });
    check(rc, comm);
    if (groupOpen()) {
      // Queued, not run: the batch runs at the end of the outermost group.
      keep.push_back(result);
      if (groupState.keep != nullptr) {
        for (py::object& array : keep) groupState.keep->push_back(std::move(array));
        groupState.comms->push_back(weak_from_this());
      }
    }
    return result;
  }
  prune();
  if (!stream_) stream_ = std::make_shared<StreamOwner>();
  std::shared_ptr<StreamOwner> stream = stream_;
  vigilEvent_t event = nullptr;
  check(vigilEventCreate(&event), nullptr);
  // The Work owns the event from here.
  auto work = std::make_shared<Work>(event, std::move(keep), result, where(op), weak_from_this(), comm);
  vigilResult_t recorded = vigilSuccess;
  {
    py::gil_scoped_release nogil;
    rc = call(comm, stream->get());
    if (rc == vigilSuccess) recorded = vigilEventRecord(event, stream->get());
  }
  check(rc, comm);
  check(recorded, nullptr);
  pending_.push_back(work);
  return py::cast(work);
}

py::object Comm::issueRequest(const std::string& op, std::vector<py::object> keep, py::object result,
                              vigilStatus* status,
                              const std::function<vigilResult_t(vigilComm_t, vigilRequest_t*)>& post) {
  vigilComm_t comm = handle(op);
  drain(op);  // after the stream's operations, as a blocking call would be
  std::erase_if(requests_, [](const std::shared_ptr<Work>& work) { return work->reached(); });
  vigilRequest_t request = VIGIL_REQUEST_NULL;
  check(post(comm, &request), comm);
  auto work = std::make_shared<Work>(request, status, std::move(keep), result, where(op), weak_from_this(), comm);
  requests_.push_back(work);
  return py::cast(work);
}

void Comm::drain(const std::string& op) {
  if (pending_.empty()) return;
  std::shared_ptr<StreamOwner> stream = stream_;
  // A failure is the Work's to raise, and broke the communicator anyway.
  interruptible(op, [&] { return vigilStreamSynchronize(stream->get()); });
  prune();
}

void Comm::forgetAborted() {
  if (std::exchange(comm_, nullptr) == nullptr) return;
  std::shared_ptr<StreamOwner> stream = std::move(stream_);
  if (stream) {
    py::gil_scoped_release nogil;
    vigilStreamSynchronize(stream->get());  // its operations fail at once now
  }
  pending_.clear();
  requests_.clear();  // only their handles: the communicator is gone
}

void Comm::prune() {
  std::erase_if(pending_, [](const std::shared_ptr<Work>& work) { return work->reached(); });
}

std::shared_ptr<Comm> Comm::split(int color, int key) {
  vigilComm_t comm = handle("split");
  drain("split");
  vigilComm_t child = nullptr;
  const vigilResult_t rc = interruptible("split", [&] { return vigilCommSplit(comm, color, key, &child); });
  check(rc, comm);
  if (child == nullptr) return nullptr;
  return std::make_shared<Comm>(child, name_.empty() ? std::string() : name_ + "/" + std::to_string(color));
}

py::object Comm::asyncError() {
  vigilComm_t comm = handle("async_error");
  vigilResult_t error = vigilSuccess;
  check(vigilCommGetAsyncError(comm, &error), comm);
  if (error == vigilSuccess) return py::none();
  return errorObject(lastCallError(error, comm));
}

void Comm::dumpFlightRecorder(const py::object& path) {
  vigilComm_t comm = handle("dump_flight_recorder");
  std::string file;
  if (!path.is_none()) file = py::str(py::module_::import("os").attr("fspath")(path));
  vigilResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = vigilCommDumpFlightRecorder(comm, file.empty() ? nullptr : file.c_str());
  }
  check(rc, comm);
}

void Comm::finalize() {
  vigilComm_t comm = handle("finalize");
  drain("finalize");
  const vigilResult_t rc = interruptible("finalize", [&] { return vigilCommFinalize(comm); });
  check(rc, comm);
}

void Comm::close() {
  vigilComm_t comm = std::exchange(comm_, nullptr);
  if (comm == nullptr) return;
  std::shared_ptr<StreamOwner> stream = std::move(stream_);
  // Symmetric arrays still alive keep their memory (and so the communicator)
  // until the last of them goes: see symmetric.cpp.
  const bool later = liveSymmetricBlocks() > 0;
  vigilResult_t rc = vigilSuccess;
  {
    py::gil_scoped_release nogil;
    if (stream) vigilStreamSynchronize(stream->get());
    if (!later) rc = vigilCommDestroy(comm);
  }
  if (later) closedLater_ = comm;
  pending_.clear();
  requests_.clear();  // only their handles: the communicator is gone
  check(rc, comm);
}

void Comm::abort() {
  vigilComm_t comm = std::exchange(comm_, nullptr);
  if (comm == nullptr) return;
  std::shared_ptr<StreamOwner> stream = std::move(stream_);
  vigilResult_t rc;
  {
    py::gil_scoped_release nogil;
    // In-flight work returns vigilAborted within 1 s.
    rc = vigilCommAbortWithReason(comm, "vigil.Communicator.abort() in Python");
    if (stream) vigilStreamSynchronize(stream->get());
  }
  pending_.clear();
  requests_.clear();  // only their handles: the communicator is gone
  check(rc, comm);
}

// ---- Group ------------------------------------------------------------------

bool groupOpen() {
  return groupState.depth > 0;
}

Group::~Group() {
  // Entered and never exited (__enter__ called by hand): stop pointing at the
  // arrays about to be freed. The C group stays open on this thread.
  if (entered_ && outermost_ && groupState.keep == &keep_) {
    groupState.keep = nullptr;
    groupState.comms = nullptr;
  }
}

void Group::enter() {
  if (entered_) {
    refuse("VG-API-009", Where{-1, 0, "group"}, "this vigil.group() object is already open",
           "open a new vigil.group() for a nested group");
  }
  check(vigilGroupStart(), nullptr);
  entered_ = true;
  outermost_ = groupState.depth++ == 0;
  if (outermost_) {
    groupState.keep = &keep_;
    groupState.comms = &comms_;
  }
}

void Group::exit(const py::object& excType) {
  if (!entered_) return;
  entered_ = false;
  std::vector<std::shared_ptr<Comm>> comms;
  std::vector<vigilComm_t> handles;
  for (const std::weak_ptr<Comm>& weak : comms_) {
    std::shared_ptr<Comm> comm = weak.lock();
    if (!comm || comm->closed() || std::find(comms.begin(), comms.end(), comm) != comms.end()) continue;
    handles.push_back(comm->handle("group"));
    comms.push_back(std::move(comm));
  }
  // The group must end on the C side whatever is pending: handlers run after it.
  InterruptibleCall watch(std::move(handles), false);
  vigilResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = vigilGroupEnd();  // the outermost end runs the batch
  }
  --groupState.depth;
  if (outermost_) {
    groupState.keep = nullptr;
    groupState.comms = nullptr;
  }
  keep_.clear();  // the batch completed: its arrays may go
  comms_.clear();
  if (watch.interrupted()) {
    const CallError failure = interruptedCallError(rc, nullptr);
    for (const std::shared_ptr<Comm>& comm : comms) comm->forgetAborted();
    watch.raiseInterrupted(Where{-1, 0, "group"}, failure);
  }
  // An exception already leaving the with-block wins over the batch's error.
  if (excType.is_none()) check(rc, nullptr);
}

}  // namespace vigil::python
