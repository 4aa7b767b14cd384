#pragma once
// The flight recorder: per communicator, the last N operations with their state and
// timestamps, so that after a hang or mismatch every rank can say what it was doing.
// Dumped as JSON (schema in toJson) and read back by `vigil-doctor dumps` / `trace`.

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/op_kind.hpp"
#include "vigil/vigil.h"

namespace vigil {

enum class FlightState : uint8_t { Enqueued, Started, Completed, Failed };

// "enqueued", "started", "completed", "failed".
const char* flightStateName(FlightState state);

struct FlightEntry {
  uint64_t id = 0;   // monotonically increasing per recorder, from 1
  int64_t seq = -1;  // collective sequence number, -1 for point-to-point
  OpKind op = OpKind::Barrier;
  vigilDataType_t dtype = vigilUint8;
  vigilRedOp_t redop = vigilSum;
  bool hasRedop = false;
  uint64_t count = 0;
  int root = -1;           // -1 none
  std::vector<int> peers;  // point-to-point peers (may be empty)
  std::string stream;      // "null" for blocking calls, else a stream id like "s3"
  FlightState state = FlightState::Enqueued;
  int64_t enqueuedNs = 0, startedNs = 0, endedNs = 0;  // CLOCK_REALTIME ns since epoch, 0 = not yet
  std::string error;                                   // error text when Failed
};

class FlightRecorder {
 public:
  explicit FlightRecorder(size_t capacity);  // 0 = disabled: every call is a cheap no-op

  size_t capacity() const { return slots_.size(); }
  bool enabled() const { return !slots_.empty(); }

  // Sets id and enqueuedNs (if 0); returns the id (0 when disabled).
  uint64_t enqueue(FlightEntry entry);
  // Updates for an id that the ring already overwrote (or 0) are ignored. States only move
  // forward (enqueued -> started -> completed|failed); an update to a finished entry is ignored.
  // `seq` >= 0 sets the entry's sequence number (assigned when a queued op starts).
  void started(uint64_t id, int64_t seq = -1);
  void completed(uint64_t id);
  void failed(uint64_t id, const std::string& error);

  std::vector<FlightEntry> snapshot() const;  // oldest first, at most capacity entries
  // Highest seq that completed, kept apart from the ring so it survives wrap-around; -1 if none.
  int64_t lastCompletedSeq() const;

  // {"vigil_flight_recorder":1,"rank":0,"nranks":4,"comm":"c1a2","pid":123,"host":"vm","reason":"timeout",
  //  "dumped_ns":...,"capacity":2048,"last_completed_seq":41,"entries":[{...}]}
  // Entry: id, seq, op, dtype, redop (string or null), count, root, peers, stream, state,
  //        enqueued_ns, started_ns, ended_ns, error (string or null).
  std::string toJson(int rank, int nranks, const std::string& comm, const std::string& reason) const;
  // Writes toJson atomically (path + ".tmp", then rename). Returns "" or an error description.
  std::string writeJson(const std::string& path, int rank, int nranks, const std::string& comm,
                        const std::string& reason) const;
  // "<dir>/vigil-<comm>-rank<r>.json"; characters of comm that are unsafe in a file name become '_'.
  static std::string dumpPath(const std::string& dir, const std::string& comm, int rank);

 private:
  // Caller holds mutex_. nullptr when id is 0, in the future, or already overwritten.
  FlightEntry* slotFor(uint64_t id);

  mutable std::mutex mutex_;
  std::vector<FlightEntry> slots_;  // ring: entry id lives at slots_[id % capacity]
  uint64_t nextId_ = 1;
  int64_t lastCompletedSeq_ = -1;
};

// JSON string literal (with quotes) for arbitrary bytes: escapes quotes, backslashes and control
// characters, and replaces bytes that are not valid UTF-8 with U+FFFD so any parser accepts it.
std::string jsonQuote(const std::string& text);

}  // namespace vigil
