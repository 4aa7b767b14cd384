// The collectives and point-to-point calls of vigil.Communicator on numpy
// arrays: check the arrays (layout, dtype, sizes) against the call, make the
// output, and hand the C call to Comm::issue (blocking, grouped or async).

#include <pybind11/stl.h>

#include <numeric>

#include "arrays.hpp"
#include "communicator.hpp"
#include "docstrings.hpp"

namespace py = pybind11;

namespace vigil::python {
namespace {

using CommClass = py::class_<Comm, std::shared_ptr<Comm>>;

void checkRoot(const Comm& comm, int root, const Where& where) {
  if (root < 0 || root >= comm.size()) {
    refuse("VG-API-004", where, "root " + std::to_string(root) + " is outside [0, " + std::to_string(comm.size()) + ")",
           "pass a root between 0 and size - 1, the same on every rank");
  }
}

// The input of a call, checked: its array, and the vigil type and number of
// vigil elements per array element the C call moves it as (Moved).
struct Input {
  py::array array;
  vigilDataType_t type;
  size_t scale = 1;
};

// Data movement: any dtype (those vigil has no type for move as their bytes).
Input input(const py::object& value, const char* name, const py::object& dtype, const Where& where) {
  py::array array = requireArray(value, name, where, false);
  const Moved m = movedType(array, name, parseDataType(dtype, where), where);
  return {array, m.type, m.scale};
}

// A reduction's input: a dtype the reduction is defined on.
Input reductionInput(const py::object& value, vigilRedOp_t op, const py::object& dtype, const Where& where) {
  py::array array = requireArray(value, "send", where, false);
  const Moved m = reducedType(array, "send", parseDataType(dtype, where), op, where);
  return {array, m.type, m.scale};
}

std::vector<size_t> scaled(std::vector<size_t> v, size_t scale) {
  if (scale != 1) {
    for (size_t& x : v) x *= scale;
  }
  return v;
}

size_t divided(const py::array& whole, const char* name, int parts, const Where& where) {
  if (whole.size() % parts != 0) {
    refuse("VG-PY-001", where,
           std::string(name) + " (" + describe(whole) + ") has " + std::to_string(whole.size()) +
               " elements, which the " + std::to_string(parts) + " ranks cannot share equally",
           "pass a number of elements that is a multiple of the communicator size");
  }
  return static_cast<size_t>(whole.size()) / parts;
}

// The raw pointers and type of a call, taken while the GIL is held: the C
// call runs without it and must not touch Python objects.
struct Buffers {
  const void* send = nullptr;
  void* recv = nullptr;
  vigilDataType_t type = vigilFloat32;
};

// An element-wise reduction of the whole array into an output of its shape
// (all_reduce, scan, exscan): `call(send, recv, count, type, op, comm, stream)`.
template <typename Call>
py::object elementwise(Comm& comm, const char* name, const py::object& send, const py::object& out,
                       const py::object& op, const py::object& dtype, bool asyncOp, Call call) {
  const Where where = comm.where(name);
  const vigilRedOp_t redOp = parseRedOp(op, where);
  Input in = reductionInput(send, redOp, dtype, where);
  const size_t elements = in.array.size(), count = elements * in.scale;
  py::array result = outputArray(out, in.array, elements, shapeOf(in.array), where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  return comm.issue(where.op, asyncOp, {in.array, result}, result,
                    [=](vigilComm_t c, vigilStream_t s) { return call(b.send, b.recv, count, b.type, redOp, c, s); });
}

py::object allReduce(Comm& comm, const py::object& send, const py::object& out, const py::object& op,
                     const py::object& dtype, bool asyncOp) {
  return elementwise(comm, "all_reduce", send, out, op, dtype, asyncOp, vigilAllReduce);
}

py::object broadcast(Comm& comm, const py::object& send, const py::object& out, int root, const py::object& dtype,
                     bool asyncOp) {
  const Where where = comm.where("broadcast");
  checkRoot(comm, root, where);
  if (send.is_none()) {
    if (comm.rank() == root) refuse("VG-PY-001", where, "send is None on the root", "pass the array to broadcast");
    if (out.is_none()) {
      refuse("VG-PY-001", where, "send and out are both None on a non-root rank",
             "pass out (the array to receive into) or send (an array of the same shape and dtype)");
    }
    py::array result = requireArray(out, "out", where, true);
    const Moved m = movedType(result, "out", parseDataType(dtype, where), where);
    const Buffers b{nullptr, result.mutable_data(), m.type};
    const size_t count = result.size() * m.scale;
    return comm.issue(where.op, asyncOp, {result}, result, [=](vigilComm_t c, vigilStream_t s) {
      return vigilBroadcast(nullptr, b.recv, count, b.type, root, c, s);
    });
  }
  Input in = input(send, "send", dtype, where);
  const size_t elements = in.array.size(), count = elements * in.scale;
  py::array result = outputArray(out, in.array, elements, shapeOf(in.array), where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [=](vigilComm_t c, vigilStream_t s) {
    return vigilBroadcast(b.send, b.recv, count, b.type, root, c, s);
  });
}

py::object reduce(Comm& comm, const py::object& send, const py::object& out, int root, const py::object& op,
                  const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("reduce");
  checkRoot(comm, root, where);
  const vigilRedOp_t redOp = parseRedOp(op, where);
  Input in = reductionInput(send, redOp, dtype, where);
  const size_t elements = in.array.size(), count = elements * in.scale;
  const bool isRoot = comm.rank() == root;
  // Only the root receives; elsewhere out is used only when given (in place).
  py::object result = py::none();
  Buffers b{in.array.data(), nullptr, in.type};
  if (isRoot || !out.is_none()) {
    py::array array = outputArray(out, in.array, elements, shapeOf(in.array), where);
    b.recv = array.mutable_data();
    result = array;
  }
  py::object returned = isRoot ? result : py::none();
  return comm.issue(where.op, asyncOp, {in.array, result}, returned, [=](vigilComm_t c, vigilStream_t s) {
    return vigilReduce(b.send, b.recv, count, b.type, redOp, root, c, s);
  });
}

py::object allGather(Comm& comm, const py::object& send, const py::object& out, const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("all_gather");
  Input in = input(send, "send", dtype, where);
  const size_t elements = in.array.size(), count = elements * in.scale;
  py::array result = outputArray(out, in.array, elements * comm.size(), stackedShape(in.array, comm.size()), where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [=](vigilComm_t c, vigilStream_t s) {
    return vigilAllGather(b.send, b.recv, count, b.type, c, s);
  });
}

py::object reduceScatter(Comm& comm, const py::object& send, const py::object& out, const py::object& op,
                         const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("reduce_scatter");
  const vigilRedOp_t redOp = parseRedOp(op, where);
  Input in = reductionInput(send, redOp, dtype, where);
  const size_t elements = divided(in.array, "send", comm.size(), where), count = elements * in.scale;
  py::array result = outputArray(out, in.array, elements, shareShape(in.array, comm.size()), where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [=](vigilComm_t c, vigilStream_t s) {
    return vigilReduceScatter(b.send, b.recv, count, b.type, redOp, c, s);
  });
}

py::object allToAll(Comm& comm, const py::object& send, const py::object& out, const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("all_to_all");
  Input in = input(send, "send", dtype, where);
  const size_t count = divided(in.array, "send", comm.size(), where) * in.scale;
  py::array result = outputArray(out, in.array, in.array.size(), shapeOf(in.array), where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  return comm.issue(where.op, asyncOp, {in.array, result}, result,
                    [=](vigilComm_t c, vigilStream_t s) { return vigilAllToAll(b.send, b.recv, count, b.type, c, s); });
}

// Displacements given, or packed (the exclusive prefix sums of the counts).
std::vector<size_t> displacements(const py::object& given, const std::vector<size_t>& counts, const char* name, int n,
                                  const Where& where) {
  if (!given.is_none()) return countList(given, name, n, where);
  std::vector<size_t> packed(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), packed.begin(), size_t{0});
  return packed;
}

// The elements [displ, displ + count) of every rank must lie inside the array.
size_t extent(const std::vector<size_t>& counts, const std::vector<size_t>& displs) {
  size_t end = 0;
  for (size_t r = 0; r < counts.size(); ++r) {
    if (counts[r] > 0) end = std::max(end, displs[r] + counts[r]);
  }
  return end;
}

// The blocks that send_counts and send_displs lay out lie inside `send`.
void requireSendInside(const std::vector<size_t>& counts, const std::vector<size_t>& displs, const py::array& send,
                       const Where& where) {
  const size_t end = extent(counts, displs);
  if (end > static_cast<size_t>(send.size())) {
    refuse("VG-PY-001", where,
           "send_counts and send_displs reach element " + std::to_string(end) + " but send (" + describe(send) +
               ") has " + std::to_string(send.size()),
           "pass counts and displacements that stay inside send");
  }
}

py::object allToAllV(Comm& comm, const py::object& send, const py::object& sendCounts, const py::object& recvCounts,
                     const py::object& out, const py::object& sendDispls, const py::object& recvDispls,
                     const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("all_to_all_v");
  const int n = comm.size();
  Input in = input(send, "send", dtype, where);
  const std::vector<size_t> sc = countList(sendCounts, "send_counts", n, where);
  const std::vector<size_t> sd = displacements(sendDispls, sc, "send_displs", n, where);
  const std::vector<size_t> rc = countList(recvCounts, "recv_counts", n, where);
  const std::vector<size_t> rd = displacements(recvDispls, rc, "recv_displs", n, where);
  requireSendInside(sc, sd, in.array, where);
  const size_t recvEnd = extent(rc, rd);
  py::array result;
  if (out.is_none()) {
    result = py::array(in.array.dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(recvEnd)});
  } else {
    result = requireArray(out, "out", where, true);
    requireSameDtype(result, in.array, where);
    if (recvEnd > static_cast<size_t>(result.size())) {
      refuse("VG-PY-001", where,
             "recv_counts and recv_displs reach element " + std::to_string(recvEnd) + " but out (" + describe(result) +
                 ") has " + std::to_string(result.size()),
             "pass an out array that holds every rank's block (or out=None)");
    }
  }
  // vigil copies the counts when it queues the operation (group or stream):
  // they need to live only for the call.
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  const std::vector<size_t> scv = scaled(sc, in.scale), sdv = scaled(sd, in.scale), rcv = scaled(rc, in.scale),
                            rdv = scaled(rd, in.scale);
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [&](vigilComm_t c, vigilStream_t s) {
    return vigilAllToAllV(b.send, scv.data(), sdv.data(), b.recv, rcv.data(), rdv.data(), b.type, c, s);
  });
}

py::object gather(Comm& comm, const py::object& send, const py::object& out, int root, const py::object& dtype,
                  bool asyncOp) {
  const Where where = comm.where("gather");
  checkRoot(comm, root, where);
  Input in = input(send, "send", dtype, where);
  const size_t elements = in.array.size(), count = elements * in.scale;
  Buffers b{in.array.data(), nullptr, in.type};
  if (comm.rank() != root) {  // only the root receives
    return comm.issue(where.op, asyncOp, {in.array}, py::none(), [=](vigilComm_t c, vigilStream_t s) {
      return vigilGather(b.send, nullptr, count, b.type, root, c, s);
    });
  }
  py::array result = outputArray(out, in.array, elements * comm.size(), stackedShape(in.array, comm.size()), where);
  b.recv = result.mutable_data();
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [=](vigilComm_t c, vigilStream_t s) {
    return vigilGather(b.send, b.recv, count, b.type, root, c, s);
  });
}

py::object scatter(Comm& comm, const py::object& send, const py::object& out, int root, const py::object& dtype,
                   bool asyncOp) {
  const Where where = comm.where("scatter");
  checkRoot(comm, root, where);
  const bool isRoot = comm.rank() == root;
  if (send.is_none()) {
    if (isRoot) refuse("VG-PY-001", where, "send is None on the root", "pass the array to scatter on the root");
    if (out.is_none()) {
      refuse("VG-PY-001", where, "send and out are both None on a non-root rank",
             "pass out (this rank's share), or send (an array shaped like the root's)");
    }
    py::array result = requireArray(out, "out", where, true);
    const Moved m = movedType(result, "out", parseDataType(dtype, where), where);
    const Buffers b{nullptr, result.mutable_data(), m.type};
    const size_t count = result.size() * m.scale;
    return comm.issue(where.op, asyncOp, {result}, result, [=](vigilComm_t c, vigilStream_t s) {
      return vigilScatter(nullptr, b.recv, count, b.type, root, c, s);
    });
  }
  Input in = input(send, "send", dtype, where);
  const size_t elements = divided(in.array, "send", comm.size(), where), count = elements * in.scale;
  py::array result = outputArray(out, in.array, elements, shareShape(in.array, comm.size()), where);
  // Only the root's send is read; elsewhere it gives the shape of out.
  const Buffers b{isRoot ? in.array.data() : nullptr, result.mutable_data(), in.type};
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [=](vigilComm_t c, vigilStream_t s) {
    return vigilScatter(b.send, b.recv, count, b.type, root, c, s);
  });
}

// An output of `elements` (flat when new), or the given one if it has room.
py::array flatOutput(const py::object& out, const py::array& like, size_t elements, const char* what,
                     const Where& where) {
  if (out.is_none()) return py::array(like.dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(elements)});
  py::array result = requireArray(out, "out", where, true);
  requireSameDtype(result, like, where);
  if (elements > static_cast<size_t>(result.size())) {
    refuse("VG-PY-001", where,
           std::string(what) + " reach element " + std::to_string(elements) + " but out (" + describe(result) +
               ") has " + std::to_string(result.size()),
           "pass an out array that holds every block (or out=None)");
  }
  return result;
}

// counts[rank] against this rank's own number of elements.
void requireOwnCount(const std::vector<size_t>& counts, const char* name, int rank, size_t own, const char* ownName,
                     const Where& where) {
  if (counts[static_cast<size_t>(rank)] != own) {
    refuse("VG-API-023", where,
           std::string(name) + "[" + std::to_string(rank) + "] = " + std::to_string(counts[static_cast<size_t>(rank)]) +
               " but " + ownName + " has " + std::to_string(own) + " elements",
           "make the count of this rank's own block equal to the size of its array");
  }
}

py::object allGatherV(Comm& comm, const py::object& send, const py::object& recvCounts, const py::object& out,
                      const py::object& recvDispls, const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("all_gather_v");
  const int n = comm.size();
  Input in = input(send, "send", dtype, where);
  const std::vector<size_t> rc = countList(recvCounts, "recv_counts", n, where);
  const std::vector<size_t> rd = displacements(recvDispls, rc, "recv_displs", n, where);
  const size_t elements = in.array.size(), count = elements * in.scale;
  requireOwnCount(rc, "recv_counts", comm.rank(), elements, "send", where);
  py::array result = flatOutput(out, in.array, extent(rc, rd), "recv_counts and recv_displs", where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  const std::vector<size_t> rcv = scaled(rc, in.scale), rdv = scaled(rd, in.scale);
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [&](vigilComm_t c, vigilStream_t s) {
    return vigilAllGatherV(b.send, count, b.recv, rcv.data(), rdv.data(), b.type, c, s);
  });
}

py::object gatherV(Comm& comm, const py::object& send, const py::object& recvCounts, const py::object& out, int root,
                   const py::object& recvDispls, const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("gather_v");
  checkRoot(comm, root, where);
  Input in = input(send, "send", dtype, where);
  const size_t elements = in.array.size(), count = elements * in.scale;
  if (comm.rank() != root) {  // the counts, displacements and output are the root's
    const Buffers b{in.array.data(), nullptr, in.type};
    return comm.issue(where.op, asyncOp, {in.array}, py::none(), [=](vigilComm_t c, vigilStream_t s) {
      return vigilGatherV(b.send, count, nullptr, nullptr, nullptr, b.type, root, c, s);
    });
  }
  if (recvCounts.is_none()) {
    refuse("VG-PY-001", where, "recv_counts is None on the root", "pass one element count per rank on the root");
  }
  const int n = comm.size();
  const std::vector<size_t> rc = countList(recvCounts, "recv_counts", n, where);
  const std::vector<size_t> rd = displacements(recvDispls, rc, "recv_displs", n, where);
  requireOwnCount(rc, "recv_counts", root, elements, "send", where);
  py::array result = flatOutput(out, in.array, extent(rc, rd), "recv_counts and recv_displs", where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  const std::vector<size_t> rcv = scaled(rc, in.scale), rdv = scaled(rd, in.scale);
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [&](vigilComm_t c, vigilStream_t s) {
    return vigilGatherV(b.send, count, b.recv, rcv.data(), rdv.data(), b.type, root, c, s);
  });
}

py::object scatterV(Comm& comm, const py::object& send, const py::object& sendCounts, const py::object& out, int root,
                    const py::object& sendDispls, const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("scatter_v");
  checkRoot(comm, root, where);
  const int n = comm.size(), rank = comm.rank();
  const bool isRoot = rank == root;
  if (isRoot && (send.is_none() || sendCounts.is_none())) {
    refuse("VG-PY-001", where, "send or send_counts is None on the root",
           "pass the array to scatter and one element count per rank on the root");
  }
  const std::vector<size_t> sc =
      sendCounts.is_none() ? std::vector<size_t>{} : countList(sendCounts, "send_counts", n, where);
  py::array result;
  Moved m{};
  if (!out.is_none()) {
    result = requireArray(out, "out", where, true);
    m = movedType(result, "out", parseDataType(dtype, where), where);
    if (!sc.empty()) requireOwnCount(sc, "send_counts", rank, static_cast<size_t>(result.size()), "out", where);
  } else if (!sc.empty() && !send.is_none()) {
    Input in = input(send, "send", dtype, where);
    m = {in.type, in.scale};
    result =
        py::array(in.array.dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(sc[static_cast<size_t>(rank)])});
  } else {
    refuse("VG-PY-001", where, "out is None and this rank cannot tell its block's size",
           "pass out (room for this rank's block), or send_counts and send (an array of the root's dtype)");
  }
  const size_t count = result.size() * m.scale;
  if (!isRoot) {
    const Buffers b{nullptr, result.mutable_data(), m.type};
    return comm.issue(where.op, asyncOp, {result}, result, [=](vigilComm_t c, vigilStream_t s) {
      return vigilScatterV(nullptr, nullptr, nullptr, b.recv, count, b.type, root, c, s);
    });
  }
  Input in = input(send, "send", dtype, where);
  requireSameDtype(result, in.array, where);
  const std::vector<size_t> sd = displacements(sendDispls, sc, "send_displs", n, where);
  requireSendInside(sc, sd, in.array, where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  const std::vector<size_t> scv = scaled(sc, in.scale), sdv = scaled(sd, in.scale);
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [&](vigilComm_t c, vigilStream_t s) {
    return vigilScatterV(b.send, scv.data(), sdv.data(), b.recv, count, b.type, root, c, s);
  });
}

py::object reduceScatterV(Comm& comm, const py::object& send, const py::object& recvCounts, const py::object& out,
                          const py::object& op, const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("reduce_scatter_v");
  const int n = comm.size();
  const vigilRedOp_t redOp = parseRedOp(op, where);
  Input in = reductionInput(send, redOp, dtype, where);
  const std::vector<size_t> rc = countList(recvCounts, "recv_counts", n, where);
  const size_t total = std::accumulate(rc.begin(), rc.end(), size_t{0});
  if (total != static_cast<size_t>(in.array.size())) {
    refuse("VG-PY-001", where,
           "recv_counts add up to " + std::to_string(total) + " elements but send (" + describe(in.array) + ") has " +
               std::to_string(in.array.size()),
           "pass counts whose sum is the size of send (every rank's block, in rank order)");
  }
  py::array result = flatOutput(out, in.array, rc[static_cast<size_t>(comm.rank())], "recv_counts", where);
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  const std::vector<size_t> rcv = scaled(rc, in.scale);
  return comm.issue(where.op, asyncOp, {in.array, result}, result, [&](vigilComm_t c, vigilStream_t s) {
    return vigilReduceScatterV(b.send, b.recv, rcv.data(), b.type, redOp, c, s);
  });
}

py::object scan(Comm& comm, const py::object& send, const py::object& out, const py::object& op,
                const py::object& dtype, bool asyncOp, bool inclusive) {
  return inclusive ? elementwise(comm, "scan", send, out, op, dtype, asyncOp, vigilScan)
                   : elementwise(comm, "exscan", send, out, op, dtype, asyncOp, vigilExscan);
}

py::object barrier(Comm& comm, bool asyncOp) {
  return comm.issue("barrier", asyncOp, {}, py::none(),
                    [](vigilComm_t c, vigilStream_t s) { return vigilBarrier(c, s); });
}

py::object send(Comm& comm, const py::object& array, int peer, const py::object& tag, const py::object& dtype,
                bool asyncOp) {
  const Where where = comm.where("send");
  Input in = input(array, "array", dtype, where);
  const size_t count = in.array.size() * in.scale;
  const Buffers b{in.array.data(), nullptr, in.type};
  if (tag.is_none()) {
    return comm.issue(where.op, asyncOp, {in.array}, py::none(),
                      [=](vigilComm_t c, vigilStream_t s) { return vigilSend(b.send, count, b.type, peer, c, s); });
  }
  const int t = tag.cast<int>();
  if (asyncOp && !groupOpen()) {
    return comm.issueRequest(where.op, {in.array}, py::none(), nullptr, [=](vigilComm_t c, vigilRequest_t* r) {
      return vigilIsendTag(b.send, count, b.type, peer, t, c, r);
    });
  }
  return comm.issue(where.op, asyncOp, {in.array}, py::none(),
                    [=](vigilComm_t c, vigilStream_t s) { return vigilSendTag(b.send, count, b.type, peer, t, c, s); });
}

// tag=None and no status: untagged (vigilRecv), unless the source is any.
py::object recv(Comm& comm, const py::object& out, int peer, const py::object& tag, const py::object& status,
                const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("recv");
  py::array result = requireArray(out, "out", where, true);
  const Moved m = movedType(result, "out", parseDataType(dtype, where), where);
  const Buffers b{nullptr, result.mutable_data(), m.type};
  const size_t count = result.size() * m.scale;
  if (tag.is_none() && status.is_none() && peer != VIGIL_ANY_SOURCE) {
    return comm.issue(where.op, asyncOp, {result}, result,
                      [=](vigilComm_t c, vigilStream_t s) { return vigilRecv(b.recv, count, b.type, peer, c, s); });
  }
  const int t = tag.is_none() ? VIGIL_ANY_TAG : tag.cast<int>();
  vigilStatus* st = status.is_none() ? nullptr : &status.cast<Status&>().value;
  if (asyncOp && !groupOpen()) {
    return comm.issueRequest(where.op, {result, status}, result, st, [=](vigilComm_t c, vigilRequest_t* r) {
      return vigilIrecvTag(b.recv, count, b.type, peer, t, c, r);
    });
  }
  return comm.issue(where.op, asyncOp, {result, status}, result, [=](vigilComm_t c, vigilStream_t s) {
    return vigilRecvTag(b.recv, count, b.type, peer, t, c, st, s);
  });
}

py::object sendRecv(Comm& comm, const py::object& send, int dest, const py::object& out, int source, int sendTag,
                    int recvTag, const py::object& status, const py::object& dtype, bool asyncOp) {
  const Where where = comm.where("sendrecv");
  Input in = input(send, "send", dtype, where);
  py::array result = outputArray(out, in.array, in.array.size(), shapeOf(in.array), where);
  const Moved m = movedType(result, "out", parseDataType(dtype, where), where);
  const size_t sendCount = in.array.size() * in.scale, recvCount = result.size() * m.scale;
  const Buffers b{in.array.data(), result.mutable_data(), in.type};
  const vigilDataType_t recvType = m.type;
  vigilStatus* st = status.is_none() ? nullptr : &status.cast<Status&>().value;
  return comm.issue(where.op, asyncOp, {in.array, result, status}, result, [=](vigilComm_t c, vigilStream_t s) {
    return vigilSendRecv(b.send, sendCount, b.type, dest, sendTag, b.recv, recvCount, recvType, source, recvTag, c, st,
                         s);
  });
}

py::object probe(Comm& comm, int source, int tag, bool wait) {
  const Where where = comm.where(wait ? "probe" : "iprobe");
  comm.drain(where.op);
  vigilComm_t c = comm.handle(where.op);
  Status status;
  int flag = 1;
  const vigilResult_t rc = comm.interruptible(where.op, [&] {
    return wait ? vigilProbe(source, tag, c, &status.value) : vigilIprobe(source, tag, c, &flag, &status.value);
  });
  check(rc, c);
  if (!flag) return py::none();
  return py::cast(status);
}

}  // namespace

void registerCollectives(CommClass& cls) {
  py::options options;
  options.disable_function_signatures();
  const auto kw = py::kw_only();
  cls.def("all_reduce", &allReduce, doc::kAllReduce.c_str(), py::arg("send"), py::arg("out") = py::none(), kw,
          py::arg("op") = "sum", py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("broadcast", &broadcast, doc::kBroadcast.c_str(), py::arg("send"), py::arg("out") = py::none(), kw,
          py::arg("root") = 0, py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("reduce", &reduce, doc::kReduce.c_str(), py::arg("send"), py::arg("out") = py::none(), kw,
          py::arg("root") = 0, py::arg("op") = "sum", py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("all_gather", &allGather, doc::kAllGather.c_str(), py::arg("send"), py::arg("out") = py::none(), kw,
          py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("reduce_scatter", &reduceScatter, doc::kReduceScatter.c_str(), py::arg("send"), py::arg("out") = py::none(),
          kw, py::arg("op") = "sum", py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("all_to_all", &allToAll, doc::kAllToAll.c_str(), py::arg("send"), py::arg("out") = py::none(), kw,
          py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("all_to_all_v", &allToAllV, doc::kAllToAllV.c_str(), py::arg("send"), py::arg("send_counts"),
          py::arg("recv_counts"), py::arg("out") = py::none(), kw, py::arg("send_displs") = py::none(),
          py::arg("recv_displs") = py::none(), py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("gather", &gather, doc::kGather.c_str(), py::arg("send"), py::arg("out") = py::none(), kw,
          py::arg("root") = 0, py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("scatter", &scatter, doc::kScatter.c_str(), py::arg("send"), py::arg("out") = py::none(), kw,
          py::arg("root") = 0, py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("all_gather_v", &allGatherV, doc::kAllGatherV.c_str(), py::arg("send"), py::arg("recv_counts"),
          py::arg("out") = py::none(), kw, py::arg("recv_displs") = py::none(), py::arg("dtype") = py::none(),
          py::arg("async_op") = false);
  cls.def("gather_v", &gatherV, doc::kGatherV.c_str(), py::arg("send"), py::arg("recv_counts") = py::none(),
          py::arg("out") = py::none(), kw, py::arg("root") = 0, py::arg("recv_displs") = py::none(),
          py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("scatter_v", &scatterV, doc::kScatterV.c_str(), py::arg("send") = py::none(),
          py::arg("send_counts") = py::none(), py::arg("out") = py::none(), kw, py::arg("root") = 0,
          py::arg("send_displs") = py::none(), py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("reduce_scatter_v", &reduceScatterV, doc::kReduceScatterV.c_str(), py::arg("send"), py::arg("recv_counts"),
          py::arg("out") = py::none(), kw, py::arg("op") = "sum", py::arg("dtype") = py::none(),
          py::arg("async_op") = false);
  cls.def(
      "scan",
      [](Comm& c, const py::object& send, const py::object& out, const py::object& op, const py::object& dtype,
         bool asyncOp) { return scan(c, send, out, op, dtype, asyncOp, true); },
      doc::kScan.c_str(), py::arg("send"), py::arg("out") = py::none(), kw, py::arg("op") = "sum",
      py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def(
      "exscan",
      [](Comm& c, const py::object& send, const py::object& out, const py::object& op, const py::object& dtype,
         bool asyncOp) { return scan(c, send, out, op, dtype, asyncOp, false); },
      doc::kExscan.c_str(), py::arg("send"), py::arg("out") = py::none(), kw, py::arg("op") = "sum",
      py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("barrier", &barrier, doc::kBarrier.c_str(), kw, py::arg("async_op") = false);
  cls.def("send", &send, doc::kSend.c_str(), py::arg("array"), py::arg("peer"), kw, py::arg("tag") = py::none(),
          py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def("recv", &recv, doc::kRecv.c_str(), py::arg("out"), py::arg("peer") = VIGIL_ANY_SOURCE, kw,
          py::arg("tag") = py::none(), py::arg("status") = py::none(), py::arg("dtype") = py::none(),
          py::arg("async_op") = false);
  cls.def("sendrecv", &sendRecv, doc::kSendRecv.c_str(), py::arg("send"), py::arg("dest"), py::arg("out") = py::none(),
          py::arg("source") = VIGIL_ANY_SOURCE, kw, py::arg("sendtag") = 0, py::arg("recvtag") = VIGIL_ANY_TAG,
          py::arg("status") = py::none(), py::arg("dtype") = py::none(), py::arg("async_op") = false);
  cls.def(
      "probe", [](Comm& c, int source, int tag) { return probe(c, source, tag, true); }, doc::kProbe.c_str(),
      py::arg("source") = VIGIL_ANY_SOURCE, py::arg("tag") = VIGIL_ANY_TAG);
  cls.def(
      "iprobe", [](Comm& c, int source, int tag) { return probe(c, source, tag, false); }, doc::kIprobe.c_str(),
      py::arg("source") = VIGIL_ANY_SOURCE, py::arg("tag") = VIGIL_ANY_TAG);
}

}  // namespace vigil::python
