#pragma once
// The docstrings of vigil.Communicator's operations: what help() shows.
// Built once from shared paragraphs (parameters every operation takes).

#include <string>

namespace vigil::python::doc {

inline const std::string kDtype =
    "dtype : str or DataType, optional\n"
    "    Only for bfloat16 (numpy has none): dtype='bfloat16' with uint16 arrays holding bfloat16 bit\n"
    "    patterns. Otherwise the arrays' dtype is used: int8, uint8, int32, uint32, int64, uint64,\n"
    "    float16, float32, float64 (ml_dtypes.bfloat16 arrays are bfloat16 too).\n";
inline const std::string kAsync =
    "async_op : bool\n"
    "    False (default): the call returns when the operation is done. True: it returns a Work at once\n"
    "    (the operation runs in issue order on this communicator's stream); Work.wait() returns what the\n"
    "    call would have returned. The Work holds the arrays until the operation completed.\n";
inline const std::string kRaises =
    "\nRaises\n------\n"
    "InvalidUsageError\n"
    "    Before anything is sent, for arrays or arguments that do not fit the call (VG-PY-001, VG-API-*).\n"
    "Error\n"
    "    A subclass naming the cause when the operation fails on the wire: MismatchError (ranks called\n"
    "    different operations), TimeoutError, RemoteError (a peer died or left), AbortedError, ...\n";
inline const std::string kRoot = "root : int\n    The rank that holds the data (default 0), the same on every rank.\n";
inline const std::string kOp =
    "op : str or ReduceOp\n    'sum' (default), 'prod', 'max', 'min', 'avg'; on integers also 'band', 'bor', 'bxor',\n"
    "    'land', 'lor', 'lxor'.\n";

inline std::string out(const std::string& what) {
  return "out : numpy.ndarray, optional\n"
         "    Where the result is written: C-contiguous, writeable, of the input's dtype, with\n    " +
         what + ".\n    None (default): a new array.\n";
}

inline std::string returns(const std::string& type, const std::string& what) {
  return "\nReturns\n-------\n" + type + "\n    " + what + "\n";
}

inline const std::string kParameters = "Parameters\n----------\n";

inline const std::string kAllReduce =
    "all_reduce(send, out=None, *, op='sum', dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Reduces `send` element-wise over all ranks; every rank gets the same result (bit for bit).\n\n" +
    kParameters + "send : numpy.ndarray\n    This rank's contribution: C-contiguous, any shape.\n" +
    out("as many elements as send") + "    out=send reduces in place.\n" + kOp + kDtype + kAsync +
    returns("numpy.ndarray", "The result (`out`, or a new array shaped like `send`).") + kRaises +
    "\nExamples\n--------\n"
    ">>> total = comm.all_reduce(np.arange(4, dtype=np.float32))   # a new array\n"
    ">>> comm.all_reduce(grad, grad, op='avg')                      # in place\n";

inline const std::string kBroadcast =
    "broadcast(send, out=None, *, root=0, dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Copies the root's `send` to every rank.\n\n" +
    kParameters +
    "send : numpy.ndarray or None\n"
    "    The data on the root. Elsewhere it is not read: it only gives the shape and dtype of a new\n"
    "    output, and may be None when `out` is given.\n" +
    out("as many elements as the root's send") + "    out=send broadcasts in place.\n" + kRoot + kDtype + kAsync +
    returns("numpy.ndarray", "The root's data, on every rank.") + kRaises +
    "\nExamples\n--------\n"
    ">>> weights = comm.broadcast(weights, root=0)\n"
    ">>> comm.broadcast(x if comm.rank == 0 else None, out=x)   # in place, x allocated on every rank\n";

inline const std::string kReduce =
    "reduce(send, out=None, *, root=0, op='sum', dtype=None, async_op=False) -> numpy.ndarray | None | Work\n\n"
    "Reduces `send` element-wise over all ranks into the root.\n\n" +
    kParameters + "send : numpy.ndarray\n    This rank's contribution.\n" +
    out("as many elements as send; used on the root (elsewhere only for out=send, in place)") + kRoot + kOp + kDtype +
    kAsync + returns("numpy.ndarray or None", "The result on the root; None on the other ranks.") + kRaises;

inline const std::string kAllGather =
    "all_gather(send, out=None, *, dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Gathers every rank's `send` on every rank, in rank order.\n\n" +
    kParameters + "send : numpy.ndarray\n    This rank's block (the same size on every rank).\n" +
    out("size * send.size elements; a new one has shape (size, *send.shape)") +
    "    In place: send = out[rank] (the view of out's block of this rank).\n" + kDtype + kAsync +
    returns("numpy.ndarray", "Block r is rank r's send.") + kRaises +
    "\nExamples\n--------\n"
    ">>> comm.all_gather(np.array([comm.rank]))   # array([[0], [1], [2], [3]]) on 4 ranks\n";

inline const std::string kReduceScatter =
    "reduce_scatter(send, out=None, *, op='sum', dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Reduces `send` element-wise over all ranks and leaves block r of the result on rank r.\n\n" +
    kParameters +
    "send : numpy.ndarray\n    size equal blocks (its number of elements is a multiple of the rank count).\n" +
    out("send.size / size elements; a new one has shape send.shape[1:] when send.shape[0] == size,\n"
        "    else (send.size // size,)") +
    "    In place: out = the view of send's block of this rank.\n" + kOp + kDtype + kAsync +
    returns("numpy.ndarray", "This rank's block of the reduced array.") + kRaises;

inline const std::string kAllToAll =
    "all_to_all(send, out=None, *, dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Sends block r of `send` to rank r; block r of the result is what rank r sent to this rank.\n\n" +
    kParameters +
    "send : numpy.ndarray\n    size equal blocks (its number of elements is a multiple of the rank count).\n" +
    out("as many elements as send; a new one is shaped like send") + kDtype + kAsync +
    returns("numpy.ndarray", "The received blocks, in rank order.") + kRaises;

inline const std::string kAllToAllV =
    "all_to_all_v(send, send_counts, recv_counts, out=None, *, send_displs=None, recv_displs=None,\n"
    "             dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "All-to-all with a different number of elements per pair of ranks.\n\n" +
    kParameters +
    "send : numpy.ndarray\n    The elements to send, read as a flat vector.\n"
    "send_counts, recv_counts : sequence of int\n"
    "    One element count per rank: send_counts[r] elements go to rank r, recv_counts[r] come from it.\n"
    "    Each pair of ranks must agree (MismatchError, VG-OP-003, otherwise).\n"
    "send_displs, recv_displs : sequence of int, optional\n"
    "    Where each rank's block starts (in elements). None: packed, the running sums of the counts.\n" +
    out("room for every received block (flat)") + kDtype + kAsync +
    returns("numpy.ndarray", "The received elements (a new array is flat).") + kRaises;

inline const std::string kAllGatherV =
    "all_gather_v(send, recv_counts, out=None, *, recv_displs=None, dtype=None, async_op=False)\n"
    "    -> numpy.ndarray | Work\n\n"
    "All-gather of blocks of different sizes (MPI_Allgatherv): rank r's `send` lands at recv_displs[r].\n\n" +
    kParameters + "send : numpy.ndarray\n    This rank's block, read as a flat vector.\n" +
    "recv_counts : sequence of int\n"
    "    One element count per rank, the same on every rank; recv_counts[rank] is send.size\n"
    "    (VG-API-023 otherwise).\n"
    "recv_displs : sequence of int, optional\n"
    "    Where each rank's block starts (in elements). None: packed, the running sums of the counts.\n" +
    out("room for every block (flat)") + kDtype + kAsync +
    returns("numpy.ndarray", "Every rank's block (a new array is flat).") + kRaises;

inline const std::string kGatherV =
    "gather_v(send, recv_counts=None, out=None, *, root=0, recv_displs=None, dtype=None, async_op=False)\n"
    "    -> numpy.ndarray | None | Work\n\n"
    "Gathers blocks of different sizes on the root (MPI_Gatherv).\n\n" +
    kParameters + "send : numpy.ndarray\n    This rank's block, read as a flat vector.\n" +
    "recv_counts, recv_displs : sequence of int\n"
    "    Read on the root only: one element count per rank, and where each block starts\n"
    "    (None: packed).\n" +
    out("room for every block on the root (flat)") + kRoot + kDtype + kAsync +
    returns("numpy.ndarray or None", "The gathered blocks on the root; None on the other ranks.") + kRaises;

inline const std::string kScatterV =
    "scatter_v(send=None, send_counts=None, out=None, *, root=0, send_displs=None, dtype=None,\n"
    "          async_op=False) -> numpy.ndarray | Work\n\n"
    "Sends the root's block r (send_counts[r] elements at send_displs[r]) to rank r (MPI_Scatterv).\n\n" +
    kParameters +
    "send : numpy.ndarray or None\n    The blocks, on the root; elsewhere it gives the dtype of a new output.\n"
    "send_counts, send_displs : sequence of int\n"
    "    Needed on the root. Elsewhere send_counts (with send) sizes a new output.\n" +
    out("this rank's block; needed where send_counts and send are not given") + kRoot + kDtype + kAsync +
    returns("numpy.ndarray", "This rank's block.") + kRaises;

inline const std::string kReduceScatterV =
    "reduce_scatter_v(send, recv_counts, out=None, *, op='sum', dtype=None, async_op=False)\n"
    "    -> numpy.ndarray | Work\n\n"
    "Reduces every rank's `send` and gives rank r its block of recv_counts[r] elements\n"
    "(MPI_Reduce_scatter): the blocks lie one after another in rank order.\n\n" +
    kParameters + "send : numpy.ndarray\n    sum(recv_counts) elements, read as a flat vector.\n" +
    "recv_counts : sequence of int\n    One element count per rank, the same on every rank.\n" + kOp +
    out("recv_counts[rank] elements (flat)") + kDtype + kAsync +
    returns("numpy.ndarray", "This rank's reduced block.") + kRaises;

inline const std::string kScan =
    "scan(send, out=None, *, op='sum', dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Inclusive prefix reduction (MPI_Scan): rank r gets send of ranks 0..r reduced element-wise.\n\n" +
    kParameters + "send : numpy.ndarray\n    This rank's contribution (the same size on every rank).\n" + kOp +
    out("send.size elements; may be send itself") + kDtype + kAsync +
    returns("numpy.ndarray", "The reduction over ranks 0..rank.") + kRaises;

inline const std::string kExscan =
    "exscan(send, out=None, *, op='sum', dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Exclusive prefix reduction (MPI_Exscan): rank r gets send of ranks 0..r-1 reduced; rank 0 gets\n"
    "the operation's identity (0 for sum, 1 for prod, the lowest value for max, ...).\n\n" +
    kParameters + "send : numpy.ndarray\n    This rank's contribution (the same size on every rank).\n" + kOp +
    out("send.size elements; may be send itself") + kDtype + kAsync +
    returns("numpy.ndarray", "The reduction over ranks 0..rank-1.") + kRaises;

inline const std::string kGather =
    "gather(send, out=None, *, root=0, dtype=None, async_op=False) -> numpy.ndarray | None | Work\n\n"
    "Gathers every rank's `send` on the root, in rank order.\n\n" +
    kParameters + "send : numpy.ndarray\n    This rank's block (the same size on every rank).\n" +
    out("size * send.size elements, used on the root; a new one has shape (size, *send.shape)") + kRoot + kDtype +
    kAsync + returns("numpy.ndarray or None", "The gathered blocks on the root; None on the other ranks.") + kRaises;

inline const std::string kScatter =
    "scatter(send, out=None, *, root=0, dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Sends block r of the root's `send` to rank r.\n\n" +
    kParameters +
    "send : numpy.ndarray or None\n"
    "    On the root: size equal blocks. Elsewhere it is not read: it gives the shape of a new output\n"
    "    (shaped like the root's), and may be None when `out` is given.\n" +
    out("one block's number of elements; a new one has shape send.shape[1:] when\n"
        "    send.shape[0] == size, else (send.size // size,)") +
    kRoot + kDtype + kAsync + returns("numpy.ndarray", "This rank's block.") + kRaises;

inline const std::string kBarrier =
    "barrier(*, async_op=False) -> None | Work\n\n"
    "Returns when every rank has called barrier.\n\n" +
    kParameters + kAsync + kRaises;

inline const std::string kSend =
    "send(array, peer, *, tag=None, dtype=None, async_op=False) -> None | Work\n\n"
    "Sends `array` to rank `peer`. Without a tag, the receiver calls recv without a tag, with the\n"
    "same number of elements and dtype (NCCL's ordered send). With a tag (an int >= 0, no limit),\n"
    "the receiver matches it by source and tag as in MPI: recv(out, peer, tag=...) takes it, or a\n"
    "receive from vigil.ANY_SOURCE / with vigil.ANY_TAG; it may come before its receive is posted.\n"
    "Inside vigil.group() sends and receives are issued together (no deadlock for exchanges).\n\n" +
    kParameters +
    "array : numpy.ndarray\n    The elements to send (C-contiguous).\n"
    "peer : int\n    The receiving rank.\n"
    "tag : int or None\n    The message's tag (None: untagged).\n" +
    kDtype + kAsync + kRaises;

inline const std::string kRecv =
    "recv(out, peer=vigil.ANY_SOURCE, *, tag=None, status=None, dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Receives into `out`. Without tag and status, from rank `peer`'s next untagged send. With a tag\n"
    "(or vigil.ANY_TAG), a status, or peer=vigil.ANY_SOURCE: the first tagged message that matches\n"
    "(MPI's rules); it may hold fewer elements than `out` (the status says how many), not more.\n"
    "Inside vigil.group() `out` is written when the group ends.\n\n" +
    kParameters +
    "out : numpy.ndarray\n    Where the elements go: C-contiguous, writeable, the sender's dtype.\n"
    "peer : int\n    The sending rank, or vigil.ANY_SOURCE (not inside a group).\n"
    "tag : int or None\n    The tag to match, vigil.ANY_TAG, or None.\n"
    "status : vigil.Status or None\n    Gets the matched message's source, tag and count.\n" +
    kDtype + kAsync + returns("numpy.ndarray", "`out`.") + kRaises;

inline const std::string kSendRecv =
    "sendrecv(send, dest, out=None, source=vigil.ANY_SOURCE, *, sendtag=0, recvtag=vigil.ANY_TAG, status=None,\n"
    "         dtype=None, async_op=False) -> numpy.ndarray | Work\n\n"
    "Sends `send` to `dest` with `sendtag` and receives from `source` with `recvtag` at once\n"
    "(MPI_Sendrecv): a ring where every rank sends first cannot deadlock. `source` must be a\n"
    "rank (not vigil.ANY_SOURCE). `out` defaults to a new array shaped like `send`.\n\n" +
    kParameters + "send : numpy.ndarray\n    What this rank sends.\n" + "dest : int\n    Where it goes.\n" +
    out("as many elements as the message received at most") + "source : int\n    The rank received from.\n" +
    "sendtag, recvtag : int\n    The tags.\n" + "status : vigil.Status or None\n    Gets what was received.\n" +
    kDtype + kAsync + returns("numpy.ndarray", "The received elements (`out`).") + kRaises;

inline const std::string kProbe =
    "probe(source=vigil.ANY_SOURCE, tag=vigil.ANY_TAG) -> vigil.Status\n\n"
    "Waits (within the communicator's timeout) until a tagged message that recv(out, source,\n"
    "tag=tag) would take is here, and describes it without receiving it: allocate `out` from\n"
    "status.count, then receive.\n\n" +
    kRaises;

inline const std::string kIprobe =
    "iprobe(source=vigil.ANY_SOURCE, tag=vigil.ANY_TAG) -> vigil.Status | None\n\n"
    "probe() without waiting: the matching message's status, or None when none is here now.\n\n" +
    kRaises;

}  // namespace vigil::python::doc
