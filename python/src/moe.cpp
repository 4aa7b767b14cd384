// MoE dispatch and combine on numpy arrays (docs/moe.md): vigil.MoeConfig,
// Communicator.moe_dispatch (allocates every output and the workspace) and
// Communicator.moe_combine, with vigil.MoeHandle carrying the routing.

#include <pybind11/stl.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "communicator.hpp"

namespace py = pybind11;

namespace vigil::python {
namespace {

// vigil.MoeConfig: the fields of vigilMoeConfig that every rank passes alike;
// epWorldSize and epRankId default to the communicator's.
struct MoeConfig {
  int64_t moeExpertNum = 0;
  int64_t hidden = 0;
  int64_t topK = 0;
  int64_t maxTokensPerRank = 0;
  int64_t sharedExpertNum = 0;
  int64_t sharedExpertRankNum = 0;
  int quantMode = vigilMoeQuantNone;
  int expertTokenNumsType = vigilMoeExpertTokenNumsCount;
  std::optional<int64_t> epWorldSize;
  std::optional<int64_t> epRankId;

  vigilMoeConfig resolve(int worldSize, int rank) const {
    vigilMoeConfig c{};
    c.size = sizeof(c);
    c.epWorldSize = epWorldSize.value_or(worldSize);
    c.epRankId = epRankId.value_or(rank);
    c.moeExpertNum = moeExpertNum;
    c.sharedExpertNum = sharedExpertNum;
    c.sharedExpertRankNum = sharedExpertRankNum;
    c.hidden = hidden;
    c.topK = topK;
    c.maxTokensPerRank = maxTokensPerRank;
    c.quantMode = quantMode;
    c.expertTokenNumsType = expertTokenNumsType;
    return c;
  }
  // Local experts of `rank` (L): 1 on a shared-expert rank.
  int64_t localExperts(int worldSize, int rank) const {
    const int64_t routedRanks = worldSize - sharedExpertRankNum;
    if (rank < sharedExpertRankNum || routedRanks <= 0) return 1;
    return moeExpertNum / routedRanks > 0 ? moeExpertNum / routedRanks : 1;
  }
};

// vigil.MoeHandle: the routing of one dispatch, for its combine.
class MoeHandle {
 public:
  MoeHandle(vigilMoeHandle_t handle, vigilMoeConfig config, int64_t bs, int64_t recvRows)
      : handle_(handle), config_(config), bs_(bs), recvRows_(recvRows) {}
  ~MoeHandle() { close(); }
  MoeHandle(const MoeHandle&) = delete;
  MoeHandle& operator=(const MoeHandle&) = delete;

  void close() {
    if (handle_ != nullptr) vigilMoeHandleDestroy(std::exchange(handle_, nullptr));
  }
  vigilMoeHandle_t get(const Where& where) const {
    if (handle_ == nullptr) {
      refuse("VG-MOE-007", where, "the MoeHandle was closed",
             "combine with the handle of a dispatch before closing it");
    }
    return handle_;
  }
  const vigilMoeConfig& config() const { return config_; }
  int64_t bs() const { return bs_; }
  int64_t recvRows() const { return recvRows_; }

 private:
  vigilMoeHandle_t handle_;
  vigilMoeConfig config_;
  int64_t bs_;
  int64_t recvRows_;
};

// What moe_dispatch returns.
struct MoeDispatch {
  py::object expandX, dynamicScales, expandScales, expertTokenNums, epRecvCounts;
  int64_t recvRows = 0;
  int64_t symmetricRows = 0;  // rows of the symmetric blocks under the outputs (symmetric=True), else 0
  std::shared_ptr<MoeHandle> handle;
};

std::string shapeText(const std::vector<int64_t>& shape) {
  std::string text = "(";
  for (size_t d = 0; d < shape.size(); ++d) text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + (shape.size() == 1 ? ",)" : ")");
}

// A 2-d (or given-rank) array of exactly `shape`; -1 = any size.
void requireShape(const py::array& array, const char* name, const std::vector<int64_t>& shape, const Where& where) {
  bool fits = array.ndim() == static_cast<py::ssize_t>(shape.size());
  for (size_t d = 0; fits && d < shape.size(); ++d) fits = shape[d] < 0 || array.shape(d) == shape[d];
  if (!fits) {
    refuse("VG-PY-001", where,
           std::string(name) + " is a " + describe(array) + "; this call needs shape " + shapeText(shape) +
               " (-1: any size)",
           std::string("pass ") + name + " with the shape the MoE configuration implies (docs/moe.md)");
  }
}

void requireType(const py::array& array, const char* name, const char* dtypeName, const Where& where) {
  if (std::string(py::str(array.dtype().attr("name"))) != dtypeName) {
    refuse("VG-PY-001", where, std::string(name) + " is a " + describe(array) + "; it must be " + dtypeName,
           std::string("pass ") + name + " as a " + dtypeName + " array (numpy's astype() converts)");
  }
}

vigilDataType_t tokenType(const py::array& array, const char* name, const py::object& dtype, const Where& where) {
  const vigilDataType_t type = elementType(array, name, parseDataType(dtype, where), where);
  if (type != vigilFloat32 && type != vigilFloat16 && type != vigilBfloat16) {
    refuse("VG-PY-001", where,
           std::string(name) + " is a " + describe(array) + "; MoE rows are float32, float16 or bfloat16",
           "pass float32, float16 or bfloat16 (uint16 with dtype='bfloat16') rows");
  }
  return type;
}

// An optional input array of a fixed dtype and shape; NULL for None.
template <class T>
const T* optionalInput(const py::object& value, const char* name, const char* dtypeName,
                       const std::vector<int64_t>& shape, const Where& where, std::vector<py::object>& keep) {
  if (value.is_none()) return nullptr;
  py::array array = requireArray(value, name, where, false);
  requireType(array, name, dtypeName, where);
  requireShape(array, name, shape, where);
  keep.push_back(array);
  return static_cast<const T*>(array.data());
}

py::array newArray(const py::dtype& dtype, std::vector<py::ssize_t> shape) {
  return py::array(dtype, shape);
}

// Every MoE call starts with a handshake in which each rank reports whether
// its own checks passed, so that all ranks return together. A call this
// binding refuses still takes part in it (vigilMoeRefuse) with the id of
// its refusal: the peers then get VG-MOE-006 naming this rank and that id at
// once, instead of waiting for it until their timeout. Then `refusal` is
// raised here.
[[noreturn]] void refusedTogether(const CallError& refusal, bool combine, vigilComm_t comm) {
  {
    py::gil_scoped_release nogil;
    vigilMoeRefuse(combine ? 1 : 0, refusal.id.c_str(), comm);  // its own failure is the peers' to report
  }
  throw refusal;
}

// The arguments and outputs of one dispatch; args point into it, so it stays in place.
struct DispatchCall {
  vigilMoeDispatchArgs args{};
  std::vector<py::object> keep;  // the inputs, alive for the call
  py::array expandX, expandScales, dynamicScales, tokenNums, recvCounts;
  int64_t recvRows = 0;
  int64_t symmetricRows = 0;
};

// symmetric=True: the outputs that peers write into, made in the symmetric
// heap before anything is checked (the allocation is collective, and its size
// depends only on the config and x's element size, so every rank makes it).
// Rows: the largest capacity of any rank, as every rank allocates the same.
void allocateSymmetricOutputs(DispatchCall& call, const std::shared_ptr<Comm>& comm, const MoeConfig& config,
                              const vigilMoeConfig& cfg, const py::object& x) {
  int64_t rows = 0;
  for (int r = 0; r < comm->size(); ++r) {
    const vigilMoeConfig other = config.resolve(comm->size(), r);
    rows = std::max(rows, vigilMoeRequiredRows(&other, r));
  }
  const bool quantised = cfg.quantMode == vigilMoeQuantDynamicInt8;
  py::dtype rowType = py::dtype("int8");
  if (!quantised) rowType = py::isinstance<py::array>(x) ? x.cast<py::array>().dtype() : py::dtype("float32");
  call.symmetricRows = rows;
  call.expandX = symmetricEmpty(comm, {rows, cfg.hidden}, rowType);
  call.expandScales = symmetricEmpty(comm, {rows}, py::dtype("float32"));
  call.dynamicScales = symmetricEmpty(comm, {quantised ? rows : 0}, py::dtype("float32"));
}

void prepareDispatch(DispatchCall& call, const Comm& comm, const MoeConfig& config, const vigilMoeConfig& cfg,
                     const Where& where, const py::object& x, const py::object& expertIds,
                     const py::object& expertScales, const py::object& activeMask, const py::object& smoothScales,
                     const py::object& dtype) {
  const int64_t H = cfg.hidden, K = cfg.topK;
  vigilMoeDispatchArgs& args = call.args;
  py::array xs = requireArray(x, "x", where, false);
  args.xType = tokenType(xs, "x", dtype, where);
  requireShape(xs, "x", {-1, H}, where);
  call.keep.push_back(xs);
  args.x = xs.data();
  args.bs = xs.shape(0);
  const int64_t bs = args.bs;
  args.expertIds = optionalInput<int32_t>(expertIds, "expert_ids", "int32", {bs, K}, where, call.keep);
  if (args.expertIds == nullptr) refuse("VG-PY-001", where, "expert_ids is None", "pass the router's [bs, top_k] ids");
  args.expertScales = optionalInput<float>(expertScales, "expert_scales", "float32", {bs, K}, where, call.keep);
  args.smoothScales = optionalInput<float>(smoothScales, "smooth_scales", "float32",
                                           {cfg.sharedExpertNum + cfg.moeExpertNum, H}, where, call.keep);
  if (!activeMask.is_none()) {
    py::array mask = requireArray(activeMask, "active_mask", where, false);
    const std::string name = py::str(mask.dtype().attr("name"));
    if (name != "bool" && name != "uint8") requireType(mask, "active_mask", "bool or uint8", where);
    requireShape(mask, "active_mask", mask.ndim() == 1 ? std::vector<int64_t>{bs} : std::vector<int64_t>{bs, K}, where);
    args.activeMask = static_cast<const uint8_t*>(mask.data());
    args.activeMaskDims = static_cast<int>(mask.ndim());
    call.keep.push_back(mask);
  }

  // Outputs: the capacity A the C API asks for (trimmed to the rows received afterwards).
  const int64_t capacity = std::max<int64_t>(vigilMoeRequiredRows(&cfg, comm.rank()), 0);
  const int64_t L = config.localExperts(comm.size(), comm.rank());
  const bool quantised = cfg.quantMode == vigilMoeQuantDynamicInt8;
  if (call.symmetricRows == 0) {  // else made in the heap already, from x's element type
    call.expandX = newArray(quantised ? py::dtype("int8") : xs.dtype(), {capacity, H});
    call.expandScales = newArray(py::dtype("float32"), {capacity});
    call.dynamicScales = newArray(py::dtype("float32"), {quantised ? capacity : 0});
  }
  call.tokenNums = newArray(py::dtype("int64"), {L});
  call.recvCounts = newArray(py::dtype("int32"), {L, static_cast<py::ssize_t>(comm.size())});
  args.expandX = call.expandX.mutable_data();
  args.expandXRows = capacity;
  args.expandScales = static_cast<float*>(call.expandScales.mutable_data());
  args.dynamicScales = quantised ? static_cast<float*>(call.dynamicScales.mutable_data()) : nullptr;
  args.expertTokenNums = static_cast<int64_t*>(call.tokenNums.mutable_data());
  args.epRecvCounts = static_cast<int32_t*>(call.recvCounts.mutable_data());
  args.recvRows = &call.recvRows;
}

MoeDispatch dispatch(Comm& comm, const py::object& x, const py::object& expertIds, const MoeConfig& config,
                     const py::object& expertScales, const py::object& activeMask, const py::object& smoothScales,
                     const py::object& dtype, bool symmetric) {
  const Where where = comm.where("moe_dispatch");
  vigilComm_t c = comm.handle(where.op);
  const vigilMoeConfig cfg = config.resolve(comm.size(), comm.rank());
  comm.drain(where.op);
  DispatchCall call;
  if (symmetric) allocateSymmetricOutputs(call, comm.shared_from_this(), config, cfg, x);
  size_t bytes = 0;
  try {
    prepareDispatch(call, comm, config, cfg, where, x, expertIds, expertScales, activeMask, smoothScales, dtype);
    check(vigilMoeDispatchGetWorkspaceSize(&cfg, &call.args, c, &bytes), c);
  } catch (const CallError& refusal) {
    refusedTogether(refusal, false, c);
  }
  vigilMoeHandle_t handle = nullptr;
  std::vector<uint8_t> workspace(std::max<size_t>(bytes, 1));  // never NULL (VG-API-001)
  const vigilResult_t rc = comm.interruptible(
      where.op, [&] { return vigilMoeDispatch(&cfg, &call.args, workspace.data(), bytes, &handle, c, nullptr); });
  check(rc, c);
  MoeDispatch result;
  result.handle = std::make_shared<MoeHandle>(handle, cfg, call.args.bs, call.recvRows);
  const py::slice rows(0, call.recvRows, 1);
  result.expandX = call.expandX[rows];
  result.expandScales = call.expandScales[rows];
  result.dynamicScales = cfg.quantMode == vigilMoeQuantDynamicInt8 ? py::object(call.dynamicScales[rows]) : py::none();
  result.expertTokenNums = call.tokenNums;
  result.epRecvCounts = call.recvCounts;
  result.recvRows = call.recvRows;
  result.symmetricRows = call.symmetricRows;
  return result;
}

std::shared_ptr<MoeHandle> handleOf(const py::object& value, const Where& where) {
  if (py::isinstance<MoeDispatch>(value)) return value.cast<const MoeDispatch&>().handle;
  if (py::isinstance<MoeHandle>(value)) return value.cast<std::shared_ptr<MoeHandle>>();
  refuse(
      "VG-PY-001", where,
      "handle is a " + std::string(py::str(py::type::of(value).attr("__name__"))) + ", not a MoeHandle or MoeDispatch",
      "pass what moe_dispatch returned (or its .handle)");
}

py::array combine(Comm& comm, const py::object& handleOrDispatch, const py::object& expertOut,
                  const py::object& expertScales, const py::object& sharedExpertX, const py::object& out,
                  const py::object& dtype) {
  const Where where = comm.where("moe_combine");
  vigilComm_t c = comm.handle(where.op);
  comm.drain(where.op);
  vigilMoeConfig cfg{};
  cfg.size = sizeof(cfg);
  vigilMoeHandle_t handle = nullptr;
  vigilMoeCombineArgs args{};
  std::vector<py::object> keep;
  py::array result;
  size_t bytes = 0;
  try {
    std::shared_ptr<MoeHandle> owner = handleOf(handleOrDispatch, where);
    cfg = owner->config();
    handle = owner->get(where);
    const int64_t H = cfg.hidden, K = cfg.topK, bs = owner->bs();
    py::array rows = requireArray(expertOut, "expert_out", where, false);
    args.xType = tokenType(rows, "expert_out", dtype, where);
    requireShape(rows, "expert_out", {owner->recvRows(), H}, where);
    keep.push_back(rows);
    args.expandX = rows.data();
    args.expertScales = optionalInput<float>(expertScales, "expert_scales", "float32", {bs, K}, where, keep);
    if (!sharedExpertX.is_none()) {
      py::array shared = requireArray(sharedExpertX, "shared_expert_x", where, false);
      requireSameDtype(shared, rows, where);
      requireShape(shared, "shared_expert_x", {bs, H}, where);
      args.sharedExpertX = shared.data();
      keep.push_back(shared);
    }
    result = outputArray(out, rows, static_cast<size_t>(bs * H), {bs, H}, where);
    requireShape(result, "out", {bs, H}, where);
    args.out = result.mutable_data();
    check(vigilMoeCombineGetWorkspaceSize(&cfg, handle, c, &bytes), c);
  } catch (const CallError& refusal) {
    refusedTogether(refusal, true, c);
  }
  std::vector<uint8_t> workspace(std::max<size_t>(bytes, 1));
  const vigilResult_t rc = comm.interruptible(
      where.op, [&] { return vigilMoeCombine(&cfg, handle, &args, workspace.data(), bytes, c, nullptr); });
  check(rc, c);
  return result;
}

using CommClass = py::class_<Comm, std::shared_ptr<Comm>>;

// vigil.MoeQuantMode and vigil.MoeExpertTokenNums: named values for MoeConfig's
// quant_mode and expert_token_nums_type.
void registerMoeEnums(py::module_& m) {
  py::enum_<vigilMoeQuantMode_t>(m, "MoeQuantMode",
                                 "MoeConfig.quant_mode (vigilMoeQuantMode_t); the integers 0 and 2 work too.")
      .value("NONE", vigilMoeQuantNone, "Rows travel in their type.")
      .value("DYNAMIC_INT8", vigilMoeQuantDynamicInt8, "Rows travel as int8 with one scale per row.");
  py::enum_<vigilMoeExpertTokenNumsType_t>(
      m, "MoeExpertTokenNums",
      "MoeConfig.expert_token_nums_type (vigilMoeExpertTokenNumsType_t); the integers 0 and 1 work too.")
      .value("PREFIX_SUM", vigilMoeExpertTokenNumsPrefixSum, "Rows of local experts 0..j (inclusive prefix sum).")
      .value("COUNT", vigilMoeExpertTokenNumsCount, "Rows of local expert j.");
}

// vigil.MoeConfig: the keyword-only constructor, the fields and the layout
// queries required_rows and local_experts.
void registerMoeConfigClass(py::module_& m) {
  py::class_<MoeConfig>(m, "MoeConfig",
                        "MoeConfig(*, moe_expert_num, hidden, top_k, max_tokens_per_rank, shared_expert_num=0,\n"
                        "          shared_expert_rank_num=0, quant_mode=0, expert_token_nums_type=1,\n"
                        "          ep_world_size=None, ep_rank_id=None)\n\n"
                        "The MoE layout (vigilMoeConfig; docs/moe.md), the same on every rank. Ranks\n"
                        "[0, shared_expert_rank_num) hold the shared experts, the others moe_expert_num routed\n"
                        "experts in equal shares. quant_mode 2 sends rows as int8 with one scale per row;\n"
                        "expert_token_nums_type 1 gives counts per local expert, 0 prefix sums.\n"
                        "ep_world_size / ep_rank_id default to the communicator's size and rank; a value that\n"
                        "differs is refused (VG-MOE-001).")
      .def(py::init([](int64_t e, int64_t h, int64_t k, int64_t maxTokens, int64_t sh, int64_t s, int quant,
                       int numsType, std::optional<int64_t> w, std::optional<int64_t> rank) {
             return MoeConfig{e, h, k, maxTokens, sh, s, quant, numsType, w, rank};
           }),
           py::kw_only(), py::arg("moe_expert_num"), py::arg("hidden"), py::arg("top_k"),
           py::arg("max_tokens_per_rank"), py::arg("shared_expert_num") = 0, py::arg("shared_expert_rank_num") = 0,
           py::arg("quant_mode") = 0, py::arg("expert_token_nums_type") = 1, py::arg("ep_world_size") = py::none(),
           py::arg("ep_rank_id") = py::none())
      .def_readwrite("moe_expert_num", &MoeConfig::moeExpertNum, "Routed experts E (a multiple of the routed ranks).")
      .def_readwrite("hidden", &MoeConfig::hidden, "Token width H.")
      .def_readwrite("top_k", &MoeConfig::topK, "Routed experts per token K.")
      .def_readwrite("max_tokens_per_rank", &MoeConfig::maxTokensPerRank,
                     "Most tokens any rank passes (the same on every rank).")
      .def_readwrite("shared_expert_num", &MoeConfig::sharedExpertNum, "Shared experts Sh, in [0, 4].")
      .def_readwrite("shared_expert_rank_num", &MoeConfig::sharedExpertRankNum,
                     "Ranks [0, S) that hold the shared experts.")
      .def_readwrite("quant_mode", &MoeConfig::quantMode, "0: rows travel in their type; 2: dynamic int8 per row.")
      .def_readwrite("expert_token_nums_type", &MoeConfig::expertTokenNumsType,
                     "1: rows per local expert; 0: their prefix sums.")
      .def_readwrite("ep_world_size", &MoeConfig::epWorldSize, "Declared world size; None: the communicator's.")
      .def_readwrite("ep_rank_id", &MoeConfig::epRankId, "Declared rank; None: the communicator's.")
      .def(
          "required_rows",
          [](const MoeConfig& c, int worldSize, int rank) {
            const vigilMoeConfig resolved = c.resolve(worldSize, rank);
            return vigilMoeRequiredRows(&resolved, rank);
          },
          py::arg("world_size"), py::arg("rank"),
          "required_rows(world_size, rank) -> int\n\n"
          "The most rows `rank` can receive (vigilMoeRequiredRows), or -1 for a layout dispatch refuses.")
      .def("local_experts", &MoeConfig::localExperts, py::arg("world_size"), py::arg("rank"),
           "local_experts(world_size, rank) -> int\n\nThe experts `rank` holds (1 on a shared-expert rank).");
}

// vigil.MoeHandle: the routing a dispatch hands to its combine.
void registerMoeHandleClass(py::module_& m) {
  py::class_<MoeHandle, std::shared_ptr<MoeHandle>>(
      m, "MoeHandle", "The routing of one moe_dispatch, for its moe_combine (vigilMoeHandle_t).")
      .def_property_readonly("recv_rows", &MoeHandle::recvRows, "Rows this rank received.")
      .def_property_readonly("tokens", &MoeHandle::bs, "This rank's tokens (bs).")
      .def("close", &MoeHandle::close, "close()\n\nFrees the routing now (otherwise when the handle is collected).");
}

// vigil.MoeDispatch: the read-only outputs of moe_dispatch.
void registerMoeDispatchClass(py::module_& m) {
  py::class_<MoeDispatch>(m, "MoeDispatch",
                          "What moe_dispatch returns: the received rows, grouped by local expert, and the handle.")
      .def_readonly("expand_x", &MoeDispatch::expandX,
                    "[recv_rows, hidden]: rows ordered by (local expert, source rank, source token); int8 when "
                    "quant_mode is 2.")
      .def_readonly("dynamic_scales", &MoeDispatch::dynamicScales,
                    "[recv_rows] float32: a row's value is int8 * scale (quant_mode 2), else None.")
      .def_readonly("expand_scales", &MoeDispatch::expandScales,
                    "[recv_rows] float32: the token's weight for the row's expert (1 for shared experts).")
      .def_readonly("expert_token_nums", &MoeDispatch::expertTokenNums,
                    "[local experts] int64: rows per local expert (prefix sums with expert_token_nums_type 0).")
      .def_readonly("ep_recv_counts", &MoeDispatch::epRecvCounts,
                    "[local experts, world size] int32: inclusive prefix sums over (local expert, source rank).")
      .def_readonly("recv_rows", &MoeDispatch::recvRows, "Rows received (len(expand_x)).")
      .def_readonly("symmetric_rows", &MoeDispatch::symmetricRows,
                    "With symmetric=True: the rows every rank's symmetric outputs hold (the same on every rank:\n"
                    "expert outputs made as comm.symmetric_empty((symmetric_rows, hidden), dtype)[:recv_rows] are\n"
                    "read in place by moe_combine); else 0.")
      .def_readonly("handle", &MoeDispatch::handle, "The MoeHandle to pass to moe_combine.");
}

// Communicator.moe_dispatch.
void registerDispatchMethod(CommClass& cls) {
  cls.def("moe_dispatch", &dispatch, py::arg("x"), py::arg("expert_ids"), py::arg("config"), py::kw_only(),
          py::arg("expert_scales") = py::none(), py::arg("active_mask") = py::none(),
          py::arg("smooth_scales") = py::none(), py::arg("dtype") = py::none(), py::arg("symmetric") = false,
          "moe_dispatch(x, expert_ids, config, *, expert_scales=None, active_mask=None, smooth_scales=None,\n"
          "             dtype=None, symmetric=False) -> MoeDispatch\n\n"
          "Collective: sends every token to the ranks holding its experts (docs/moe.md). Outputs and the\n"
          "workspace are allocated here.\n\n"
          "Parameters\n----------\n"
          "x : numpy.ndarray\n    [bs, hidden] tokens: float32, float16, or uint16 with dtype='bfloat16'.\n"
          "expert_ids : numpy.ndarray\n    [bs, top_k] int32 routed expert ids; -1 leaves a slot unused.\n"
          "config : MoeConfig\n    The layout, the same on every rank.\n"
          "expert_scales : numpy.ndarray, optional\n    [bs, top_k] float32 weights (returned per row in "
          "expand_scales).\n"
          "active_mask : numpy.ndarray, optional\n"
          "    bool/uint8, [bs] (0 drops the token) or [bs, top_k] (0 drops a routed slot).\n"
          "smooth_scales : numpy.ndarray, optional\n    [shared + routed experts, hidden] float32 (quant_mode 2).\n"
          "dtype : str, optional\n    'bfloat16' for uint16 rows.\n"
          "symmetric : bool\n    Outputs in the symmetric heap (every rank on one host): each rank writes its rows\n"
          "    straight into the peers' copies, and moe_combine reads expert outputs that are symmetric\n"
          "    arrays in place (docs/moe.md, 'On symmetric buffers').\n\n"
          "Returns\n-------\nMoeDispatch\n    expand_x, dynamic_scales, expand_scales, expert_token_nums, "
          "ep_recv_counts,\n    recv_rows and the handle for moe_combine.\n\n"
          "Raises\n------\nInvalidUsageError\n    For arrays that do not fit (VG-PY-001) or a refused layout "
          "(VG-MOE-001..004);\n"
          "    the peers then raise RemoteError (VG-MOE-006) naming this rank: all ranks return together.\n"
          "MismatchError, RemoteError\n    When ranks disagree (VG-MOE-005) or a peer refused (VG-MOE-006).");
}

// Communicator.moe_combine.
void registerCombineMethod(CommClass& cls) {
  cls.def("moe_combine", &combine, py::arg("handle"), py::arg("expert_out"), py::kw_only(),
          py::arg("expert_scales") = py::none(), py::arg("shared_expert_x") = py::none(), py::arg("out") = py::none(),
          py::arg("dtype") = py::none(),
          "moe_combine(handle, expert_out, *, expert_scales=None, shared_expert_x=None, out=None, dtype=None)\n"
          "            -> numpy.ndarray\n\n"
          "Collective: sends the expert outputs back and sums them per token:\n"
          "out[t] = sum_k w[t,k] * expert_out[row(t,k)] + shared rows + shared_expert_x[t] (in float32).\n\n"
          "Parameters\n----------\n"
          "handle : MoeHandle or MoeDispatch\n    From moe_dispatch on this communicator.\n"
          "expert_out : numpy.ndarray\n    [recv_rows, hidden] outputs, row for row of expand_x: float32, "
          "float16 or bfloat16.\n"
          "expert_scales : numpy.ndarray, optional\n    [bs, top_k] float32 weights; None: 1.\n"
          "shared_expert_x : numpy.ndarray, optional\n    [bs, hidden], expert_out's dtype, added to every "
          "active token.\n"
          "out : numpy.ndarray, optional\n    [bs, hidden], expert_out's dtype; None: a new array.\n"
          "dtype : str, optional\n    'bfloat16' for uint16 rows.\n\n"
          "Returns\n-------\nnumpy.ndarray\n    [bs, hidden] combined tokens (0 for a token with no active slot).");
}

}  // namespace

void registerMoe(py::module_& m, CommClass& cls) {
  // Each docstring starts with its own signature line. The options hold for
  // every registration below, so they live until the last one.
  py::options options;
  options.disable_function_signatures();
  registerMoeEnums(m);
  registerMoeConfigClass(m);
  registerMoeHandleClass(m);
  registerMoeDispatchClass(m);
  registerDispatchMethod(cls);
  registerCombineMethod(cls);
}

}  // namespace vigil::python
