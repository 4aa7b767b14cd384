// Reduction operators a communicator makes (vigilRedOpCreatePreMulSum), and
// how a pre-multiplied sum runs: this rank's input times its scalar, summed.
//
// A created operator is a handle of one communicator. The call that names it
// is resolved at the API (resolveRedOp): the OpDesc then carries
// kRedOpPreMulSum and the scalar (its value, or the pointer read when the op
// runs), so queued operations do not depend on the handle, and destroying it
// cannot pull anything from under them. The fingerprint sees
// kRedOpPreMulSum, so a rank that sums while another pre-multiplies is a
// mismatch, whatever the handles' numbers; the scalars may differ by rank.

#include <cstring>
#include <limits>
#include <new>

#include "comm/communicator.hpp"
#include "core/dtype.hpp"
#include "reduce/reduce.hpp"

namespace vigil {

vigilRedOp_t Communicator::createPreMulSum(const void* scalar, vigilDataType_t dtype,
                                           vigilScalarResidence_t residence) {
  auto fail = [&](Errc errc) { return error(errc).op("vigilRedOpCreatePreMulSum"); };
  if (scalar == nullptr) fail(Errc::ApiNullArgument).cause("scalar is NULL").raise();
  if (!validDataType(dtype)) {
    fail(Errc::ApiBadDataType).cause("data type ", int(dtype), " is not a vigilDataType_t").raise();
  }
  if (isLocPairType(dtype)) {
    fail(Errc::ApiBadRedOp)
        .cause("a pre-multiplied sum of ", dtypeName(dtype),
               " pairs: the (value, index) types reduce with vigilMinLoc and vigilMaxLoc only")
        .raise();
  }
  if (residence != vigilScalarDevice && residence != vigilScalarHostImmediate) {
    fail(Errc::ApiBadRedOp)
        .cause("residence ", int(residence),
               " is not a vigilScalarResidence_t (vigilScalarDevice or vigilScalarHostImmediate)")
        .raise();
  }
  CreatedRedOp created{.dtype = dtype, .scalar = nullptr, .value = 0};
  if (residence == vigilScalarDevice) {
    created.scalar = scalar;
  } else {
    std::memcpy(&created.value, scalar, dtypeSize(dtype));
  }
  std::lock_guard lock(redOpsMutex_);
  if (nextRedOp_ == std::numeric_limits<int>::max()) {
    fail(Errc::ApiBadRedOp).cause("this communicator has made all the operators it can number").raise();
  }
  const int op = nextRedOp_++;
  redOps_.emplace(op, created);
  return static_cast<vigilRedOp_t>(op);
}

void Communicator::destroyRedOp(vigilRedOp_t op) {
  std::lock_guard lock(redOpsMutex_);
  if (redOps_.erase(static_cast<int>(op)) == 1) return;
  error(Errc::ApiBadRedOp)
      .op("vigilRedOpDestroy")
      .cause("reduction ", int(op),
             createdRedOp(op) ? " is not an operator of this communicator (made by another one, or destroyed already)"
                              : " is built in: only operators of vigilRedOpCreatePreMulSum are destroyed")
      .raise();
}

OpDesc Communicator::resolveRedOp(const OpDesc& op) const {
  if (!op.hasRedOp() || !createdRedOp(op.redop)) return op;
  CreatedRedOp created;
  {
    std::lock_guard lock(redOpsMutex_);
    auto it = redOps_.find(static_cast<int>(op.redop));
    if (it == redOps_.end()) {
      error(Errc::ApiBadRedOp)
          .op(opName(op.kind))
          .cause("reduction ", int(op.redop),
                 " is not an operator of this communicator: made by another communicator, or destroyed "
                 "(vigilRedOpDestroy)")
          .raise();
    }
    created = it->second;
  }
  if (created.dtype != op.dtype) {
    error(Errc::ApiBadRedOp)
        .op(opName(op.kind))
        .cause("reduction ", int(op.redop), " is a pre-multiplied sum of ", dtypeName(created.dtype), ", not of ",
               dtypeName(op.dtype), " (the data type of the call)")
        .raise();
  }
  OpDesc resolved = op;
  resolved.redop = kRedOpPreMulSum;
  resolved.preMul = true;
  resolved.preMulScalar = created.scalar;
  resolved.preMulValue = created.value;
  return resolved;
}

OpDesc Communicator::preMultiplied(const OpDesc& op) {
  // The input of each reducing collective, in elements.
  size_t count = op.count;
  if (op.kind == OpKind::ReduceScatter) count = op.count * static_cast<size_t>(nranks_);
  if (op.kind == OpKind::ReduceScatterV) {
    count = 0;
    for (int p = 0; p < nranks_; ++p) count += op.recvcounts[p];
  }
  const size_t bytes = count * dtypeSize(op.dtype);
  if (preMulInput_.size() < bytes) {
    try {
      preMulInput_.resize(bytes);
    } catch (const std::bad_alloc&) {
      error(Errc::OpOutOfMemory)
          .op(op_.label)
          .cause("cannot allocate ", bytes, " bytes for the pre-multiplied input")
          .raise();
    }
  }
  reduce::scaleInto(preMulInput_.data(), op.send, count, op.dtype, op.preMulFactor());
  OpDesc sum = op;
  sum.send = preMulInput_.data();
  sum.redop = vigilSum;
  sum.preMul = false;
  return sum;
}

}  // namespace vigil
