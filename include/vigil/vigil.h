/*
 * vigil — collective communication that never hangs silently.
 *
 * The C API. Names, signatures and numeric values are a stable contract
 * (see docs/api.md); the shape follows NCCL/HCCL so code ports by renaming.
 * Every call returns a vigilResult_t; on failure vigilGetLastError() returns
 * text that starts with a stable error id ("VG-BOOT-003: ...") and names the
 * rank, the operation, the peer(s), the cause and the remedy.
 */
#ifndef VIGIL_VIGIL_H
#define VIGIL_VIGIL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define VIGIL_API __attribute__((visibility("default")))
#else
#define VIGIL_API
#endif

#define VIGIL_MAJOR 0
#define VIGIL_MINOR 1
#define VIGIL_PATCH 0
#define VIGIL_VERSION_CODE (VIGIL_MAJOR * 10000 + VIGIL_MINOR * 100 + VIGIL_PATCH)

/* In C++ the enums get int as their fixed underlying type: a C caller may
   pass any int, and C++ code must be able to hold and reject it. */
#ifdef __cplusplus
#define VIGIL_ENUM_INT : int
#else
#define VIGIL_ENUM_INT
#endif

typedef struct vigilComm* vigilComm_t;
typedef struct vigilStream* vigilStream_t; /* NULL = blocking call */
typedef struct vigilEvent* vigilEvent_t;

#define VIGIL_ROOT_INFO_BYTES 128
typedef struct {
  char internal[VIGIL_ROOT_INFO_BYTES];
} vigilRootInfo;

typedef enum VIGIL_ENUM_INT {
  vigilSuccess = 0,
  vigilInvalidArgument = 1, /* a bad argument, or one that contradicts the communicator */
  vigilInvalidUsage = 2,    /* wrong call order, use after destroy/abort, group misuse,
                               buffer changed while in flight (buffer guard) */
  vigilSystemError = 3,     /* an OS call failed (socket, bind, mmap, ...) */
  vigilInternalError = 4,
  vigilRemoteError = 5, /* a peer died, left, or reported an error */
  vigilTimeout = 6,
  vigilMismatch = 7,     /* ranks disagree: collective fingerprint, world size,
                            version, config */
  vigilAborted = 8,      /* the communicator was aborted (by the user or watchdog) */
  vigilInProgress = 9,   /* query: not finished yet */
  vigilNumericError = 10 /* NaN/Inf found by the NaN check */
} vigilResult_t;

typedef enum VIGIL_ENUM_INT {
  vigilInt8 = 0,
  vigilUint8 = 1,
  vigilInt32 = 2,
  vigilUint32 = 3,
  vigilInt64 = 4,
  vigilUint64 = 5,
  vigilFloat16 = 6,
  vigilFloat32 = 7,
  vigilFloat64 = 8,
  vigilBfloat16 = 9,
  /* (value, index) pairs for vigilMinLoc and vigilMaxLoc, laid out as the
     structs below (MPI's MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_2INT and
     MPI_LONG_INT). Every collective moves them; they reduce with vigilMinLoc
     and vigilMaxLoc only, and those two reduce nothing else (VG-API-003). */
  vigilFloat32Int32 = 10, /* vigilFloat32Int32_t,  8 bytes */
  vigilFloat64Int32 = 11, /* vigilFloat64Int32_t, 16 bytes */
  vigilInt32Int32 = 12,   /* vigilInt32Int32_t,    8 bytes */
  vigilInt64Int32 = 13,   /* vigilInt64Int32_t,   16 bytes */
  /* NCCL's other names for the same types */
  vigilChar = vigilInt8,
  vigilInt = vigilInt32,
  vigilHalf = vigilFloat16,
  vigilFloat = vigilFloat32,
  vigilDouble = vigilFloat64
} vigilDataType_t;

/* vigilBand ... vigilLxor: integer data types only (VG-API-003 on floats).
   Bitwise: and, or, xor of the bits; logical: the result is 1 or 0, as C's
   &&, || and != between the operands' truth values (on one rank the input
   is copied unchanged, as in MPI). */
typedef enum VIGIL_ENUM_INT {
  vigilSum = 0,
  vigilProd = 1,
  vigilMax = 2,
  vigilMin = 3,
  vigilAvg = 4,
  vigilBand = 5,
  vigilBor = 6,
  vigilBxor = 7,
  vigilLand = 8,
  vigilLor = 9,
  vigilLxor = 10,
  vigilMinLoc = 11,
  vigilMaxLoc = 12
} vigilRedOp_t;
/* Values from vigilRedOpCreatePreMulSum are at least this (one
   communicator's operators; another communicator refuses them). */
#define VIGIL_REDOP_CREATED_FIRST 0x1000

/* vigilMinLoc / vigilMaxLoc: the pair with the least (greatest) value, and of
   equal values the one with the lesser index, as MPI's MINLOC/MAXLOC. A NaN
   value ranks beyond every number for both (it propagates, as through
   vigilMin/vigilMax); of two NaN values the lesser index wins. */
typedef struct {
  float value;
  int32_t index;
} vigilFloat32Int32_t;
typedef struct {
  double value;
  int32_t index;
  int32_t padding; /* the C layout of { double; int }: sent as it is */
} vigilFloat64Int32_t;
typedef struct {
  int32_t value;
  int32_t index;
} vigilInt32Int32_t;
typedef struct {
  int64_t value;
  int32_t index;
  int32_t padding;
} vigilInt64Int32_t;

/* Where vigilRedOpCreatePreMulSum's scalar lives (NCCL's names and values):
   vigilScalarHostImmediate: read once, by the create call;
   vigilScalarDevice: read by each operation when it runs, in stream order
   (vigil's buffers are host memory, so "device" is the memory of the
   operations' buffers: the pointer must stay valid while the operator is
   used). */
typedef enum VIGIL_ENUM_INT { vigilScalarDevice = 0, vigilScalarHostImmediate = 1 } vigilScalarResidence_t;

/* ---- Version, errors ---------------------------------------------------- */

VIGIL_API vigilResult_t vigilGetVersion(int* version); /* major*10000 + minor*100 + patch */
VIGIL_API const char* vigilGetErrorString(vigilResult_t result);
/* Last error text of the calling thread for this comm (comm may be NULL for
   init errors). It starts with the error id, e.g. "VG-BOOT-003: ...". */
VIGIL_API const char* vigilGetLastError(vigilComm_t comm);

/* The last error of vigilGetLastError(comm) as its fields. The caller sets
   structSize (VIGIL_ERROR_INFO_INIT does); the library fills the fields that
   fit in it, so later versions may add fields at the end. The strings are
   never NULL ("" when absent) and belong to the library: they stay valid and
   unchanged until this thread's next vigil call that records an error for the
   same comm (a call that fails, or vigilCommGetAsyncError reporting one; for
   comm == NULL: for any comm), or until the thread exits. With no last error,
   result is vigilSuccess, the strings are "" and the numbers -1. Fails with
   VG-API-001 (info NULL) or VG-API-019 (structSize too small), recorded as
   the last error like any other. */
typedef struct {
  size_t structSize;    /* in: sizeof(vigilErrorInfo) */
  vigilResult_t result; /* the failed call's result code */
  const char* id;       /* stable error id, e.g. "VG-PEER-002" (vigil-doctor explain ID) */
  int rank;             /* the reporting rank, -1 if none (e.g. a refused argument before init) */
  int nranks;           /* its communicator's size, -1 if none */
  const char* commName; /* its communicator's name, "" if none */
  const char* op;       /* the operation, e.g. "allreduce", "" if none */
  int64_t seq;          /* the operation's sequence number, -1 if none */
  int peer;             /* the peer rank the error is about, -1 if none */
  const char* cause;    /* what happened (a sentence ending with '.') */
  const char* remedy;   /* what to do (a sentence ending with '.') */
  const char* text;     /* the whole message: equal to vigilGetLastError(comm) */
} vigilErrorInfo;
#define VIGIL_ERROR_INFO_INIT \
  { sizeof(vigilErrorInfo), vigilSuccess, NULL, -1, -1, NULL, NULL, -1, -1, NULL, NULL, NULL }
VIGIL_API vigilResult_t vigilGetLastErrorInfo(vigilComm_t comm, vigilErrorInfo* info);

/* ---- Communicators ------------------------------------------------------ */

/* Root side: fill a root info (address, port, random job token) and start the
   rendezvous listener in the background. Any rank may call it once and pass
   the bytes to the others (file, env, MPI, shared global for threads). */
VIGIL_API vigilResult_t vigilGetRootInfo(vigilRootInfo* info);
VIGIL_API vigilResult_t vigilRootInfoToString(const vigilRootInfo* info, char* out,
                                              size_t outBytes); /* hex; needs >= 2*128+1 */
VIGIL_API vigilResult_t vigilRootInfoFromString(const char* text, vigilRootInfo* info);

VIGIL_API vigilResult_t vigilCommInitRootInfo(int nranks, const vigilRootInfo* info, int rank, vigilComm_t* comm);

typedef struct {
  size_t size;             /* sizeof(vigilConfig), set by VIGIL_CONFIG_INIT */
  int timeoutMs;           /* per-op deadline; -1 = from env VIGIL_TIMEOUT_MS (default 600000) */
  int connectTimeoutMs;    /* init deadline; -1 = VIGIL_CONNECT_TIMEOUT_MS (default 120000) */
  int fingerprint;         /* -1 = env VIGIL_FINGERPRINT (default 1) */
  int nanCheck;            /* -1 = env VIGIL_NAN_CHECK (default 0) */
  int bufferGuard;         /* -1 = env VIGIL_BUFFER_GUARD (default 0) */
  const char* commName;    /* NULL = generated; shows in logs and errors */
  const char* timeoutName; /* NULL = "vigilConfig.timeoutMs": how errors name the source of timeoutMs
                              (a binding passes its own, e.g. "the process group's timeout") */
  /* The larger group this communicator's ranks belong to (NULL = none): its
     name (at most 64 characters) and, in groupRanks[r], rank r's rank in it.
     Errors then name each rank also as a rank of the group: "rank 0 (rank 3
     of 'torch-1a2b')" (a binding that builds communicators for pairs of a
     larger group passes the group's name and ranks). Splits do not inherit it. */
  const char* groupName;
  const int* groupRanks; /* nranks entries, read by the init call */
} vigilConfig;
#define VIGIL_CONFIG_INIT \
  { sizeof(vigilConfig), -1, -1, -1, -1, -1, NULL, NULL, NULL, NULL }
VIGIL_API vigilResult_t vigilCommInitRootInfoConfig(int nranks, const vigilRootInfo* info, int rank,
                                                    const vigilConfig* config, vigilComm_t* comm);

/* n communicators of one process, ranks 0..n-1 of one job (comms[i] is rank i),
   as NCCL's ncclCommInitAll: thread-ranks, or one thread driving every rank
   through streams. All or nothing: on failure every comms[i] is NULL and the
   error is the lowest failing rank's. */
VIGIL_API vigilResult_t vigilCommInitAll(vigilComm_t* comms, int n);

/* From the launcher's environment: VIGIL_ROOT_INFO (hex) + VIGIL_RANK/VIGIL_WORLD_SIZE,
   or torchrun's MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, or Open MPI's
   OMPI_COMM_WORLD_RANK/SIZE, or SLURM's SLURM_PROCID/SLURM_NTASKS. */
VIGIL_API vigilResult_t vigilCommInitFromEnv(vigilComm_t* comm);

VIGIL_API vigilResult_t vigilCommSplit(vigilComm_t comm, int color, int key,
                                       vigilComm_t* newcomm); /* color < 0: newcomm = NULL */
VIGIL_API vigilResult_t vigilCommCount(vigilComm_t comm, int* count);
VIGIL_API vigilResult_t vigilCommUserRank(vigilComm_t comm, int* rank);
VIGIL_API vigilResult_t vigilCommGetAsyncError(vigilComm_t comm, vigilResult_t* asyncError);

VIGIL_API vigilResult_t vigilCommFinalize(vigilComm_t comm); /* collective: flush, tell peers this is a clean exit */
VIGIL_API vigilResult_t vigilCommDestroy(vigilComm_t comm);  /* local: join threads, free everything */
/* local: cancel in-flight work, return within 1 s, then free. Safe to call from
   another thread while ops on this comm are blocked: they return vigilAborted first. */
VIGIL_API vigilResult_t vigilCommAbort(vigilComm_t comm);
/* vigilCommAbort, naming why: this rank's blocked operations and the peers
   report "rank 2 aborted the communicator (<reason>)" instead of
   "(vigilCommAbort)". NULL or "" = vigilCommAbort; at most 200 bytes are kept. */
VIGIL_API vigilResult_t vigilCommAbortWithReason(vigilComm_t comm, const char* reason);

/* Writes this rank's flight recorder (the last VIGIL_FLIGHT_RECORDER operations:
   seq, op, dtype, count, root/peers, stream, state, timestamps, error) as JSON
   to `path`, or to VIGIL_DUMP_DIR/vigil-<comm>-rank<r>.json when path is NULL.
   `vigil-doctor dumps FILE...` merges the files of all ranks. */
VIGIL_API vigilResult_t vigilCommDumpFlightRecorder(vigilComm_t comm, const char* path);

/* ---- Streams and events (CPU streams: in-order queues) ------------------ */

VIGIL_API vigilResult_t vigilStreamCreate(vigilStream_t* stream);
VIGIL_API vigilResult_t vigilStreamDestroy(vigilStream_t stream);
VIGIL_API vigilResult_t vigilStreamSynchronize(vigilStream_t stream); /* returns the first error of its ops */
VIGIL_API vigilResult_t vigilStreamQuery(vigilStream_t stream);       /* vigilSuccess or vigilInProgress */
typedef void (*vigilHostFn_t)(void* userData);
VIGIL_API vigilResult_t vigilLaunchHostFunc(vigilStream_t stream, vigilHostFn_t fn, void* userData);
/* Copies `bytes` from src to dst in stream order (cudaMemcpyAsync on a CPU
   stream): after the operations queued before it, before those queued after
   it, so a copy of a buffer that a queued receive fills sees the received
   data. NULL stream: now. Overlapping ranges are copied as memmove does. */
/* A reduction operator for this communicator: the sum of scalar * input over
   the ranks (NCCL's ncclRedOpCreatePreMulSum). Each rank passes its own
   scalar, of `datatype`, which must be the data type of every operation the
   operator is used in (VG-API-003 otherwise); any numeric type but the
   (value, index) pairs. Every rank of an operation must use a pre-multiplied
   sum (the fingerprint checks it), not necessarily with the same scalar. Use
   the operator in any reducing collective of `comm` (not avg's division: the
   result is the plain sum of the scaled inputs). vigilRedOpDestroy frees it;
   operations already queued keep what they need. */
VIGIL_API vigilResult_t vigilRedOpCreatePreMulSum(vigilRedOp_t* op, void* scalar, vigilDataType_t datatype,
                                                  vigilScalarResidence_t residence, vigilComm_t comm);
VIGIL_API vigilResult_t vigilRedOpDestroy(vigilRedOp_t op, vigilComm_t comm);
VIGIL_API vigilResult_t vigilMemcpyAsync(void* dst, const void* src, size_t bytes, vigilStream_t stream);
VIGIL_API vigilResult_t vigilEventCreate(vigilEvent_t* event);
VIGIL_API vigilResult_t vigilEventRecord(vigilEvent_t event, vigilStream_t stream);
VIGIL_API vigilResult_t vigilStreamWaitEvent(vigilStream_t stream, vigilEvent_t event);
VIGIL_API vigilResult_t vigilEventSynchronize(vigilEvent_t event);
VIGIL_API vigilResult_t vigilEventQuery(vigilEvent_t event);
VIGIL_API vigilResult_t vigilEventDestroy(vigilEvent_t event);

/* ---- Collectives and point-to-point ------------------------------------- */
/* Counts are element counts. In-place is allowed where NCCL allows it
   (sendbuff == recvbuff for AllReduce/Broadcast/Reduce; AllGather with
   sendbuff == recvbuff + rank*sendcount; ReduceScatter with
   recvbuff == sendbuff + rank*recvcount). */

VIGIL_API vigilResult_t vigilAllReduce(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype,
                                       vigilRedOp_t op, vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilBroadcast(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype,
                                       int root, vigilComm_t comm, vigilStream_t stream);
/* NCCL's legacy in-place broadcast: vigilBroadcast(buff, buff, ...). */
VIGIL_API vigilResult_t vigilBcast(void* buff, size_t count, vigilDataType_t datatype, int root, vigilComm_t comm,
                                   vigilStream_t stream);
VIGIL_API vigilResult_t vigilReduce(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype,
                                    vigilRedOp_t op, int root, vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, vigilDataType_t datatype,
                                       vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                                           vigilDataType_t datatype, vigilRedOp_t op, vigilComm_t comm,
                                           vigilStream_t stream);
VIGIL_API vigilResult_t vigilAllToAll(const void* sendbuff, void* recvbuff, size_t count /* per peer */,
                                      vigilDataType_t datatype, vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilAllToAllV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                                       void* recvbuff, const size_t* recvcounts, const size_t* rdispls,
                                       vigilDataType_t datatype, vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilGather(const void* sendbuff, void* recvbuff, size_t sendcount, vigilDataType_t datatype,
                                    int root, vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilScatter(const void* sendbuff, void* recvbuff, size_t recvcount, vigilDataType_t datatype,
                                     int root, vigilComm_t comm, vigilStream_t stream);
/* The v-variants (MPI's Allgatherv, Gatherv, Scatterv, Reduce_scatter):
   rank p's block is counts[p] elements at displs[p] elements into the
   buffer that holds every rank's block (arrays of nranks entries).
   counts[rank] must equal this rank's own count (VG-API-023). AllGatherV
   and ReduceScatterV: every rank passes the same recvcounts (their digest is
   part of the fingerprint). GatherV/ScatterV: the arrays and the many-block
   buffer are read at the root only (NULL elsewhere). ReduceScatterV: the
   blocks lie one after another in rank order (no displacements); rank r
   gets recvcounts[r] elements. In place: AllGatherV with sendbuff ==
   recvbuff + rdispls[rank]; GatherV with sendbuff == recvbuff + rdispls[root]
   and ScatterV with recvbuff == sendbuff + sdispls[root] (at the root);
   ReduceScatterV with recvbuff == sendbuff + the lower ranks' blocks. */
VIGIL_API vigilResult_t vigilAllGatherV(const void* sendbuff, size_t sendcount, void* recvbuff,
                                        const size_t* recvcounts, const size_t* rdispls, vigilDataType_t datatype,
                                        vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilGatherV(const void* sendbuff, size_t sendcount, void* recvbuff, const size_t* recvcounts,
                                     const size_t* rdispls, vigilDataType_t datatype, int root, vigilComm_t comm,
                                     vigilStream_t stream);
VIGIL_API vigilResult_t vigilScatterV(const void* sendbuff, const size_t* sendcounts, const size_t* sdispls,
                                      void* recvbuff, size_t recvcount, vigilDataType_t datatype, int root,
                                      vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilReduceScatterV(const void* sendbuff, void* recvbuff, const size_t* recvcounts,
                                            vigilDataType_t datatype, vigilRedOp_t op, vigilComm_t comm,
                                            vigilStream_t stream);
/* Prefix reductions (MPI_Scan, MPI_Exscan): rank r gets x0 OP ... OP xr
   (Scan) or x0 OP ... OP x(r-1) (Exscan), over the ranks' count elements
   each. Exscan on rank 0 writes the operation's identity (0 for sum, avg,
   bor, bxor, lor, lxor; 1 for prod and land; all bits set for band; -inf or
   the lowest integer for max, +inf or the highest for min) where MPI leaves
   the buffer undefined. vigilAvg divides by the number of ranks reduced.
   In place: sendbuff == recvbuff. */
VIGIL_API vigilResult_t vigilScan(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype,
                                  vigilRedOp_t op, vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilExscan(const void* sendbuff, void* recvbuff, size_t count, vigilDataType_t datatype,
                                    vigilRedOp_t op, vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilBarrier(vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilSend(const void* sendbuff, size_t count, vigilDataType_t datatype, int peer,
                                  vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilRecv(void* recvbuff, size_t count, vigilDataType_t datatype, int peer, vigilComm_t comm,
                                  vigilStream_t stream);

/* ---- Tagged point-to-point (MPI's matching rules) ------------------------ */
/* A tagged receive takes the first message from its source (or from any
   source) whose tag matches (or any tag); messages from one source to one
   receiver never overtake each other. Tags are any int >= 0, without limit.
   The message's data type must be the receive's and its size at most the
   receive's count (the status says how much came); otherwise both ranks get
   VG-OP-003. Messages that arrive before their receive is posted wait in the
   receiver's memory. vigilSend/vigilRecv stay untagged and ordered: between
   two ranks, a tagged receive meeting an untagged message (or the reverse)
   is VG-OP-002. A send to this rank itself is kept until it is received.
   VIGIL_ANY_SOURCE is refused inside a group (VG-API-022). A tagged message
   must be received before the receiver's next collective on the communicator
   reaches its sender's data (else VG-OP-002/VG-OP-005, as for vigilSend).
   On a stream, *status is written when the receive completes. */
#define VIGIL_ANY_SOURCE (-1)
#define VIGIL_ANY_TAG (-1)
typedef struct {
  int source;   /* the sender's rank */
  int tag;      /* the message's tag */
  size_t count; /* elements of the message's data type */
  size_t bytes; /* bytes of the message */
} vigilStatus;
VIGIL_API vigilResult_t vigilSendTag(const void* sendbuff, size_t count, vigilDataType_t datatype, int peer, int tag,
                                     vigilComm_t comm, vigilStream_t stream);
/* status may be NULL. */
VIGIL_API vigilResult_t vigilRecvTag(void* recvbuff, size_t count, vigilDataType_t datatype, int peer, int tag,
                                     vigilComm_t comm, vigilStatus* status, vigilStream_t stream);
/* Waits (blocking, within VIGIL_TIMEOUT_MS) until a message that a
   vigilRecvTag(peer, tag) would take is here, and describes it; it stays
   for that receive. vigilIprobe returns at once: *flag 1 and *status set
   when such a message is here, else *flag 0. */
VIGIL_API vigilResult_t vigilProbe(int peer, int tag, vigilComm_t comm, vigilStatus* status);
VIGIL_API vigilResult_t vigilIprobe(int peer, int tag, vigilComm_t comm, int* flag, vigilStatus* status);
/* A tagged send and a tagged receive that progress together (MPI_Sendrecv):
   no deadlock when every rank sends before it receives. */
VIGIL_API vigilResult_t vigilSendRecv(const void* sendbuff, size_t sendcount, vigilDataType_t sendtype, int dest,
                                      int sendtag, void* recvbuff, size_t recvcount, vigilDataType_t recvtype,
                                      int source, int recvtag, vigilComm_t comm, vigilStatus* status,
                                      vigilStream_t stream);

/* Non-blocking tagged point-to-point (MPI_Isend/MPI_Irecv): the call posts
   the send or receive and returns a request; vigilWait, vigilWaitAny or
   vigilTest completes it. Matching is vigilSendTag/vigilRecvTag's (source,
   tag, order; VIGIL_ANY_SOURCE and VIGIL_ANY_TAG allowed) and a receive
   takes the first message that matches it, receives in the order they were
   posted. The buffers stay the caller's to keep until the request completes.
   Requests progress while some thread waits on, or tests, a request of the
   communicator; every wait progresses all of its pending requests at once,
   so irecv then isend on every rank (and the reverse) completes at any size.
   Any thread may post while another waits: the wait takes the new request in.
   A completed request is freed and set to VIGIL_REQUEST_NULL; a failure
   (peer gone, timeout, mismatch) is the communicator's error, as for the
   blocking calls. vigilCommFinalize with requests not complete is VG-OP-006. */
typedef struct vigilRequest_st* vigilRequest_t;
#define VIGIL_REQUEST_NULL ((vigilRequest_t)0)
VIGIL_API vigilResult_t vigilIsendTag(const void* sendbuff, size_t count, vigilDataType_t datatype, int peer, int tag,
                                      vigilComm_t comm, vigilRequest_t* request);
VIGIL_API vigilResult_t vigilIrecvTag(void* recvbuff, size_t count, vigilDataType_t datatype, int source, int tag,
                                      vigilComm_t comm, vigilRequest_t* request);
/* Blocks (within VIGIL_TIMEOUT_MS of no progress) until *request completes;
   *status (may be NULL) describes a receive's message. */
VIGIL_API vigilResult_t vigilWait(vigilRequest_t* request, vigilStatus* status);
/* Progresses without waiting for a message: *flag 1 when *request completed. */
VIGIL_API vigilResult_t vigilTest(vigilRequest_t* request, int* flag, vigilStatus* status);
/* Blocks until one of requests[0..count) (all of one communicator; NULL
   entries are skipped) completes: *index is it. *index is -1 when none is
   active, or when another thread posted a request on the communicator
   meanwhile (a progress thread then adds it to its set and waits again). */
VIGIL_API vigilResult_t vigilWaitAny(int count, vigilRequest_t* requests, int* index, vigilStatus* status);
/* Frees *request and sets it to VIGIL_REQUEST_NULL without waiting
   (MPI_Request_free): a pending one still completes in a later wait on its
   communicator, but nobody learns when; its buffer stays the caller's to
   keep until then. For requests that can no longer complete (after a
   failed finalize, VG-OP-006), it releases the handle. */
VIGIL_API vigilResult_t vigilRequestFree(vigilRequest_t* request);

/* Everything between GroupStart and GroupEnd on this thread is issued as one
   batch (batch_isend_irecv); every buffer in it stays held until the batch completes. */
VIGIL_API vigilResult_t vigilGroupStart(void);
VIGIL_API vigilResult_t vigilGroupEnd(void);

/* ---- Symmetric memory (see docs/symmetric.md) ---------------------------- */
/* Every rank of a communicator holds a copy of each symmetric allocation, at
   the same offset of its part of the heap (VIGIL_SYMMETRIC_HEAP bytes per
   rank). A symmetric address is an address inside the calling rank's copy;
   the one-sided calls name a peer and act on that peer's copy. */

typedef enum VIGIL_ENUM_INT { vigilSignalSet = 0, vigilSignalAdd = 1 } vigilSignalOp_t;
typedef enum VIGIL_ENUM_INT {
  vigilCmpEq = 0,
  vigilCmpNe = 1,
  vigilCmpGt = 2,
  vigilCmpGe = 3,
  vigilCmpLt = 4,
  vigilCmpLe = 5
} vigilCmpOp_t;

/* Collective: every rank passes the same size (else VG-SYM-001 on every rank,
   nothing allocated). The memory reads as zero. bytes 0 gives NULL. */
VIGIL_API vigilResult_t vigilMemAlloc(vigilComm_t comm, size_t bytes, void** ptr);
/* Collective: every rank frees the same allocation (NULL everywhere: nothing). */
VIGIL_API vigilResult_t vigilMemFree(vigilComm_t comm, void* ptr);
/* A load/store pointer to peer's copy of the symmetric address ptr; the peer
   must run on this host (else VG-SYM-004). */
VIGIL_API vigilResult_t vigilMemPeerPtr(vigilComm_t comm, const void* ptr, int peer, void** peerPtr);
/* dest (put) / source (get) / signal: symmetric addresses; the other buffer is
   local memory. Complete when the call (or, on a stream, its turn) returns. */
VIGIL_API vigilResult_t vigilPut(void* dest, const void* source, size_t bytes, int peer, vigilComm_t comm,
                                 vigilStream_t stream);
VIGIL_API vigilResult_t vigilGet(void* dest, const void* source, size_t bytes, int peer, vigilComm_t comm,
                                 vigilStream_t stream);
/* The data, then peer's copy of *signal set to / increased by value: whoever
   sees the signal sees the data. */
VIGIL_API vigilResult_t vigilPutSignal(void* dest, const void* source, size_t bytes, uint64_t* signal, uint64_t value,
                                       vigilSignalOp_t sigOp, int peer, vigilComm_t comm, vigilStream_t stream);
/* Waits until this rank's *signal compares true against value; *observed (may
   be NULL) gets what it held. fromPeer: the rank expected to signal (its death
   ends the wait with its error, a timeout names it), or -1 for any rank. */
VIGIL_API vigilResult_t vigilSignalWaitUntil(uint64_t* signal, vigilCmpOp_t cmp, uint64_t value, int fromPeer,
                                             uint64_t* observed, vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilFence(vigilComm_t comm, vigilStream_t stream); /* orders this rank's puts */
VIGIL_API vigilResult_t vigilQuiet(vigilComm_t comm, vigilStream_t stream); /* completes this rank's puts */
/* Every rank's one-sided calls before it are complete and visible to every rank after it. */
VIGIL_API vigilResult_t vigilBarrierAll(vigilComm_t comm, vigilStream_t stream);
/* vigilAllReduce with both buffers symmetric (in place allowed), ranks of one
   host: each rank reduces its slice straight from every rank's copy and writes
   it into every rank's recvbuff (one pass over memory; the same bits as
   vigilAllReduce). Different arguments on two ranks: VG-SYM-001 on both. */
VIGIL_API vigilResult_t vigilAllReduceSymmetric(const void* sendbuff, void* recvbuff, size_t count,
                                                vigilDataType_t datatype, vigilRedOp_t op, vigilComm_t comm,
                                                vigilStream_t stream);
/* Tensor-parallel GEMM kernels (row-major, vigilFloat32 or vigilFloat64,
   ranks of one host; the GEMMs are OpenBLAS's, loaded on first use, else
   VG-SYM-008). Collective: every rank passes the same rows, k, n and type.
   AllGather-GEMM: out[(nranks*rows) x n] = allgather(x) @ w, where x
   (symmetric, rows x k) is this rank's block of rows and w (k x n) local;
   peers' blocks are multiplied straight from their copies. */
VIGIL_API vigilResult_t vigilAllGatherGemm(const void* x, const void* w, void* out, size_t rows, size_t k, size_t n,
                                           vigilDataType_t datatype, vigilComm_t comm, vigilStream_t stream);
/* GEMM-ReduceScatter: out[rows x n] = this rank's block of rows of the sum
   over ranks of a[(nranks*rows) x k] @ w[k x n] (a, w, out local), summed in
   rank order. workspace: symmetric, nranks*rows*n elements, takes this
   rank's partial product; peers reduce their blocks straight from it. */
VIGIL_API vigilResult_t vigilGemmReduceScatter(const void* a, const void* w, void* out, void* workspace, size_t rows,
                                               size_t k, size_t n, vigilDataType_t datatype, vigilComm_t comm,
                                               vigilStream_t stream);

/* ---- MoE dispatch / combine (see docs/moe.md) --------------------------- */

typedef struct vigilMoeHandle* vigilMoeHandle_t; /* routing produced by dispatch, consumed by combine */

/* vigilMoeConfig.quantMode: how dispatched rows travel. The value 1 (static
   int8 with given scales, in the vendor operators) is not supported. */
typedef enum VIGIL_ENUM_INT {
  vigilMoeQuantNone = 0,       /* rows travel and arrive in xType */
  vigilMoeQuantDynamicInt8 = 2 /* int8 per row, its scale in dynamicScales (docs/moe.md "Quantisation") */
} vigilMoeQuantMode_t;

/* vigilMoeConfig.expertTokenNumsType: what expertTokenNums[j] holds. */
typedef enum VIGIL_ENUM_INT {
  vigilMoeExpertTokenNumsPrefixSum = 0, /* rows received for local experts 0..j (inclusive prefix sum) */
  vigilMoeExpertTokenNumsCount = 1      /* rows received for local expert j */
} vigilMoeExpertTokenNumsType_t;

typedef struct {
  size_t size;                   /* sizeof(vigilMoeConfig) */
  int64_t epWorldSize, epRankId; /* declared; must equal the communicator's size and rank */
  int64_t moeExpertNum;          /* routed experts E; E % (W - sharedExpertRankNum) == 0 */
  int64_t sharedExpertNum;       /* Sh in [0,4] */
  int64_t sharedExpertRankNum;   /* S in [0,W); ranks [0,S) hold shared experts */
  int64_t hidden;                /* H */
  int64_t topK;                  /* K */
  int64_t maxTokensPerRank;      /* BS upper bound, same on all ranks */
  int quantMode;                 /* a vigilMoeQuantMode_t */
  int expertTokenNumsType;       /* a vigilMoeExpertTokenNumsType_t */
} vigilMoeConfig;

typedef struct { /* inputs */
  const void* x;
  vigilDataType_t xType;     /* [BS,H] float32/float16/bfloat16 */
  int64_t bs;                /* tokens on this rank */
  const int32_t* expertIds;  /* [BS,K], -1 = unused slot */
  const float* expertScales; /* [BS,K] or NULL */
  const uint8_t* activeMask;
  int activeMaskDims;        /* NULL, [BS] (1) or [BS,K] (2) */
  const float* smoothScales; /* [Sh+E,H] or NULL (vigilMoeQuantDynamicInt8 only) */
  /* outputs */
  void* expandX;
  int64_t expandXRows;      /* [A,H] in xType, or int8 when quantised */
  float* dynamicScales;     /* [A] when quantised, else NULL */
  float* expandScales;      /* [A] or NULL */
  int64_t* expertTokenNums; /* [L] */
  int32_t* epRecvCounts;    /* [W*L] */
  int64_t* recvRows;        /* out: rows written to expandX */
} vigilMoeDispatchArgs;

VIGIL_API vigilResult_t vigilMoeDispatchGetWorkspaceSize(const vigilMoeConfig* cfg, const vigilMoeDispatchArgs* args,
                                                         vigilComm_t comm, size_t* workspaceBytes);
VIGIL_API vigilResult_t vigilMoeDispatch(const vigilMoeConfig* cfg, const vigilMoeDispatchArgs* args, void* workspace,
                                         size_t workspaceBytes, vigilMoeHandle_t* handle, vigilComm_t comm,
                                         vigilStream_t stream);

typedef struct {
  const void* expandX;
  vigilDataType_t xType;     /* [recvRows,H] expert outputs */
  const float* expertScales; /* [BS,K] or NULL */
  const void* sharedExpertX; /* [BS,H] or NULL */
  void* out;                 /* [BS,H] */
} vigilMoeCombineArgs;

VIGIL_API vigilResult_t vigilMoeCombineGetWorkspaceSize(const vigilMoeConfig* cfg, vigilMoeHandle_t handle,
                                                        vigilComm_t comm, size_t* workspaceBytes);
VIGIL_API vigilResult_t vigilMoeCombine(const vigilMoeConfig* cfg, vigilMoeHandle_t handle,
                                        const vigilMoeCombineArgs* args, void* workspace, size_t workspaceBytes,
                                        vigilComm_t comm, vigilStream_t stream);
VIGIL_API vigilResult_t vigilMoeHandleDestroy(vigilMoeHandle_t handle);
/* For language bindings, from their interpreter's exit hook: destroys every
 * communicator of this process that is still alive, and tells its peers that
 * this process is exiting - normally (uncaughtError NULL or "") or because of
 * the uncaught error it describes (e.g. "ZeroDivisionError: division by zero")
 * - rather than that it called vigilCommDestroy. Handles stay valid for
 * vigilCommDestroy. */
VIGIL_API vigilResult_t vigilProcessExiting(const char* uncaughtError);
/* For bindings whose own checks refused a MoE call before it reached vigil:
 * takes part in that call's handshake (combine != 0: vigilMoeCombine, else
 * vigilMoeDispatch) as a rank that refused it with error id `errorId`
 * (e.g. "VG-MOE-003"), so the peers return VG-MOE-006 naming that id at
 * once. Returns vigilSuccess once the peers were told. */
VIGIL_API vigilResult_t vigilMoeRefuse(int combine, const char* errorId, vigilComm_t comm);
VIGIL_API int64_t vigilMoeRequiredRows(const vigilMoeConfig* cfg, int rank); /* capacity A for expandX */

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* VIGIL_VIGIL_H */
