// vigil._vigil: the extension module behind `import vigil`. Module functions,
// vigil.Communicator's lifecycle, vigil.Work and vigil.group() are declared
// here; the operations in collectives.cpp and moe.cpp.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <optional>
#include <string>

#include "arrays.hpp"
#include "communicator.hpp"
#include "errors.hpp"

namespace py = pybind11;
using namespace vigil::python;

namespace {

std::string rootInfo() {
  vigilRootInfo info{};
  vigilResult_t rc;
  {
    py::gil_scoped_release nogil;
    rc = vigilGetRootInfo(&info);
  }
  check(rc, nullptr);
  char text[2 * VIGIL_ROOT_INFO_BYTES + 1];
  check(vigilRootInfoToString(&info, text, sizeof text), nullptr);
  return text;
}

std::string version() {
  int code = 0;
  check(vigilGetVersion(&code), nullptr);
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) + "." + std::to_string(code % 100);
}

std::string describeComm(const Comm& comm) {
  if (comm.closed()) return "<vigil.Communicator (closed)>";
  std::string text = "<vigil.Communicator rank " + std::to_string(comm.rank()) + "/" + std::to_string(comm.size());
  if (!comm.name().empty()) text += " '" + comm.name() + "'";
  return text + ">";
}

void registerWorkAndGroup(py::module_& m) {
  py::class_<Work, std::shared_ptr<Work>>(
      m, "Work",
      "An operation issued with async_op=True, running on its communicator's stream.\n\n"
      "It holds the operation's arrays until it completed. Operations of one communicator run in\n"
      "issue order; a blocking call on the communicator first waits for them.")
      .def("wait", &Work::wait,
           "wait() -> numpy.ndarray | None\n\n"
           "Waits until the operation completed (the GIL is released meanwhile) and returns what the\n"
           "blocking call would have returned. Raises the operation's vigil.Error if it failed (also\n"
           "when an earlier operation of the communicator failed: the later ones were skipped).")
      .def("is_completed", &Work::isCompleted,
           "is_completed() -> bool\n\nTrue once the operation finished (wait() then returns at once, or raises).")
      .def_property_readonly("op", &Work::op, "The operation's name, e.g. 'all_reduce'.")
      .def("__repr__", [](Work& w) { return "<vigil.Work " + w.op() + (w.reached() ? " completed>" : " in flight>"); });

  py::class_<Status>(m, "Status",
                     "Status()\n\n"
                     "What a tagged receive or a probe matched, as mpi4py's MPI.Status: pass one as\n"
                     "recv(..., status=st) or sendrecv(..., status=st); probe() and iprobe() return one.")
      .def(py::init<>())
      .def_property_readonly(
          "source", [](const Status& s) { return s.value.source; }, "The sender's rank.")
      .def_property_readonly(
          "tag", [](const Status& s) { return s.value.tag; }, "The message's tag.")
      .def_property_readonly(
          "count", [](const Status& s) { return s.value.count; }, "Elements of the message (of its dtype).")
      .def_property_readonly(
          "nbytes", [](const Status& s) { return s.value.bytes; }, "Bytes of the message.")
      .def("Get_source", [](const Status& s) { return s.value.source; })
      .def("Get_tag", [](const Status& s) { return s.value.tag; })
      .def("Get_count", [](const Status& s) { return s.value.count; })
      .def("__repr__", [](const Status& s) {
        return "<vigil.Status source " + std::to_string(s.value.source) + " tag " + std::to_string(s.value.tag) +
               " count " + std::to_string(s.value.count) + ">";
      });
  m.attr("ANY_SOURCE") = VIGIL_ANY_SOURCE;
  m.attr("ANY_TAG") = VIGIL_ANY_TAG;

  py::class_<Group>(m, "group",
                    "group()\n\n"
                    "A context manager: the operations issued inside it on this thread (any communicator) run\n"
                    "as one batch when it ends (vigilGroupStart / vigilGroupEnd), so that sends and receives\n"
                    "between ranks cannot deadlock. Outputs are written when the outermost group ends; the\n"
                    "arrays are held until then. async_op=True is refused inside (VG-PY-002).\n\n"
                    ">>> with vigil.group():\n"
                    "...     comm.send(x, peer=(comm.rank + 1) % comm.size)\n"
                    "...     comm.recv(y, peer=(comm.rank - 1) % comm.size)")
      .def(py::init<>())
      .def("__enter__",
           [](Group& g) -> Group& {
             g.enter();
             return g;
           })
      .def(
          "__exit__",
          [](Group& g, const py::object& type, const py::object&, const py::object&) {
            g.exit(type);
            return false;
          },
          py::arg("exc_type"), py::arg("exc_value"), py::arg("traceback"));
}

}  // namespace

namespace vigil::python {

void registerCommunicator(py::module_& m) {
  py::options options;
  options.disable_function_signatures();
  registerWorkAndGroup(m);

  py::class_<Comm, std::shared_ptr<Comm>> cls(
      m, "Communicator",
      "Communicator(root_info, rank, world_size, *, timeout=None, connect_timeout=None, name=None,\n"
      "             fingerprint=None, nan_check=None, buffer_guard=None)\n\n"
      "A group of ranks that run collectives together (a vigilComm_t). Ranks are processes or threads:\n"
      "every call that waits releases the GIL, so threads of one process can be ranks.\n\n"
      "Creating one is collective: world_size ranks, each with its own rank, pass the same root_info\n"
      "(from vigil.root_info() on any one rank). vigil.init() builds one from a launcher's environment.\n\n"
      "Parameters\n----------\n"
      "root_info : str\n    The text of vigil.root_info().\n"
      "rank : int\n    This rank, in [0, world_size).\n"
      "world_size : int\n    The number of ranks.\n"
      "timeout : float or datetime.timedelta, optional\n"
      "    Seconds an operation may take before TimeoutError (VG-OP-001); must agree across ranks.\n"
      "    None: VIGIL_TIMEOUT_MS (default 600 s).\n"
      "connect_timeout : float or datetime.timedelta, optional\n"
      "    Seconds to wait for every rank at creation. None: VIGIL_CONNECT_TIMEOUT_MS (default 120 s).\n"
      "name : str, optional\n    Shows in errors and logs. None: generated.\n"
      "fingerprint, nan_check, buffer_guard : bool, optional\n"
      "    The checks of VIGIL_FINGERPRINT, VIGIL_NAN_CHECK, VIGIL_BUFFER_GUARD; None: the environment's.\n\n"
      "Operations return their output (a new array unless out= is given; out=send works in place),\n"
      "or a Work with async_op=True. Use it as a context manager, or call close().\n\n"
      ">>> root = vigil.root_info()                      # once, passed to every rank\n"
      ">>> with vigil.Communicator(root, rank, 4) as comm:\n"
      "...     total = comm.all_reduce(x)");
  cls.def(py::init([](const std::string& root, int rank, int worldSize, py::object timeout, py::object connectTimeout,
                      py::object name, py::object fingerprint, py::object nanCheck, py::object bufferGuard) {
            InitOptions o{timeout, connectTimeout, name, fingerprint, nanCheck, bufferGuard};
            return Comm::fromRootInfo(root, rank, worldSize, o);
          }),
          py::arg("root_info"), py::arg("rank"), py::arg("world_size"), py::kw_only(), py::arg("timeout") = py::none(),
          py::arg("connect_timeout") = py::none(), py::arg("name") = py::none(), py::arg("fingerprint") = py::none(),
          py::arg("nan_check") = py::none(), py::arg("buffer_guard") = py::none())
      .def_static("from_env", &Comm::fromEnv,
                  "from_env() -> Communicator\n\nThe same as vigil.init(): a communicator from the launcher's "
                  "environment.")
      .def_property_readonly("rank", &Comm::rank, "This rank, in [0, size).")
      .def_property_readonly("size", &Comm::size, "The number of ranks.")
      .def_property_readonly("closed", &Comm::closed, "True after close() or abort().")
      .def_property_readonly(
          "handle", [](const Comm& c) { return reinterpret_cast<uintptr_t>(c.handle("handle")); },
          "The vigilComm_t as an integer, for C code that shares this communicator (it stays owned here).")
      .def("split", &Comm::split, py::arg("color"), py::arg("key"),
           "split(color, key) -> Communicator | None\n\n"
           "Collective: the ranks passing the same color >= 0 form a new communicator, ordered by\n"
           "(key, rank). A negative color takes no part and returns None. Every rank of this communicator\n"
           "calls it, in the same place among its operations; not inside vigil.group() (VG-API-015).")
      .def("finalize", &Comm::finalize,
           "finalize()\n\nCollective: completes this rank's operations and tells the peers that it leaves\n"
           "cleanly. Only close() may follow.")
      .def("close", &Comm::close,
           "close()\n\nWaits for this communicator's async operations, then frees it (local, not collective).\n"
           "Peers that still need this rank get RemoteError (VG-PEER-002). Closing twice does nothing.")
      .def("abort", &Comm::abort,
           "abort()\n\nCancels in-flight operations (they raise AbortedError within a second, also in other\n"
           "threads) and frees the communicator.")
      .def("async_error", &Comm::asyncError,
           "async_error() -> Error | None\n\nThe error of an earlier failed operation (the communicator stays "
           "failed after it),\nor None.")
      .def("dump_flight_recorder", &Comm::dumpFlightRecorder, py::arg("path") = py::none(),
           "dump_flight_recorder(path=None)\n\n"
           "Writes this rank's last operations as JSON (to path, or to VIGIL_DUMP_DIR); `vigil-doctor dumps`\n"
           "merges the files of all ranks.")
      .def(
          "group", [](const Comm&) { return Group(); },
          "group() -> vigil.group\n\nThe same as vigil.group(): a batch of operations of this thread (of any "
          "communicator).")
      .def("__enter__", [](const std::shared_ptr<Comm>& c) { return c; })
      .def(
          "__exit__", [](Comm& c, const py::object&, const py::object&, const py::object&) { c.close(); },
          py::arg("exc_type"), py::arg("exc_value"), py::arg("traceback"))
      .def("__repr__", &describeComm);
  registerCollectives(cls);
  registerMoe(m, cls);
  registerSymmetric(cls, m);
}

}  // namespace vigil::python

PYBIND11_MODULE(_vigil, m) {
  m.doc() = "The compiled part of vigil; use it through `import vigil`.";
  py::options options;
  options.disable_function_signatures();
  registerErrors(m);
  registerTypes(m);
  registerCommunicator(m);
  m.def("root_info", &rootInfo,
        "root_info() -> str\n\n"
        "Starts the rendezvous root in this process and returns its address and job token as text (256\n"
        "hex characters). Call it on one rank and give the text to every rank's Communicator().");
  m.def("init", &Comm::initOrAlone,
        "init() -> Communicator\n\n"
        "A communicator from the launcher's environment: vigil-run (VIGIL_ROOT_INFO, VIGIL_RANK,\n"
        "VIGIL_WORLD_SIZE), torchrun (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE), Open MPI\n"
        "(OMPI_COMM_WORLD_RANK/SIZE) or SLURM (SLURM_PROCID/NTASKS). Without any launcher's variables,\n"
        "a world of one (this process alone), as mpi4py gives; Communicator.from_env() refuses that case\n"
        "(VG-BOOT-009). Timeouts and checks come from the VIGIL_* variables (docs/api.md).");
  m.def(
      "_process_exiting",
      [](const std::optional<std::string>& uncaught) {
        py::gil_scoped_release nogil;
        vigilProcessExiting(uncaught ? uncaught->c_str() : nullptr);
      },
      py::arg("uncaught_error") = py::none(),
      "_process_exiting(uncaught_error=None)\n\nThe interpreter's exit hook (vigil registers it with atexit): "
      "destroys the communicators still alive, telling their peers whether the program ended normally or because "
      "of the uncaught error described.");
  m.def("version", &version, "version() -> str\n\nThe version of the vigil library, e.g. '0.1.0'.");
}
