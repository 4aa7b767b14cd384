// reduce_scatter, _reduce_scatter_base, alltoall_base and alltoall: every
// rank sends a different piece to every rank.

#include <numeric>

#include "process_group_vigil.hpp"
#include "tensor_args.hpp"

namespace vigil::torchpg {
namespace {

// Element counts and displacements of all-to-all-v, in vigil's units.
struct Layout {
  std::vector<size_t> counts;
  std::vector<size_t> displs;
};

Layout layoutOf(const std::vector<int64_t>& elements, size_t unitsPerElement) {
  Layout l;
  size_t offset = 0;
  for (int64_t n : elements) {
    l.counts.push_back(static_cast<size_t>(n) * unitsPerElement);
    l.displs.push_back(offset);
    offset += l.counts.back();
  }
  return l;
}

// Elements per rank of an all_to_all_single side: split sizes count rows
// (dimension 0); no split sizes means equal rows for every rank.
std::vector<int64_t> splitElements(const OpSite& site, const at::Tensor& t, const std::vector<int64_t>& splits,
                                   const char* what) {
  const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
  const int64_t rowElements = rows == 0 ? 0 : t.numel() / rows;
  std::vector<int64_t> elements;
  if (splits.empty()) {
    if (rows % site.size != 0) {
      raise(site, ids::TorchBadTensor,
            std::string(what) + " has " + std::to_string(rows) + " rows, not a multiple of the group size " +
                std::to_string(site.size),
            "pass split sizes, or a tensor whose first dimension divides evenly among the ranks");
    }
    elements.assign(static_cast<size_t>(site.size), rows / site.size * rowElements);
    return elements;
  }
  requireListSize(site, splits.size(), static_cast<size_t>(site.size), std::string(what) + " split sizes");
  int64_t total = 0;
  for (int64_t s : splits) {
    if (s < 0) raise(site, ids::TorchBadTensor, "a split size is negative", "pass sizes >= 0");
    total += s;
    elements.push_back(s * rowElements);
  }
  if (total != rows) {
    raise(site, ids::TorchBadTensor,
          std::string(what) + " split sizes add up to " + std::to_string(total) + " rows, but the tensor has " +
              std::to_string(rows),
          "make the split sizes add up to the first dimension of the tensor");
  }
  return elements;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const OpSite where = site("reduce_scatter");
  at::Tensor output = singleTensor(where, outputs);
  requireListSize(where, inputs.size(), 1, "input_tensors");
  std::vector<at::Tensor> pieces = inputs[0];
  requireListSize(where, pieces.size(), static_cast<size_t>(size_), "input_tensors[0]");
  requireDenseCpu(where, pieces, "input_tensors[0]");
  for (size_t r = 0; r < pieces.size(); ++r) {
    requireSameLayout(where, pieces[r], output, "input_tensors[0][" + std::to_string(r) + "]");
  }
  const vigilDataType_t type = reductionType(where, output.scalar_type());
  const vigilRedOp_t op = reductionOp(where, opts.reduceOp, output.scalar_type());
  WorkSpec spec{c10d::OpType::REDUCE_SCATTER, "vigil:reduce_scatter", pieces, outputs};
  return launch("reduce_scatter", std::move(spec), [this, output, pieces, type, op] {
    const at::Tensor flat = concatenate(pieces);
    DenseBuffer out(output);
    const auto count = static_cast<size_t>(output.numel());
    check(vigilReduceScatter(flat.data_ptr(), out.data(), count, type, op, comm(), nullptr), comm());
    out.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  const OpSite where = site("_reduce_scatter_base");
  requireDenseCpu(where, input, "input_tensor");
  requireDenseCpu(where, output, "output_tensor");
  if (output.scalar_type() != input.scalar_type() || input.numel() != size_ * output.numel()) {
    raise(where, ids::TorchBadTensor,
          "input_tensor holds " + std::to_string(input.numel()) + " elements of " + typeName(input.scalar_type()) +
              "; it must hold world_size * " + std::to_string(output.numel()) + " elements of " +
              typeName(output.scalar_type()),
          "make the input world_size times the output, with the same dtype");
  }
  const vigilDataType_t type = reductionType(where, output.scalar_type());
  const vigilRedOp_t op = reductionOp(where, opts.reduceOp, output.scalar_type());
  WorkSpec spec{c10d::OpType::_REDUCE_SCATTER_BASE, "vigil:reduce_scatter_tensor", {input}, {output}};
  return launch("_reduce_scatter_base", std::move(spec), [this, output, input, type, op] {
    at::Tensor in = input.contiguous();
    DenseBuffer out(output);
    const auto count = static_cast<size_t>(output.numel());
    const void* inPlace =
        static_cast<const uint8_t*>(in.data_ptr()) + static_cast<size_t>(rank_) * out.dense().nbytes();
    if (out.data() != inPlace && overlaps(in, out.dense())) in = in.clone();
    check(vigilReduceScatter(in.data_ptr(), out.data(), count, type, op, comm(), nullptr), comm());
    out.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplitSizes,
                                                                std::vector<int64_t>& inputSplitSizes,
                                                                const c10d::AllToAllOptions& /*opts*/) {
  const OpSite where = site("alltoall_base");
  requireDenseCpu(where, input, "input");
  requireDenseCpu(where, output, "output");
  if (output.scalar_type() != input.scalar_type()) {
    raise(where, ids::TorchBadTensor,
          "output is " + typeName(output.scalar_type()) + " but input is " + typeName(input.scalar_type()),
          "give input and output the same dtype");
  }
  const std::vector<int64_t> sendElements = splitElements(where, input, inputSplitSizes, "input");
  const std::vector<int64_t> recvElements = splitElements(where, output, outputSplitSizes, "output");
  WorkSpec spec{c10d::OpType::ALLTOALL_BASE, "vigil:all_to_all", {input}, {output}};
  return launch("alltoall_base", std::move(spec), [this, output, input, sendElements, recvElements] {
    at::Tensor in = input.contiguous();
    DenseBuffer out(output);
    if (overlaps(in, out.dense())) in = in.clone();  // all-to-all has no in-place form
    // Units per element: 1 in a vigil type, the element size when sent as bytes.
    const size_t units = movedElements(in.scalar_type(), 1).count;
    const vigilDataType_t type = movedElements(in.scalar_type(), 1).type;
    const Layout send = layoutOf(sendElements, units), recv = layoutOf(recvElements, units);
    check(vigilAllToAllV(in.data_ptr(), send.counts.data(), send.displs.data(), out.data(), recv.counts.data(),
                         recv.displs.data(), type, comm(), nullptr),
          comm());
    out.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& /*opts*/) {
  const OpSite where = site("alltoall");
  requireListSize(where, inputs.size(), static_cast<size_t>(size_), "input_tensor_list");
  requireListSize(where, outputs.size(), static_cast<size_t>(size_), "output_tensor_list");
  requireDenseCpu(where, inputs, "input_tensor_list");
  requireDenseCpu(where, outputs, "output_tensor_list");
  std::vector<at::Tensor> all = inputs;
  all.insert(all.end(), outputs.begin(), outputs.end());
  requireSameType(where, all, "tensors (inputs, then outputs)");
  WorkSpec spec{c10d::OpType::ALLTOALL, "vigil:all_to_all", inputs, outputs};
  return launch("alltoall", std::move(spec), [this, outputs, inputs] {
    const at::Tensor in = concatenate(inputs);
    std::vector<int64_t> sendElements, recvElements;
    for (const at::Tensor& t : inputs) sendElements.push_back(t.numel());
    for (const at::Tensor& t : outputs) recvElements.push_back(t.numel());
    const int64_t total = std::accumulate(recvElements.begin(), recvElements.end(), int64_t{0});
    at::Tensor out = at::empty({total}, in.options());
    const size_t units = movedElements(in.scalar_type(), 1).count;
    const vigilDataType_t type = movedElements(in.scalar_type(), 1).type;
    const Layout send = layoutOf(sendElements, units), recv = layoutOf(recvElements, units);
    check(vigilAllToAllV(in.data_ptr(), send.counts.data(), send.displs.data(), out.data_ptr(), recv.counts.data(),
                         recv.displs.data(), type, comm(), nullptr),
          comm());
    spread(out, 0, outputs);
  });
}

}  // namespace vigil::torchpg
