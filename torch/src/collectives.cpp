// broadcast, allreduce, allreduce_coalesced, reduce and barrier: the
// operations that work in place on the caller's tensors.

#include <chrono>
#include <numeric>
#include <string>
#include <vector>

#include "process_group_vigil.hpp"
#include "tensor_args.hpp"

namespace vigil::torchpg {

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const OpSite where = site("broadcast");
  at::Tensor tensor = singleTensor(where, tensors);
  requireRoot(where, opts.rootRank);
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  WorkSpec spec{c10d::OpType::BROADCAST, "vigil:broadcast", tensors, tensors};
  return launch("broadcast", std::move(spec), [this, tensor, root, isRoot] {
    DenseBuffer buffer(tensor);
    const Elements e = movedElements(buffer.dense());
    check(vigilBroadcast(buffer.data(), buffer.data(), e.count, e.type, root, comm(), nullptr), comm());
    if (!isRoot) buffer.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const OpSite where = site("allreduce");
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].is_sparse()) {
    return sparseAllreduce(where, tensors[0], tensors, opts);
  }
  at::Tensor tensor = singleTensor(where, tensors);
  const vigilDataType_t type = reductionType(where, tensor.scalar_type());
  const vigilRedOp_t op = reductionOp(where, opts.reduceOp, tensor.scalar_type());
  WorkSpec spec{c10d::OpType::ALLREDUCE, "vigil:all_reduce", tensors, tensors};
  return launch("allreduce", std::move(spec), [this, tensor, type, op] {
    DenseBuffer buffer(tensor);
    const auto count = static_cast<size_t>(tensor.numel());
    check(vigilAllReduce(buffer.data(), buffer.data(), count, type, op, comm(), nullptr), comm());
    buffer.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  const OpSite where = site("allreduce_coalesced");
  if (tensors.empty()) {
    raise(where, ids::TorchBadTensor, "the tensor list is empty", "pass at least one tensor");
  }
  requireDenseCpu(where, tensors, "tensors");
  requireSameType(where, tensors, "tensors");
  const vigilDataType_t type = reductionType(where, tensors[0].scalar_type());
  const vigilRedOp_t op = reductionOp(where, opts.reduceOp, tensors[0].scalar_type());
  WorkSpec spec{c10d::OpType::ALLREDUCE_COALESCED, "vigil:all_reduce", tensors, tensors};
  return launch("allreduce_coalesced", std::move(spec), [this, tensors, type, op] {
    // One allreduce over the tensors laid end to end; a fresh buffer, so
    // tensors that alias each other still get the sum of their inputs.
    at::Tensor flat = concatenate(tensors);
    const auto count = static_cast<size_t>(flat.numel());
    check(vigilAllReduce(flat.data_ptr(), flat.data_ptr(), count, type, op, comm(), nullptr), comm());
    spread(flat, 0, tensors);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const OpSite where = site("reduce");
  at::Tensor tensor = singleTensor(where, tensors);
  requireRoot(where, opts.rootRank);
  const vigilDataType_t type = reductionType(where, tensor.scalar_type());
  const vigilRedOp_t op = reductionOp(where, opts.reduceOp, tensor.scalar_type());
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = root == rank_;
  WorkSpec spec{c10d::OpType::REDUCE, "vigil:reduce", tensors, tensors};
  return launch("reduce", std::move(spec), [this, tensor, type, op, root, isRoot] {
    DenseBuffer buffer(tensor);
    const auto count = static_cast<size_t>(tensor.numel());
    check(vigilReduce(buffer.data(), isRoot ? buffer.data() : nullptr, count, type, op, root, comm(), nullptr), comm());
    if (isRoot) buffer.writeBack();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::barrier(const c10d::BarrierOptions& /*opts*/) {
  WorkSpec spec{c10d::OpType::BARRIER, "vigil:barrier", {}, {}};
  // Queued behind every collective issued before it, so it also waits for them.
  return launch("barrier", std::move(spec), [this] { check(vigilBarrier(comm(), nullptr), comm()); });
}

// monitored_barrier, as gloo has it: every rank reports to rank 0 through the
// group's store, rank 0 waits for each in turn and then releases them, so rank
// 0 names every rank that did not come (wait_all_ranks) or the first one. It
// runs on the calling thread, like gloo's, beside the group's queued work.
void ProcessGroupVigil::monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) {
  using Clock = std::chrono::steady_clock;
  const OpSite where = site("monitored_barrier");
  const std::chrono::milliseconds timeout = opts.timeout == c10d::kUnsetTimeout ? timeout_ : opts.timeout;
  const std::string ms = std::to_string(timeout.count()) + " ms";
  const std::string prefix = "vigil-monitored-barrier/" + commName_ + "/" + std::to_string(monitoredBarriers_++) + "/";
  const std::string released = prefix + "released";
  if (rank_ != 0) {
    store_->set(prefix + std::to_string(rank_), {1});
    try {
      store_->wait({released}, timeout);
    } catch (const std::exception&) {
      raise(where, ids::OpTimeout,
            "Rank " + std::to_string(rank_) +
                " successfully reached monitoredBarrier, but received errors while waiting for send/recv from rank 0: "
                "rank 0 did not release the barrier within " +
                ms + " (it names the ranks that did not arrive)",
            "see rank 0's error; make every rank of the group call monitored_barrier");
    }
    return;
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  std::vector<int> missing;
  auto ranksText = [](const std::vector<int>& ranks) {
    std::string text;
    for (int r : ranks) text += (text.empty() ? "" : ", ") + std::to_string(r);
    return text;
  };
  for (int r = 1; r < size_; ++r) {
    const std::string key = prefix + std::to_string(r);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    bool arrived = false;
    if (left.count() > 0) {
      try {
        store_->wait({key}, left);
        arrived = true;
      } catch (const std::exception&) {
      }
    } else {
      arrived = store_->check({key});
      if (!arrived && !waitAllRanks) {
        raise(where, ids::OpTimeout,
              "Rank 0 timed out in monitoredBarrier after " + ms + ": rank " + std::to_string(r) +
                  " had not arrived when the time was up",
              "make every rank of the group call monitored_barrier, or give it a longer timeout");
      }
    }
    if (arrived) continue;
    missing.push_back(r);
    if (!waitAllRanks) break;
  }
  if (!missing.empty()) {
    const bool one = missing.size() == 1;
    raise(where, ids::OpTimeout,
          std::string(one ? "Rank " : "Ranks ") + ranksText(missing) + " failed to pass monitoredBarrier in " + ms +
              (waitAllRanks ? "" : " (the first rank found missing; wait_all_ranks=True names all of them)"),
          "find out why rank(s) " + ranksText(missing) +
              " did not reach monitored_barrier: stuck, stopped, or in a different call");
  }
  store_->set(released, {1});
  for (int r = 1; r < size_; ++r) store_->deleteKey(prefix + std::to_string(r));
}

// ---- sparse allreduce -----------------------------------------------------
//
// allreduce of a sparse COO tensor (SUM), as gloo does it: every rank gets
// every rank's indices and values, and the sum is their coalesced union.
// Three vigil calls: the ranks' shapes and entry counts (allgather), then
// indices and values, each an all-to-all where a rank sends its whole block
// to every peer (an allgather of unequal blocks, without padding).
namespace {

// What every rank says about its tensor, so that all of them can check they
// agree before exchanging entries: nnz, dtype, sparse and dense dims, sizes.
constexpr int64_t kMaxDims = 64;
constexpr int64_t kMetaWords = 4 + kMaxDims;

std::vector<int64_t> describe(const at::Tensor& t) {
  std::vector<int64_t> meta(kMetaWords, -1);
  meta[0] = t._nnz();
  meta[1] = static_cast<int64_t>(t.scalar_type());
  meta[2] = t.sparse_dim();
  meta[3] = t.dense_dim();
  for (int64_t d = 0; d < t.dim(); ++d) meta[static_cast<size_t>(4 + d)] = t.size(d);
  return meta;
}

std::string shapeText(const int64_t* meta) {
  std::string text = "sizes [";
  for (int64_t d = 0; d < meta[2] + meta[3]; ++d) text += (d ? ", " : "") + std::to_string(meta[4 + d]);
  return text + "], " + std::to_string(meta[2]) + " sparse dim(s), " + typeName(static_cast<at::ScalarType>(meta[1]));
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::sparseAllreduce(const OpSite& where, const at::Tensor& tensor,
                                                                  std::vector<at::Tensor>& tensors,
                                                                  const c10d::AllreduceOptions& opts) {
  if (!tensor.device().is_cpu() || tensor.layout() != at::kSparse) requireDenseCpu(where, tensor, "tensor");
  if (opts.reduceOp.op_ != c10d::ReduceOp::SUM) {
    raise(where, ids::ApiBadRedOp, "sparse tensors are reduced with SUM only",
          "use ReduceOp.SUM, or make the tensor dense (tensor.to_dense()) for other reductions");
  }
  if (tensor.dim() > kMaxDims) {
    raise(
        where, ids::TorchBadTensor,
        "the sparse tensor has " + std::to_string(tensor.dim()) + " dimensions, more than " + std::to_string(kMaxDims),
        "reshape it to at most " + std::to_string(kMaxDims) + " dimensions");
  }
  WorkSpec spec{c10d::OpType::ALLREDUCE, "vigil:all_reduce", tensors, tensors};
  return launch("allreduce", std::move(spec), [this, where, tensor] {
    const at::Tensor mine = tensor.coalesce();
    const std::vector<int64_t> meta = describe(mine);
    std::vector<int64_t> all(static_cast<size_t>(kMetaWords * size_));
    check(vigilAllGather(meta.data(), all.data(), meta.size(), vigilInt64, comm(), nullptr), comm());
    for (int r = 0; r < size_; ++r) {
      const int64_t* theirs = all.data() + r * kMetaWords;
      if (std::equal(meta.begin() + 1, meta.end(), theirs + 1)) continue;
      raise(where, ids::TorchSparseMismatch,
            "rank " + std::to_string(r) + " passed a sparse tensor with " + shapeText(theirs) + ", this rank " +
                shapeText(meta.data()),
            "pass sparse tensors of one shape, dtype and number of sparse dimensions on every rank");
    }

    // Indices travel as [nnz, sparse dims] so that the ranks' blocks lie end to end.
    const int64_t sparseDims = mine.sparse_dim();
    const at::Tensor indices = mine._indices().t().contiguous();
    const at::Tensor values = mine._values().contiguous();
    const int64_t rowElements = mine._nnz() > 0 ? values.numel() / mine._nnz() : [&] {
      int64_t n = 1;
      for (int64_t d = sparseDims; d < mine.dim(); ++d) n *= mine.size(d);
      return n;
    }();
    std::vector<size_t> rows(static_cast<size_t>(size_)), at(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) rows[static_cast<size_t>(r)] = static_cast<size_t>(all[r * kMetaWords]);
    std::exclusive_scan(rows.begin(), rows.end(), at.begin(), size_t{0});
    const size_t total = at.back() + rows.back();
    if (total == 0) return;  // every rank's tensor is all zeros, and so is the sum

    const Elements valueType = movedElements(values.scalar_type(), 1);  // per element: 1 or its bytes
    auto exchange = [&](const at::Tensor& block, at::Tensor& out, vigilDataType_t type, size_t perRow) {
      std::vector<size_t> sendCounts(rows.size(), static_cast<size_t>(mine._nnz()) * perRow);
      std::vector<size_t> sendAt(rows.size(), 0);  // the whole block to every rank
      std::vector<size_t> recvCounts(rows.size()), recvAt(rows.size());
      for (size_t r = 0; r < rows.size(); ++r) {
        recvCounts[r] = rows[r] * perRow;
        recvAt[r] = at[r] * perRow;
      }
      // A rank without entries sends from a valid address all the same.
      static const int64_t kNothing = 0;
      const void* from = block.numel() > 0 ? block.data_ptr() : &kNothing;
      check(vigilAllToAllV(from, sendCounts.data(), sendAt.data(), out.data_ptr(), recvCounts.data(), recvAt.data(),
                           type, comm(), nullptr),
            comm());
    };
    at::Tensor allIndices = at::empty({static_cast<int64_t>(total), sparseDims}, indices.options());
    exchange(indices, allIndices, vigilInt64, static_cast<size_t>(sparseDims));
    std::vector<int64_t> valueShape = values.sizes().vec();
    valueShape[0] = static_cast<int64_t>(total);
    at::Tensor allValues = at::empty(valueShape, values.options());
    exchange(values, allValues, valueType.type, static_cast<size_t>(rowElements) * valueType.count);

    const at::Tensor sum = at::sparse_coo_tensor(allIndices.t(), allValues, mine.sizes()).coalesce();
    at::Tensor target = tensor;
    target.copy_(sum);
  });
}

}  // namespace vigil::torchpg
