#include "tensor_args.hpp"

#include <torch/csrc/utils/tensor_dtypes.h>

namespace vigil::torchpg {
namespace {

std::string opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "ReduceOp(" + std::to_string(static_cast<int>(op)) + ")";
  }
}

// vigil's type for a torch type, or false when vigil has none.
bool vigilTypeOf(at::ScalarType type, vigilDataType_t* out) {
  switch (type) {
    case at::kFloat: *out = vigilFloat32; return true;
    case at::kDouble: *out = vigilFloat64; return true;
    case at::kHalf: *out = vigilFloat16; return true;
    case at::kBFloat16: *out = vigilBfloat16; return true;
    case at::kChar: *out = vigilInt8; return true;
    case at::kByte: *out = vigilUint8; return true;
    case at::kBool: *out = vigilUint8; return true;
    case at::kInt: *out = vigilInt32; return true;
    case at::kLong: *out = vigilInt64; return true;
    default: return false;
  }
}

std::string shapeOf(const at::Tensor& t) {
  std::string text = typeName(t.scalar_type()) + "[";
  for (size_t d = 0; d < t.sizes().size(); ++d) text += (d ? ", " : "") + std::to_string(t.sizes()[d]);
  return text + "]";
}

}  // namespace

std::string typeName(at::ScalarType type) {
  return "torch." + torch::utils::getDtypeNames(type).first;
}

vigilDataType_t reductionType(const OpSite& site, at::ScalarType type) {
  vigilDataType_t vt;
  if (!vigilTypeOf(type, &vt)) {
    raise(site, ids::ApiBadDataType,
          "vigil cannot reduce tensors of dtype " + typeName(type) +
              " (it reduces float32, float64, float16, bfloat16, int8, uint8, int32, int64 and bool)",
          "convert the tensor to a supported dtype before the collective (complex: torch.view_as_real)");
  }
  return vt;
}

vigilRedOp_t reductionOp(const OpSite& site, const c10d::ReduceOp& op, at::ScalarType type) {
  const bool isBool = type == at::kBool;
  const bool isInteger = at::isIntegralType(type, /*includeBool=*/false);
  switch (op.op_) {
    case c10d::ReduceOp::SUM: return isBool ? vigilMax : vigilSum;
    case c10d::ReduceOp::PRODUCT: return isBool ? vigilMin : vigilProd;
    case c10d::ReduceOp::MIN: return vigilMin;
    case c10d::ReduceOp::MAX: return vigilMax;
    case c10d::ReduceOp::AVG:
      if (!isBool) return vigilAvg;
      break;
    case c10d::ReduceOp::BAND:
      if (isBool) return vigilMin;
      if (isInteger) return vigilBand;
      break;
    case c10d::ReduceOp::BOR:
      if (isBool) return vigilMax;
      if (isInteger) return vigilBor;
      break;
    case c10d::ReduceOp::BXOR:
      if (isBool || isInteger) return vigilBxor;  // bool's 0/1 bytes xor to 0/1
      break;
    default: break;
  }
  raise(site, ids::ApiBadRedOp,
        "ReduceOp." + opName(op.op_) + " on dtype " + typeName(type) +
            " has no vigil reduction (vigil has SUM, PRODUCT, MIN, MAX and AVG; BAND, BOR and BXOR on integer and "
            "bool tensors)",
        "use SUM, PRODUCT, MIN, MAX or AVG, or integer or bool tensors for BAND/BOR/BXOR");
}

Elements movedElements(at::ScalarType type, int64_t numel) {
  vigilDataType_t vt;
  if (vigilTypeOf(type, &vt)) return {vt, static_cast<size_t>(numel)};
  return {vigilUint8, static_cast<size_t>(numel) * c10::elementSize(type)};
}

void requireDenseCpu(const OpSite& site, const at::Tensor& t, const std::string& what) {
  std::string why;
  if (!t.defined()) {
    why = "is an undefined tensor";
  } else if (t.layout() != at::kStrided) {
    why = "is a sparse tensor";
  } else if (!t.device().is_cpu()) {
    why = "is on device " + t.device().str();
  }
  if (!why.empty()) {
    raise(site, ids::TorchBadTensor, what + " " + why + "; the vigil backend takes dense CPU tensors",
          "move the tensor to the CPU (tensor.cpu()) and make it dense (tensor.to_dense())");
  }
}

void requireDenseCpu(const OpSite& site, const std::vector<at::Tensor>& ts, const std::string& what) {
  for (size_t i = 0; i < ts.size(); ++i) requireDenseCpu(site, ts[i], what + "[" + std::to_string(i) + "]");
}

void requireListSize(const OpSite& site, size_t got, size_t want, const std::string& what) {
  if (got == want) return;
  raise(site, ids::TorchBadTensor,
        what + " has " + std::to_string(got) + " tensor(s) where " + std::to_string(want) + " are needed",
        "pass " + std::to_string(want) + " tensor(s) in " + what);
}

void requireSameLayout(const OpSite& site, const at::Tensor& t, const at::Tensor& like, const std::string& what) {
  if (t.scalar_type() == like.scalar_type() && t.numel() == like.numel()) return;
  raise(site, ids::TorchBadTensor,
        what + " is " + shapeOf(t) + " but must hold as many elements of the same dtype as " + shapeOf(like),
        "make every tensor of the call the same dtype and size");
}

void requireSameType(const OpSite& site, const std::vector<at::Tensor>& ts, const std::string& what) {
  for (size_t i = 1; i < ts.size(); ++i) {
    if (ts[i].scalar_type() == ts[0].scalar_type()) continue;
    raise(site, ids::TorchBadTensor,
          what + "[" + std::to_string(i) + "] is " + typeName(ts[i].scalar_type()) + " but " + what + "[0] is " +
              typeName(ts[0].scalar_type()),
          "give every tensor of the call the same dtype");
  }
}

void requireRoot(const OpSite& site, int64_t root) {
  if (root >= 0 && root < site.size) return;
  raise(site, ids::ApiBadRoot, "root " + std::to_string(root) + " is outside [0, " + std::to_string(site.size) + ")",
        "pass a root rank of the group (group ranks, not global ranks)");
}

at::Tensor concatenate(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

void spread(const at::Tensor& flat, int64_t offset, const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    const int64_t n = t.numel();
    t.copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
}

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (a.numel() == 0 || b.numel() == 0) return false;
  if (!a.storage().is_alias_of(b.storage())) return false;
  // The spans of bytes each tensor can touch, from its lowest to its highest element.
  auto span = [](const at::Tensor& t) {
    int64_t lo = t.storage_offset(), hi = t.storage_offset();
    for (int64_t d = 0; d < t.dim(); ++d) {
      const int64_t reach = (t.size(d) - 1) * t.stride(d);
      (reach < 0 ? lo : hi) += reach;
    }
    const int64_t elem = static_cast<int64_t>(t.element_size());
    return std::pair<int64_t, int64_t>(lo * elem, (hi + 1) * elem);
  };
  auto [aLo, aHi] = span(a);
  auto [bLo, bHi] = span(b);
  return aLo < bHi && bLo < aHi;
}

}  // namespace vigil::torchpg
