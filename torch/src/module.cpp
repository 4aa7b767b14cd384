// The Python module vigil.torch._vigil_torch: the ProcessGroupVigil class,
// a subclass of torch's ProcessGroup (vigil/torch/__init__.py registers the
// backend).

#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include "process_group_vigil.hpp"

namespace py = pybind11;
using vigil::torchpg::ProcessGroupVigil;

PYBIND11_MODULE(_vigil_torch, m) {
  m.doc() = "torch.distributed backend over vigil communicators";
  // The base class is bound by torch.distributed: load it first.
  py::module_::import("torch.distributed");

  py::class_<ProcessGroupVigil::QueueHold>(m, "_QueueHold")
      .def("release", &ProcessGroupVigil::QueueHold::release, "Lets the group's queue run again.");

  py::class_<ProcessGroupVigil, c10::intrusive_ptr<ProcessGroupVigil>, c10d::ProcessGroup>(m, "ProcessGroupVigil")
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, int64_t timeoutMs) {
             auto group =
                 c10::make_intrusive<ProcessGroupVigil>(store, rank, size, std::chrono::milliseconds(timeoutMs));
             ProcessGroupVigil::track(group);
             return group;
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_ms"),
           py::call_guard<py::gil_scoped_release>(),
           "Collective over the group: builds the group's vigil communicator, with the root info passed through "
           "`store` and `timeout_ms` as its per-operation deadline.")
      .def("_hold_queue_for_testing", &ProcessGroupVigil::holdQueueForTesting,
           "For tests: holds the group's queue (nothing queued after it runs) until release() on the returned "
           "handle, or its end, as an operation that does not return would.")
      .def(
          "_symmetric_empty",
          [](ProcessGroupVigil& pg, const std::vector<int64_t>& sizes, const py::object& dtype) {
            if (!THPDtype_Check(dtype.ptr())) throw py::type_error("dtype must be a torch.dtype");
            const at::ScalarType type = reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
            py::gil_scoped_release nogil;
            return pg.symmetricEmpty(sizes, type);
          },
          py::arg("sizes"), py::arg("dtype"),
          "Collective: a CPU tensor in a new block of the group's symmetric heap (see vigil.torch.symmetric_empty).")
      .def("_symmetric_collect", &ProcessGroupVigil::symmetricCollect, py::call_guard<py::gil_scoped_release>(),
           "Collective: frees the heap blocks that no tensor on any rank uses; returns how many.")
      .def("_barrier_all", &ProcessGroupVigil::barrierAll,
           "Collective: vigilBarrierAll on the group's communicator; returns a Work.")
      .def("_peer_view", &ProcessGroupVigil::symmetricPeerView, py::arg("tensor"), py::arg("peer"),
           "A view of a symmetric tensor in `peer`'s copy (same host).")
      .def_property_readonly("_symmetric_blocks_in_use", &ProcessGroupVigil::symmetricBlocksInUse,
                             "Heap blocks a tensor on this rank still uses.")
      .def_property_readonly("comm_name", &ProcessGroupVigil::commName,
                             "The vigil communicator's name, as errors and flight-recorder dumps show it.")
      .def_property_readonly(
          "timeout_ms", [](const ProcessGroupVigil& pg) { return pg.timeout().count(); },
          "The per-operation deadline of the group's communicator.");

  m.def("_stop_groups_for_exit", &ProcessGroupVigil::stopAllForExit, py::call_guard<py::gil_scoped_release>(),
        "The interpreter's exit hook (vigil.torch registers it with atexit, after vigil's communicators are "
        "destroyed): ends the threads of every live group while they can still take the GIL.");

  int version = 0;
  vigilGetVersion(&version);
  m.attr("vigil_version") = version;
}
