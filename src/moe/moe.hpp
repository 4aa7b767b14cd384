#pragma once
// MoE dispatch and combine (semantics: docs/moe.md).
//
// Dispatch, on every rank: validate the config and the inputs locally
// (validate.cpp), agree with every other rank over the communicator before
// anything moves (one all-gather of a fixed record: the config fields that
// must agree and this rank's verdict), then exchange counts (an all-to-all of
// rows per local expert) and rows: one message per peer and direction,
// gathered from x (or from the packed int8 rows) and scattered on arrival
// into every (local expert, source) block of expandX, with the weights and
// scales. The packing of each destination runs while the messages to the
// previous ones travel; rows for this rank itself are packed in place, last.
// Combine sends every block back the same way and sums per token.
//
// Refusals write nothing: the outputs are touched only after the handshake
// agreed on every rank.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.hpp"
#include "vigil/vigil.h"

namespace vigil::moe {

// Where experts live (moe.md "Placement"), for a config that passed validation.
struct Placement {
  int64_t W = 0, S = 0, Sh = 0, E = 0, K = 0, H = 0, maxTokens = 0;
  int64_t routedPerRank = 0;  // L on routed ranks

  explicit Placement(const vigilMoeConfig& cfg);
  int64_t localExperts(int64_t rank) const { return rank < S ? 1 : routedPerRank; }
  int64_t routedRank(int64_t e) const { return S + e / routedPerRank; }
  int64_t routedLocal(int64_t e) const { return e % routedPerRank; }
  int64_t sharedRank(int64_t s, int64_t sourceRank) const {
    const int64_t group = S / Sh;
    return s * group + sourceRank % group;
  }
  int64_t requiredRows(int64_t rank) const;
};

// A 64-bit digest of the config fields every rank must agree on.
uint64_t configDigest(const vigilMoeConfig& cfg);

// Local checks of moe.md "Validation" 1-5 (workspace only when `checkWorkspace`).
// Throws Error with the call's op name.
void validateDispatch(const Communicator& comm, const vigilMoeConfig* cfg, const vigilMoeDispatchArgs* args,
                      const void* workspace, size_t workspaceBytes, bool checkWorkspace);
// What is wrong with the config alone (moe.md "Validation" 3), or "".
std::string configProblem(const vigilMoeConfig& cfg);
size_t dispatchWorkspaceBytes(const vigilMoeConfig& cfg, const vigilMoeDispatchArgs& args);

// The routing of one dispatch, kept for its combine.
// Whether a handle is alive is kept by the C API (a table of live handles).
struct Handle {
  std::weak_ptr<Communicator> comm;
  const Communicator* commId = nullptr;
  uint64_t configDigest = 0;
  uint64_t dispatchId = 0;  // this communicator's n-th dispatch, the same on every rank
  // Set when its dispatch completed; until then (queued on a stream, or
  // failed there) only the fields above are set.
  bool complete = false;
  int64_t bs = 0;
  int64_t hidden = 0;
  int64_t slots = 0;  // K + Sh
  // Source side: per destination rank, the (token, slot) of every row sent,
  // in send order; `rowOf[t * slots + slot]` = the row's index in the
  // combine staging area (destinations in rank order), -1 if inactive.
  std::vector<std::vector<int32_t>> sentTokens, sentSlots;
  std::vector<int64_t> destBase;     // [W + 1]: first (destination, local expert) counter of each destination
  std::vector<int64_t> sendCount;    // [destBase[W]]: rows sent per (destination, local expert)
  std::vector<int64_t> stagingBase;  // [W + 1]: first staging row of each destination
  std::vector<int64_t> rowOf;
  int64_t sentRows = 0;
  // Destination side: per source rank and local expert, the first row and
  // the row count of its block in expandX.
  std::vector<int64_t> blockStart, blockRows;  // [source * L + j]
  // Set when the dispatch ran on symmetric buffers: per (destination, local
  // expert) counter (destBase), the first row of this rank's block in that
  // destination's expandX.
  std::vector<int64_t> peerBlockStart;
  int64_t localExperts = 0;
  int64_t recvRows = 0;
};

// The handshake (moe.md "Validation" 6) and the exchange. Every rank calls
// it, also one whose local checks fail (cfg or args may then be NULL): the
// others must hear its verdict instead of waiting for it.
// Fills `into` (its comm, commId and configDigest may be set already: they
// are then left alone). `refused`: this rank's refusal, found when the call
// was queued; the handshake then only tells the others, and throws it again.
void dispatch(const std::shared_ptr<Communicator>& comm, const vigilMoeConfig* cfg, const vigilMoeDispatchArgs* args,
              void* workspace, size_t workspaceBytes, Handle& into, const std::optional<Error>& refused = {});

size_t combineWorkspaceBytes(const Handle& h);
// Combine's local checks. Throws Error.
void checkCombine(const Communicator& comm, const vigilMoeConfig* cfg, const Handle* h, const vigilMoeCombineArgs* args,
                  const void* workspace, size_t workspaceBytes);
void combine(const std::shared_ptr<Communicator>& comm, const vigilMoeConfig* cfg, const Handle* h,
             const vigilMoeCombineArgs* args, void* workspace, size_t workspaceBytes,
             const std::optional<Error>& refused = {});

// The all-gather every MoE call starts with: the config fields that must
// agree, the data type, `last` (named `lastName`: the dispatch number) and
// this rank's verdict (`own`, if its local checks failed; cfg may then be
// NULL). Throws `own`, a peer's refusal (VG-MOE-006) or a disagreement
// (VG-MOE-005) naming the field.
// `symmetricKey`: where this rank's output (dispatch) or input (combine)
// buffers lie in the communicator's symmetric heap, hashed, or -1 when they
// are not all there (or the ranks are not all on one host). Returns whether
// every rank has the same key other than -1: the call then reads and writes
// the peers' copies directly instead of exchanging messages.
bool agree(Communicator& comm, const char* call, const vigilMoeConfig* cfg, int64_t xType, int64_t last,
           const char* lastName, const std::optional<Error>& own, int64_t symmetricKey = -1);

// The point-to-point messages of one exchange, each built from pieces of
// memory (gathered when sent, scattered when received): one message per
// peer and direction however the rows are laid out.
class Messages {
 public:
  explicit Messages(size_t expectedPieces) { pieces_.reserve(expectedPieces); }
  // Appends `bytes` at `data` to the message being built.
  void piece(const void* data, size_t bytes);
  // Ends the message being built: a send or receive with `peer` (none if empty).
  void end(OpKind kind, int peer);
  // The ops, their pieces attached (valid while this object lives). Sends
  // wait for `ready[peer]` when `ready` is given.
  std::vector<OpDesc>& ops(const bool* ready = nullptr);

 private:
  std::vector<OpDesc> ops_;
  std::vector<IoSegment> pieces_;
  std::vector<std::pair<size_t, size_t>> ranges_;  // per op: [first, end) in pieces_
  size_t start_ = 0;                               // first piece of the message being built
};

// Element conversions for the MoE data types.
float loadFloat(const uint8_t* row, int64_t index, vigilDataType_t type);
void storeFloat(uint8_t* row, int64_t index, vigilDataType_t type, float value);

// Throws VG-MOE-007 unless `h` came from a dispatch on `comm` with `cfg`
// that completed (or, with `queuedOk`, that is queued).
void checkHandle(const Communicator& comm, const vigilMoeConfig& cfg, const Handle* h, const char* call,
                 bool queuedOk = false);

}  // namespace vigil::moe
