// allgather, _allgather_base, allgather_coalesced, gather and scatter: one
// piece per rank, laid end to end in rank order in a dense buffer.

#include "process_group_vigil.hpp"
#include "tensor_args.hpp"

namespace vigil::torchpg {
namespace {

std::string item(const char* list, size_t i) {
  return std::string(list) + "[" + std::to_string(i) + "]";
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& /*opts*/) {
  const OpSite where = site("allgather");
  at::Tensor input = singleTensor(where, inputs);
  requireListSize(where, outputs.size(), 1, "output_tensors");
  std::vector<at::Tensor> pieces = outputs[0];
  requireListSize(where, pieces.size(), static_cast<size_t>(size_), "output_tensors[0]");
  requireDenseCpu(where, pieces, "output_tensors[0]");
  for (size_t r = 0; r < pieces.size(); ++r) requireSameLayout(where, pieces[r], input, item("output_tensors[0]", r));
  WorkSpec spec{c10d::OpType::ALLGATHER, "vigil:all_gather", inputs, pieces};
  return launch("allgather", std::move(spec), [this, input, pieces] {
    const at::Tensor dense = input.contiguous();
    const Elements e = movedElements(dense);
    at::Tensor flat = at::empty({static_cast<int64_t>(size_) * dense.numel()}, dense.options());
    check(vigilAllGather(dense.data_ptr(), flat.data_ptr(), e.count, e.type, comm(), nullptr), comm());
    spread(flat, 0, pieces);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& /*opts*/) {
  const OpSite where = site("_allgather_base");
  requireDenseCpu(where, input, "input_tensor");
  requireDenseCpu(where, output, "output_tensor");
  if (output.scalar_type() != input.scalar_type() || output.numel() != size_ * input.numel()) {
    raise(where, ids::TorchBadTensor,
          "output_tensor holds " + std::to_string(output.numel()) + " elements of " + typeName(output.scalar_type()) +
              "; it must hold world_size * " + std::to_string(input.numel()) + " elements of " +
              typeName(input.scalar_type()),
          "make the output world_size times the input, with the same dtype");
  }
  WorkSpec spec{c10d::OpType::_ALLGATHER_BASE, "vigil:all_gather_into_tensor", {input}, {output}};
  return launch("_allgather_base", std::move(spec), [this, output, input] {
    DenseBuffer out(output);
    at::Tensor in = input.contiguous();
    const Elements e = movedElements(in);
    const void* inPlace = static_cast<const uint8_t*>(out.data()) + static_cast<size_t>(rank_) * in.nbytes();
    // vigil reads an overlapping input only in the in-place form.
    if (in.data_ptr() != inPlace && overlaps(in, out.dense())) in = in.clone();
    check(vigilAllGather(in.data_ptr(), out.data(), e.count, e.type, comm(), nullptr), comm());
    out.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputLists,
                                                                      std::vector<at::Tensor>& inputs,
                                                                      const c10d::AllgatherOptions& /*opts*/) {
  const OpSite where = site("allgather_coalesced");
  requireDenseCpu(where, inputs, "input_tensors");
  requireSameType(where, inputs, "input_tensors");
  requireListSize(where, outputLists.size(), static_cast<size_t>(size_), "output_lists");
  std::vector<at::Tensor> pieces;  // rank by rank, each rank's tensors in order
  for (size_t r = 0; r < outputLists.size(); ++r) {
    const std::string list = item("output_lists", r);
    requireListSize(where, outputLists[r].size(), inputs.size(), list);
    requireDenseCpu(where, outputLists[r], list);
    for (size_t i = 0; i < inputs.size(); ++i) {
      requireSameLayout(where, outputLists[r][i], inputs[i], item(list.c_str(), i));
      pieces.push_back(outputLists[r][i]);
    }
  }
  WorkSpec spec{c10d::OpType::ALLGATHER_COALESCED, "vigil:all_gather", inputs, pieces};
  return launch("allgather_coalesced", std::move(spec), [this, inputs, pieces] {
    if (inputs.empty()) return;
    at::Tensor flat = concatenate(inputs);
    const Elements e = movedElements(flat);
    at::Tensor gathered = at::empty({static_cast<int64_t>(size_) * flat.numel()}, flat.options());
    check(vigilAllGather(flat.data_ptr(), gathered.data_ptr(), e.count, e.type, comm(), nullptr), comm());
    spread(gathered, 0, pieces);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const OpSite where = site("gather");
  at::Tensor input = singleTensor(where, inputs);
  requireRoot(where, opts.rootRank);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> pieces;
  if (rank_ == root) {
    requireListSize(where, outputs.size(), 1, "output_tensors (at the root)");
    pieces = outputs[0];
    requireListSize(where, pieces.size(), static_cast<size_t>(size_), "output_tensors[0] (at the root)");
    requireDenseCpu(where, pieces, "output_tensors[0]");
    for (size_t r = 0; r < pieces.size(); ++r) {
      requireSameLayout(where, pieces[r], input, item("output_tensors[0]", r));
    }
  } else {
    requireListSize(where, outputs.size(), 0, "output_tensors (off the root)");
  }
  WorkSpec spec{c10d::OpType::GATHER, "vigil:gather", inputs, pieces};
  return launch("gather", std::move(spec), [this, input, pieces, root] {
    const at::Tensor dense = input.contiguous();
    const Elements e = movedElements(dense);
    at::Tensor flat;
    if (rank_ == root) flat = at::empty({static_cast<int64_t>(size_) * dense.numel()}, dense.options());
    void* recv = flat.defined() ? flat.data_ptr() : nullptr;
    check(vigilGather(dense.data_ptr(), recv, e.count, e.type, root, comm(), nullptr), comm());
    if (rank_ == root) spread(flat, 0, pieces);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const OpSite where = site("scatter");
  at::Tensor output = singleTensor(where, outputs);
  requireRoot(where, opts.rootRank);
  const int root = static_cast<int>(opts.rootRank);
  std::vector<at::Tensor> pieces;
  if (rank_ == root) {
    requireListSize(where, inputs.size(), 1, "input_tensors (at the root)");
    pieces = inputs[0];
    requireListSize(where, pieces.size(), static_cast<size_t>(size_), "input_tensors[0] (at the root)");
    requireDenseCpu(where, pieces, "input_tensors[0]");
    for (size_t r = 0; r < pieces.size(); ++r) {
      requireSameLayout(where, pieces[r], output, item("input_tensors[0]", r));
    }
  } else {
    requireListSize(where, inputs.size(), 0, "input_tensors (off the root)");
  }
  WorkSpec spec{c10d::OpType::SCATTER, "vigil:scatter", pieces, outputs};
  return launch("scatter", std::move(spec), [this, output, pieces, root] {
    at::Tensor flat;
    if (rank_ == root) flat = concatenate(pieces);
    DenseBuffer out(output);
    const Elements e = movedElements(out.dense());
    const void* send = flat.defined() ? flat.data_ptr() : nullptr;
    check(vigilScatter(send, out.data(), e.count, e.type, root, comm(), nullptr), comm());
    out.writeBack();
  });
}

}  // namespace vigil::torchpg
