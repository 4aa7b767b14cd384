// Symmetric memory on numpy arrays (docs/symmetric.md, "Python"):
// Communicator.symmetric_empty gives an array over the communicator's
// symmetric heap; peer_view, put, get, put_signal, signal_wait_until, fence,
// quiet, barrier_all, all_reduce_symmetric and the GEMM kernels act on such
// arrays.
//
// Lifetime. An array's memory is never freed under it: every array (and
// view, and peer view) keeps its block, and through it the communicator,
// alive. A block nobody references any more is freed collectively, when
// every rank agrees that it is unreferenced there too: at the next
// symmetric_empty or symmetric_collect (collective calls), which first take
// the logical AND of "unreferenced" over the ranks for every block, in
// allocation order, and free those. close() with arrays alive leaves their
// memory mapped until the last of them goes; abort() leaves it mapped until
// the process exits (the C library keeps an aborted heap).

#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "communicator.hpp"

namespace py = pybind11;

namespace vigil::python {
namespace {

// The numpy array's memory block: the base object of every array over it.
class SymmetricBlock {
 public:
  SymmetricBlock(std::shared_ptr<Comm> comm, std::shared_ptr<SymmetricBlockState> state)
      : comm_(std::move(comm)), state_(std::move(state)) {}
  ~SymmetricBlock() { state_->referenced = false; }
  SymmetricBlock(const SymmetricBlock&) = delete;
  SymmetricBlock& operator=(const SymmetricBlock&) = delete;
  const std::shared_ptr<Comm>& comm() const { return comm_; }
  void* ptr() const { return state_->ptr; }
  size_t bytes() const { return state_->bytes; }

 private:
  std::shared_ptr<Comm> comm_;
  std::shared_ptr<SymmetricBlockState> state_;
};

// The block under `value` (a symmetric array of `comm`), or a refusal.
std::shared_ptr<SymmetricBlock> blockOf(Comm& comm, const py::array& array, const char* name, const Where& where) {
  py::object base = array.attr("base");
  while (py::isinstance<py::array>(base)) base = base.attr("base");  // a view of a view
  if (!base.is_none() && py::isinstance<SymmetricBlock>(base)) {
    auto block = base.cast<std::shared_ptr<SymmetricBlock>>();
    if (block->comm().get() == &comm) return block;
    refuse("VG-SYM-003", where, std::string(name) + " is a symmetric array of another communicator",
           "pass arrays made by this communicator's symmetric_empty()");
  }
  refuse("VG-SYM-003", where, std::string(name) + " (" + describe(array) + ") is not a symmetric array",
         "make it with comm.symmetric_empty(shape, dtype) (a view of one is fine)");
}

py::array symmetricArray(Comm& comm, const py::array& array, const char* name, const Where& where, bool output) {
  py::array a = requireArray(array, name, where, output);
  blockOf(comm, a, name, where);
  return a;
}

std::vector<py::ssize_t> shapeFrom(const py::object& shape) {
  if (py::isinstance<py::int_>(shape)) return {shape.cast<py::ssize_t>()};
  return shape.cast<std::vector<py::ssize_t>>();
}

vigilCmpOp_t parseCmp(const std::string& text, const Where& where) {
  static const std::pair<const char*, vigilCmpOp_t> kCmps[] = {{"eq", vigilCmpEq}, {"ne", vigilCmpNe},
                                                                {"gt", vigilCmpGt}, {"ge", vigilCmpGe},
                                                                {"lt", vigilCmpLt}, {"le", vigilCmpLe}};
  for (const auto& [name, cmp] : kCmps) {
    if (text == name) return cmp;
  }
  refuse("VG-SYM-007", where, "cmp='" + text + "' is not a comparison", "pass one of eq, ne, gt, ge, lt, le");
}

uint64_t* signalAt(Comm& comm, const py::array& signal, py::ssize_t index, const Where& where) {
  py::array s = symmetricArray(comm, signal, "signal", where, true);
  if (s.dtype().kind() != 'u' || s.itemsize() != 8) {
    refuse("VG-SYM-003", where, "signal (" + describe(s) + ") is not an array of uint64",
           "make signals with comm.symmetric_empty(n, numpy.uint64)");
  }
  if (index < 0 || index >= s.size()) {
    refuse("VG-SYM-003", where, "index " + std::to_string(index) + " is outside signal's " + std::to_string(s.size()) + " elements");
  }
  return static_cast<uint64_t*>(s.mutable_data()) + index;
}

}  // namespace

// ---- Comm's symmetric state ---------------------------------------------------

size_t Comm::liveSymmetricBlocks() const {
  size_t n = 0;
  for (const auto& b : blocks_) n += b->referenced ? 1 : 0;
  return n;
}

size_t Comm::collectSymmetric(const std::string& op) {
  // Every rank has the same blocks in the same order (allocation is collective).
  const size_t n = blocks_.size();
  if (n == 0) return 0;
  std::vector<uint8_t> referenced(n);
  for (size_t i = 0; i < n; ++i) referenced[i] = blocks_[i]->referenced ? 1 : 0;
  vigilComm_t comm = handle(op);
  check(interruptible(op, [&] { return vigilAllReduce(referenced.data(), referenced.data(), n, vigilUint8, vigilMax, comm, nullptr); }),
        comm);
  size_t freed = 0;
  std::vector<std::shared_ptr<SymmetricBlockState>> kept;
  for (size_t i = 0; i < n; ++i) {
    if (referenced[i] != 0) {
      kept.push_back(blocks_[i]);
      continue;
    }
    check(interruptible(op, [&] { return vigilMemFree(comm, blocks_[i]->ptr); }), comm);
    ++freed;
  }
  blocks_ = std::move(kept);
  return freed;
}

py::array symmetricEmpty(const std::shared_ptr<Comm>& self, const std::vector<py::ssize_t>& shape,
                         const py::dtype& dtype) {
  const Where where = self->where("symmetric_empty");
  size_t count = 1;
  for (py::ssize_t d : shape) {
    if (d < 0) refuse("VG-API-001", where, "shape has a negative dimension", "pass dimensions >= 0");
    count *= static_cast<size_t>(d);
  }
  const size_t bytes = std::max<size_t>(1, count * static_cast<size_t>(dtype.itemsize()));
  self->collectSymmetric("symmetric_empty");
  vigilComm_t comm = self->handle("symmetric_empty");
  void* ptr = nullptr;
  check(self->interruptible("symmetric_empty", [&] { return vigilMemAlloc(comm, bytes, &ptr); }), comm);
  auto state = std::make_shared<SymmetricBlockState>(SymmetricBlockState{ptr, bytes, true});
  self->addSymmetricBlock(state);
  auto block = std::make_shared<SymmetricBlock>(self, state);
  return py::array(dtype, shape, ptr, py::cast(block));
}

namespace {

py::array symmetricEmptyArgs(const std::shared_ptr<Comm>& self, const py::object& shapeArg,
                             const py::object& dtypeArg) {
  return symmetricEmpty(self, shapeFrom(shapeArg), py::dtype::from_args(dtypeArg));
}

py::array peerView(const std::shared_ptr<Comm>& self, const py::array& arrayArg, int peer) {
  const Where where = self->where("peer_view");
  py::array array = requireArray(arrayArg, "array", where, false);
  std::shared_ptr<SymmetricBlock> block = blockOf(*self, array, "array", where);
  vigilComm_t comm = self->handle("peer_view");
  void* peerPtr = nullptr;
  check(vigilMemPeerPtr(comm, array.data(), peer, &peerPtr), comm);
  return py::array(array.dtype(), shapeOf(array), std::vector<py::ssize_t>(array.strides(), array.strides() + array.ndim()),
                   peerPtr, py::cast(block));
}

void put(const std::shared_ptr<Comm>& self, const py::array& dest, const py::array& src, int peer) {
  const Where where = self->where("put");
  py::array d = symmetricArray(*self, dest, "dest", where, true);
  py::array s = requireArray(src, "src", where, false);
  vigilComm_t comm = self->handle("put");
  const size_t bytes = static_cast<size_t>(s.nbytes());
  check(self->interruptible("put", [&] { return vigilPut(d.mutable_data(), s.data(), bytes, peer, comm, nullptr); }), comm);
}

py::array get(const std::shared_ptr<Comm>& self, const py::array& src, int peer) {
  const Where where = self->where("get");
  py::array s = symmetricArray(*self, src, "src", where, false);
  py::array out(s.dtype(), shapeOf(s));
  vigilComm_t comm = self->handle("get");
  const size_t bytes = static_cast<size_t>(s.nbytes());
  check(self->interruptible("get", [&] { return vigilGet(out.mutable_data(), s.data(), bytes, peer, comm, nullptr); }), comm);
  return out;
}

void putSignal(const std::shared_ptr<Comm>& self, const py::array& dest, const py::array& src, const py::array& signal,
               uint64_t value, int peer, const std::string& op, py::ssize_t index) {
  const Where where = self->where("put_signal");
  py::array d = symmetricArray(*self, dest, "dest", where, true);
  py::array s = requireArray(src, "src", where, false);
  uint64_t* sig = signalAt(*self, signal, index, where);
  vigilSignalOp_t sigOp = vigilSignalSet;
  if (op == "add") {
    sigOp = vigilSignalAdd;
  } else if (op != "set") {
    refuse("VG-SYM-007", where, "op='" + op + "' is not a signal operation", "pass op='set' or op='add'");
  }
  vigilComm_t comm = self->handle("put_signal");
  const size_t bytes = static_cast<size_t>(s.nbytes());
  check(self->interruptible("put_signal", [&] {
    return vigilPutSignal(d.mutable_data(), s.data(), bytes, sig, value, sigOp, peer, comm, nullptr);
  }),
        comm);
}

uint64_t signalWaitUntil(const std::shared_ptr<Comm>& self, const py::array& signal, const std::string& cmp,
                         uint64_t value, int fromPeer, py::ssize_t index) {
  const Where where = self->where("signal_wait_until");
  uint64_t* sig = signalAt(*self, signal, index, where);
  const vigilCmpOp_t c = parseCmp(cmp, where);
  vigilComm_t comm = self->handle("signal_wait_until");
  uint64_t observed = 0;
  check(self->interruptible("signal_wait_until",
                            [&] { return vigilSignalWaitUntil(sig, c, value, fromPeer, &observed, comm, nullptr); }),
        comm);
  return observed;
}

template <vigilResult_t (*Call)(vigilComm_t, vigilStream_t)>
void simple(const std::shared_ptr<Comm>& self, const char* op) {
  vigilComm_t comm = self->handle(op);
  check(self->interruptible(op, [&] { return Call(comm, nullptr); }), comm);
}

py::array allReduceSymmetric(const std::shared_ptr<Comm>& self, const py::array& send, const py::object& out,
                             const py::object& opArg) {
  const Where where = self->where("all_reduce_symmetric");
  py::array s = symmetricArray(*self, send, "send", where, false);
  py::array r = out.is_none() ? s : symmetricArray(*self, py::reinterpret_borrow<py::array>(out), "out", where, true);
  if (!out.is_none()) requireSameDtype(r, s, where);
  if (r.size() != s.size()) {
    refuse("VG-PY-001", where, "out has " + std::to_string(r.size()) + " elements, send " + std::to_string(s.size()));
  }
  const vigilDataType_t type = elementType(s, "send", std::nullopt, where);
  const vigilRedOp_t op = parseRedOp(opArg, where);
  vigilComm_t comm = self->handle("all_reduce_symmetric");
  const size_t count = static_cast<size_t>(s.size());
  check(self->interruptible("all_reduce_symmetric", [&] {
    return vigilAllReduceSymmetric(s.data(), r.mutable_data(), count, type, op, comm, nullptr);
  }),
        comm);
  return r;
}

vigilDataType_t gemmType(const py::array& a, const char* name, const Where& where) {
  const vigilDataType_t t = elementType(a, name, std::nullopt, where);
  if (t != vigilFloat32 && t != vigilFloat64) {
    refuse("VG-API-002", where, std::string(name) + " (" + describe(a) + ") is not float32 or float64",
           "the GEMM kernels take float32 or float64 arrays");
  }
  return t;
}

void require2d(const py::array& a, const char* name, const Where& where) {
  if (a.ndim() != 2) refuse("VG-PY-001", where, std::string(name) + " (" + describe(a) + ") is not a matrix (2 dimensions)");
}

py::array allGatherGemm(const std::shared_ptr<Comm>& self, const py::array& xArg, const py::array& wArg) {
  const Where where = self->where("all_gather_gemm");
  py::array x = symmetricArray(*self, xArg, "x", where, false);
  py::array w = requireArray(wArg, "w", where, false);
  require2d(x, "x", where);
  require2d(w, "w", where);
  const vigilDataType_t type = gemmType(x, "x", where);
  requireSameDtype(w, x, where);
  const size_t rows = static_cast<size_t>(x.shape(0)), k = static_cast<size_t>(x.shape(1));
  const size_t n = static_cast<size_t>(w.shape(1));
  if (static_cast<size_t>(w.shape(0)) != k) {
    refuse("VG-PY-001", where, "x is " + describe(x) + " and w " + describe(w) + ": x's columns must be w's rows");
  }
  py::array out(x.dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(rows) * self->size(), static_cast<py::ssize_t>(n)});
  vigilComm_t comm = self->handle("all_gather_gemm");
  check(self->interruptible("all_gather_gemm", [&] {
    return vigilAllGatherGemm(x.data(), w.data(), out.mutable_data(), rows, k, n, type, comm, nullptr);
  }),
        comm);
  return out;
}

py::array gemmReduceScatter(const std::shared_ptr<Comm>& self, const py::array& aArg, const py::array& wArg,
                            const py::object& workspaceArg) {
  const Where where = self->where("gemm_reduce_scatter");
  py::array a = requireArray(aArg, "a", where, false);
  py::array w = requireArray(wArg, "w", where, false);
  require2d(a, "a", where);
  require2d(w, "w", where);
  const vigilDataType_t type = gemmType(a, "a", where);
  requireSameDtype(w, a, where);
  const size_t m = static_cast<size_t>(a.shape(0)), k = static_cast<size_t>(a.shape(1));
  const size_t n = static_cast<size_t>(w.shape(1));
  const size_t nranks = static_cast<size_t>(self->size());
  if (static_cast<size_t>(w.shape(0)) != k) {
    refuse("VG-PY-001", where, "a is " + describe(a) + " and w " + describe(w) + ": a's columns must be w's rows");
  }
  if (m % nranks != 0) {
    refuse("VG-PY-001", where, "a has " + std::to_string(m) + " rows, not a multiple of the " + std::to_string(nranks) + " ranks");
  }
  const size_t rows = m / nranks;
  py::array workspace =
      workspaceArg.is_none()
          ? symmetricEmpty(self, {static_cast<py::ssize_t>(m), static_cast<py::ssize_t>(n)}, a.dtype())
          : symmetricArray(*self, py::reinterpret_borrow<py::array>(workspaceArg), "workspace", where, true);
  py::array out(a.dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(rows), static_cast<py::ssize_t>(n)});
  vigilComm_t comm = self->handle("gemm_reduce_scatter");
  check(self->interruptible("gemm_reduce_scatter", [&] {
    return vigilGemmReduceScatter(a.data(), w.data(), out.mutable_data(), workspace.mutable_data(), rows, k, n, type,
                                  comm, nullptr);
  }),
        comm);
  return out;
}

}  // namespace

void registerSymmetric(py::class_<Comm, std::shared_ptr<Comm>>& cls, py::module_& m) {
  py::class_<SymmetricBlock, std::shared_ptr<SymmetricBlock>>(
      m, "_SymmetricBlock", "The memory under symmetric arrays (their .base); freed when unreferenced on every rank.")
      .def_property_readonly("nbytes", &SymmetricBlock::bytes)
      .def_property_readonly("address", [](const SymmetricBlock& b) { return reinterpret_cast<uintptr_t>(b.ptr()); });

  cls.def("symmetric_empty", &symmetricEmptyArgs, py::arg("shape"), py::arg("dtype") = "float32",
          "symmetric_empty(shape, dtype='float32') -> numpy.ndarray\n\n"
          "Collective: an array over the symmetric heap (every rank passes the same shape and dtype;\n"
          "VG-SYM-001 otherwise). Reads as zero. Its memory is freed once no array over it remains on any\n"
          "rank, at the next symmetric_empty or symmetric_collect (docs/symmetric.md).");
  cls.def("symmetric_collect", [](const std::shared_ptr<Comm>& self) { return self->collectSymmetric("symmetric_collect"); },
          "symmetric_collect() -> int\n\nCollective: frees the symmetric blocks that no array uses on any rank; "
          "returns how many.");
  cls.def("peer_view", &peerView, py::arg("array"), py::arg("peer"),
          "peer_view(array, peer) -> numpy.ndarray\n\nThe same elements in peer's copy, for loads and stores; the "
          "peer must run on this host (VG-SYM-004).");
  cls.def("put", &put, py::arg("dest"), py::arg("src"), py::arg("peer"),
          "put(dest, src, peer)\n\nCopies src (any array) into peer's copy of dest (a symmetric array).");
  cls.def("get", &get, py::arg("src"), py::arg("peer"),
          "get(src, peer) -> numpy.ndarray\n\nA new array with peer's copy of src (a symmetric array).");
  cls.def("put_signal", &putSignal, py::arg("dest"), py::arg("src"), py::arg("signal"), py::arg("value"),
          py::arg("peer"), py::kw_only(), py::arg("op") = "set", py::arg("index") = 0,
          "put_signal(dest, src, signal, value, peer, *, op='set', index=0)\n\n"
          "put(dest, src, peer), then peer's signal[index] (a symmetric uint64 array) set to value\n"
          "(op='set') or increased by it (op='add'): whoever sees the signal sees the data.");
  cls.def("signal_wait_until", &signalWaitUntil, py::arg("signal"), py::arg("cmp"), py::arg("value"), py::kw_only(),
          py::arg("from_peer") = -1, py::arg("index") = 0,
          "signal_wait_until(signal, cmp, value, *, from_peer=-1, index=0) -> int\n\n"
          "Waits until this rank's signal[index] cmp value (cmp: eq ne gt ge lt le); returns the value seen.\n"
          "from_peer: the rank expected to signal (its death ends the wait; a timeout names it).");
  cls.def("fence", [](const std::shared_ptr<Comm>& s) { simple<vigilFence>(s, "fence"); }, "fence()\n\nOrders this rank's puts.");
  cls.def("quiet", [](const std::shared_ptr<Comm>& s) { simple<vigilQuiet>(s, "quiet"); }, "quiet()\n\nCompletes this rank's puts.");
  cls.def("barrier_all", [](const std::shared_ptr<Comm>& s) { simple<vigilBarrierAll>(s, "barrier_all"); },
          "barrier_all()\n\nEvery rank's one-sided calls before it are complete and visible after it.");
  cls.def("all_reduce_symmetric", &allReduceSymmetric, py::arg("send"), py::kw_only(), py::arg("out") = py::none(),
          py::arg("op") = "sum",
          "all_reduce_symmetric(send, *, out=None, op='sum') -> numpy.ndarray\n\n"
          "all_reduce on symmetric arrays in one pass over memory (ranks of one host); out=None: in place.");
  cls.def("all_gather_gemm", &allGatherGemm, py::arg("x"), py::arg("w"),
          "all_gather_gemm(x, w) -> numpy.ndarray\n\n"
          "allgather(x) @ w: x (symmetric, rows x k) this rank's rows, w (k x n); (size*rows) x n.");
  cls.def("gemm_reduce_scatter", &gemmReduceScatter, py::arg("a"), py::arg("w"), py::kw_only(),
          py::arg("workspace") = py::none(),
          "gemm_reduce_scatter(a, w, *, workspace=None) -> numpy.ndarray\n\n"
          "This rank's rows of the sum over ranks of a @ w (a: m x k, w: k x n, m a multiple of size):\n"
          "(m/size) x n. workspace: a symmetric m x n array; None allocates one (collectively) per call.");
}

}  // namespace vigil::python
