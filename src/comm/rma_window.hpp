#pragma once
// A window for one-sided access: memory that every rank of a communicator
// registered and that every rank may put into and get from without the
// owner taking part (the transport's Rma capability: UCX). The layer under
// symmetric memory across hosts.
//
// Made collectively (Communicator::createWindow): each rank registers its
// buffer, and the ranks all-gather the buffers' addresses, sizes and keys.
// put() and get() only start a transfer; flush() waits, as an operation
// (deadline, peers watched, errors as for collectives), until every one
// this rank started is complete at its target. Ordering between ranks is
// the caller's (a barrier after the flushes). The window is used from one
// thread at a time and must be destroyed before its communicator.

#include <cstddef>
#include <memory>
#include <vector>

#include "transport/transport.hpp"

namespace vigil {

class Communicator;

class RmaWindow {
 public:
  RmaWindow(Communicator& comm, RmaDomain& domain, std::unique_ptr<RmaRegion> mine,
            std::vector<std::unique_ptr<RmaTarget>> targets);
  // The size of `rank`'s part of the window.
  size_t bytes(int rank) const { return targets_.at(static_cast<size_t>(rank))->bytes(); }
  // Start a copy of `bytes` from `source` to `rank`'s part at `offset`, or
  // back. A range outside that part is VG-API-020 (nothing starts).
  void put(int rank, size_t offset, const void* source, size_t bytes);
  void get(int rank, size_t offset, void* destination, size_t bytes);
  // Starts setting (or, with `add`, adding to) the aligned 64-bit word at
  // `offset` of `rank`'s part (a remote atomic for add).
  void signal(int rank, size_t offset, uint64_t value, bool add);
  // What this rank started before reaches its targets before what it starts after.
  void fence() { domain_.fence(); }
  // Waits until every put and get this rank started completed at its target.
  // `label` names the operation in its errors.
  void flush(const char* label = "window flush");
  // Waits until what this rank started completed here: gets' data arrived,
  // puts' sources may be reused (they reach their targets by the next flush).
  void complete(const char* label);
  // Lets the transport carry out accesses of peers to this rank's part (see
  // RmaDomain::progress); waits up to `waitMs` for activity when nothing
  // moved, or until the communicator stops or a peer changes. Returns false
  // at once while another thread runs an operation of the communicator
  // (that operation progresses the transport).
  bool progress(int waitMs);

 private:
  void check(const char* what, int rank, size_t offset, size_t bytes) const;

  Communicator& comm_;
  RmaDomain& domain_;
  std::unique_ptr<RmaRegion> mine_;
  std::vector<std::unique_ptr<RmaTarget>> targets_;  // by rank (this rank's own: a local copy)
};

}  // namespace vigil
