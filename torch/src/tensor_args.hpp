#pragma once
// From torch arguments to vigil's: element types, reductions, the checks a
// tensor must pass, and dense buffers for tensors that are not contiguous.

#include <ATen/ATen.h>

#include <string>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <vector>

#include "errors.hpp"

namespace vigil::torchpg {

// vigil's element type for reducing a tensor of `type`; bool travels as
// uint8. Raises VG-API-002 for types vigil cannot reduce (int16, complex).
vigilDataType_t reductionType(const OpSite& site, at::ScalarType type);

// vigil's reduction for `op` on elements of `type`. On bool, SUM and BOR are
// MAX, PRODUCT and BAND are MIN. Raises VG-API-003 for the rest (BXOR,
// bitwise ops on integers, PREMUL_SUM, AVG on bool).
vigilRedOp_t reductionOp(const OpSite& site, const c10d::ReduceOp& op, at::ScalarType type);

// How a tensor travels when nothing is computed on it: as its own vigil
// type, or as bytes when vigil has no such type (int16, complex, ...).
struct Elements {
  vigilDataType_t type;
  size_t count;
};
Elements movedElements(at::ScalarType type, int64_t numel);
inline Elements movedElements(const at::Tensor& t) {
  return movedElements(t.scalar_type(), t.numel());
}

// A dense CPU tensor (strided, not sparse, not on a device, not a meta tensor).
void requireDenseCpu(const OpSite& site, const at::Tensor& t, const std::string& what);
void requireDenseCpu(const OpSite& site, const std::vector<at::Tensor>& ts, const std::string& what);
// A list of exactly `want` entries.
void requireListSize(const OpSite& site, size_t got, size_t want, const std::string& what);
// The same element type and number of elements as `like`.
void requireSameLayout(const OpSite& site, const at::Tensor& t, const at::Tensor& like, const std::string& what);
void requireSameType(const OpSite& site, const std::vector<at::Tensor>& ts, const std::string& what);
void requireRoot(const OpSite& site, int64_t root);
// "torch.int16"
std::string typeName(at::ScalarType type);

// The tensors laid end to end in one new 1-d tensor.
at::Tensor concatenate(const std::vector<at::Tensor>& tensors);
// Copies consecutive pieces of the 1-d tensor `flat`, from element `offset` on, into `tensors`.
void spread(const at::Tensor& flat, int64_t offset, const std::vector<at::Tensor>& tensors);
// Whether the bytes of two tensors overlap in memory.
bool overlaps(const at::Tensor& a, const at::Tensor& b);

// A row-major buffer for vigil to read and write in place of a tensor: the
// tensor itself when it is contiguous, else a contiguous copy that
// writeBack() copies into the tensor.
class DenseBuffer {
 public:
  explicit DenseBuffer(at::Tensor tensor) : user_(std::move(tensor)), dense_(user_.contiguous()) {}
  void* data() const { return dense_.data_ptr(); }
  const at::Tensor& dense() const { return dense_; }
  void writeBack() {
    if (!dense_.is_same(user_)) user_.copy_(dense_);
  }

 private:
  at::Tensor user_;
  at::Tensor dense_;
};

}  // namespace vigil::torchpg
