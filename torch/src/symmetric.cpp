// Tensors over the group's symmetric heap (docs/symmetric.md, "torch"): the
// memory of vigilMemAlloc on the group's communicator, as CPU tensors, and
// views of a peer's copy.
//
// Allocation and freeing are collective, so both run on the group's queue,
// in order with its collectives: every rank meets them at the same place.
// Lifetime is as in the numpy binding: a tensor (and every view of it, and
// every peer view) keeps its block, and the block keeps the communicator.
// torch frees a storage when its last reference goes, which differs from
// rank to rank, so a block no tensor uses is freed at the next
// symmetric_empty or symmetric_collect, and only when no rank uses it: those
// first take, over the ranks, whether each block (in allocation order) is
// still used anywhere.

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>

#include "process_group_vigil.hpp"
#include "tensor_args.hpp"

namespace vigil::torchpg {

struct ProcessGroupVigil::SymmetricBlock {
  void* ptr = nullptr;
  size_t bytes = 0;
  std::shared_ptr<vigil::Communicator> comm;  // the heap lives as long as a tensor over it
  std::atomic<bool> used{true};               // a tensor or view over it is alive on this rank
  std::weak_ptr<void> tensors;                // the storages' shared owner, while one lives
};

namespace {

// Owned by every storage over one block: the last one to go marks it unused.
struct BlockUse {
  explicit BlockUse(std::shared_ptr<ProcessGroupVigil::SymmetricBlock> block) : block(std::move(block)) {}
  ~BlockUse() { block->used.store(false, std::memory_order_release); }
  std::shared_ptr<ProcessGroupVigil::SymmetricBlock> block;
};

at::Tensor tensorOver(void* ptr, at::IntArrayRef sizes, at::IntArrayRef strides, at::ScalarType dtype,
                      std::shared_ptr<void> use) {
  return at::from_blob(
      ptr, sizes, strides, [use = std::move(use)](void*) mutable { use.reset(); },
      at::TensorOptions().dtype(dtype).device(at::kCPU));
}

}  // namespace

// On the queue's worker: frees the blocks that no rank uses (one allreduce of a flag per block).
size_t ProcessGroupVigil::collectSymmetric() {
  std::vector<std::shared_ptr<SymmetricBlock>> blocks;
  {
    std::lock_guard lock(symmetricMutex_);
    blocks = symmetricBlocks_;
  }
  if (blocks.empty()) return 0;
  std::vector<uint8_t> used(blocks.size());
  for (size_t i = 0; i < blocks.size(); ++i) used[i] = blocks[i]->used.load(std::memory_order_acquire) ? 1 : 0;
  check(vigilAllReduce(used.data(), used.data(), used.size(), vigilUint8, vigilMax, comm(), nullptr), comm());
  std::vector<std::shared_ptr<SymmetricBlock>> kept;
  size_t freed = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (used[i] != 0) {
      kept.push_back(blocks[i]);
      continue;
    }
    check(vigilMemFree(comm(), blocks[i]->ptr), comm());
    ++freed;
  }
  std::lock_guard lock(symmetricMutex_);
  symmetricBlocks_ = std::move(kept);
  return freed;
}

at::Tensor ProcessGroupVigil::symmetricEmpty(const std::vector<int64_t>& sizes, at::ScalarType dtype) {
  const OpSite where = site("symmetric_empty");
  int64_t count = 1;
  for (const int64_t d : sizes) {
    if (d < 0) raise(where, ids::ApiNullArgument, "the shape has a negative dimension", "pass dimensions >= 0");
    count *= d;
  }
  const size_t bytes = std::max<size_t>(1, static_cast<size_t>(count) * c10::elementSize(dtype));
  auto block = std::make_shared<SymmetricBlock>();
  block->bytes = bytes;
  block->comm = comm_;
  WorkSpec spec{c10d::OpType::UNKNOWN, "vigil:symmetric_empty", {}, {}};
  auto work = launch("symmetric_empty", std::move(spec), [this, block] {
    collectSymmetric();
    check(vigilMemAlloc(comm(), block->bytes, &block->ptr), comm());
    std::lock_guard lock(symmetricMutex_);
    symmetricBlocks_.push_back(block);
  });
  work->wait();  // raises the allocation's error; its completion orders block->ptr before this read
  auto use = std::make_shared<BlockUse>(block);
  {
    std::lock_guard lock(symmetricMutex_);
    block->tensors = use;
  }
  return tensorOver(block->ptr, sizes, c10::contiguous_strides(sizes), dtype, std::move(use));
}

at::Tensor ProcessGroupVigil::symmetricPeerView(const at::Tensor& tensor, int peer) {
  const OpSite where = site("peer_view");
  requireDenseCpu(where, tensor, "tensor");
  if (peer < 0 || peer >= size_) {
    raise(where, ids::ApiBadPeer, "peer " + std::to_string(peer) + " is outside [0, " + std::to_string(size_) + ")",
          "pass a rank of the group (group ranks, not global ranks)");
  }
  const auto* data = static_cast<const uint8_t*>(tensor.data_ptr());
  std::shared_ptr<void> use;
  {
    std::lock_guard lock(symmetricMutex_);
    for (const auto& block : symmetricBlocks_) {
      const auto* base = static_cast<const uint8_t*>(block->ptr);
      if (data >= base && data < base + block->bytes) use = block->tensors.lock();
    }
  }
  if (!use) {
    raise(where, ids::SymBadAddress, "the tensor is not over this group's symmetric heap",
          "make it with vigil.torch.symmetric_empty(shape, dtype, group) (a view of one is fine)");
  }
  void* peerPtr = nullptr;
  check(vigilMemPeerPtr(comm(), tensor.data_ptr(), peer, &peerPtr), comm());
  return tensorOver(peerPtr, tensor.sizes(), tensor.strides(), tensor.scalar_type(), std::move(use));
}

int64_t ProcessGroupVigil::symmetricCollect() {
  auto freed = std::make_shared<size_t>(0);
  WorkSpec spec{c10d::OpType::UNKNOWN, "vigil:symmetric_collect", {}, {}};
  launch("symmetric_collect", std::move(spec), [this, freed] { *freed = collectSymmetric(); })->wait();
  return static_cast<int64_t>(*freed);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupVigil::barrierAll() {
  WorkSpec spec{c10d::OpType::BARRIER, "vigil:barrier_all", {}, {}};
  return launch("barrier_all", std::move(spec), [this] { check(vigilBarrierAll(comm(), nullptr), comm()); });
}

size_t ProcessGroupVigil::symmetricBlocksInUse() const {
  std::lock_guard lock(symmetricMutex_);
  return static_cast<size_t>(std::count_if(symmetricBlocks_.begin(), symmetricBlocks_.end(),
                                           [](const auto& block) { return block->used.load(); }));
}

}  // namespace vigil::torchpg
