#pragma once
// One operation as the API layer hands it to a communicator.

#include <cstddef>

#include "core/op_kind.hpp"
#include "vigil/vigil.h"

namespace vigil {

struct OpDesc {
  OpKind kind = OpKind::Barrier;
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;  // the call's count argument
  vigilDataType_t dtype = vigilUint8;
  vigilRedOp_t redop = vigilSum;
  int root = -1;
  int peer = -1;
  // AllToAllV only.
  const size_t* sendcounts = nullptr;
  const size_t* sdispls = nullptr;
  const size_t* recvcounts = nullptr;
  const size_t* rdispls = nullptr;

  bool hasRedOp() const { return kind == OpKind::AllReduce || kind == OpKind::Reduce || kind == OpKind::ReduceScatter; }
  bool hasRoot() const {
    return kind == OpKind::Broadcast || kind == OpKind::Reduce || kind == OpKind::Gather || kind == OpKind::Scatter;
  }
};

}  // namespace vigil
