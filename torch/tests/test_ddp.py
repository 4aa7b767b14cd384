"""DistributedDataParallel over the vigil backend trains like one process on
the whole batch: same losses, same parameters (within float tolerance)."""

import copy
import gc

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.testing import assert_close

from dist_harness import run_ranks

SHARD = 4  # samples per rank and step
STEPS = 4


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = torch.nn.Linear(8, 16)
        self.out = torch.nn.Linear(16, 2)
        self.register_buffer("scale", torch.full((1,), 0.5))  # broadcast by DDP before each forward

    def forward(self, x):
        return self.out(torch.relu(self.hidden(x))) * self.scale


def train(rank, world, **ddp_options):
    torch.manual_seed(0)
    model = Net()
    reference = copy.deepcopy(model)
    if rank != 0:
        with torch.no_grad():  # DDP's constructor broadcasts rank 0's parameters and buffers
            for p in model.parameters():
                p.add_(1.0)
    hook = ddp_options.pop("hook", None)
    ddp = DDP(model, **ddp_options)
    if hook is not None:
        ddp.register_comm_hook(None, hook)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1, momentum=0.9)
    data = torch.Generator().manual_seed(1)
    for _ in range(STEPS):
        x = torch.randn(world * SHARD, 8, generator=data)
        y = torch.randn(world * SHARD, 2, generator=data)
        mine = slice(rank * SHARD, (rank + 1) * SHARD)
        optimizer.zero_grad()
        loss = F.mse_loss(ddp(x[mine]), y[mine])
        loss.backward()
        optimizer.step()
        ref_optimizer.zero_grad()
        ref_loss = F.mse_loss(reference(x), y)
        ref_loss.backward()
        ref_optimizer.step()
        # Equal shards: the mean of the ranks' losses is the whole batch's loss.
        mean_loss = loss.detach().clone()
        dist.all_reduce(mean_loss, dist.ReduceOp.AVG)
        assert_close(mean_loss, ref_loss.detach(), rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_close(p, q, rtol=1e-5, atol=1e-6)


class SparseNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(20, 4, sparse=True)  # sparse gradients: a sparse allreduce
        self.out = torch.nn.Linear(4, 1)

    def forward(self, ids):
        return self.out(self.embedding(ids).sum(1))


def train_sparse(rank, world):
    torch.manual_seed(0)
    model = SparseNet()
    reference = copy.deepcopy(model)
    ddp = DDP(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(2)
    for _ in range(STEPS):
        ids = torch.randint(0, 20, (world * SHARD, 3), generator=data)
        y = torch.randn(world * SHARD, 1, generator=data)
        mine = slice(rank * SHARD, (rank + 1) * SHARD)
        optimizer.zero_grad()
        F.mse_loss(ddp(ids[mine]), y[mine]).backward()
        assert model.embedding.weight.grad.is_sparse
        optimizer.step()
        ref_optimizer.zero_grad()
        F.mse_loss(reference(ids), y).backward()
        ref_optimizer.step()
    for p, q in zip(model.parameters(), reference.parameters()):
        assert_close(p, q, rtol=1e-5, atol=1e-6)


def reducer_outlives_group(rank, world):
    group = dist.new_group()
    model = DDP(Net(), process_group=group)
    model(torch.randn(2, 8)).sum().backward()
    dist.destroy_process_group(group)  # torch forgets the group; the DDP reducer still holds it
    del model  # the group goes with the reducer, under the GIL: its workers must still finish
    gc.collect()


def ddp_variants(rank, world):
    train(rank, world)
    # Many buckets, and gradients that are views into them.
    train(rank, world, bucket_cap_mb=0.0001, gradient_as_bucket_view=True)
    # A comm hook: allreduce through the Work's future, then divide.
    train(rank, world, hook=default_hooks.allreduce_hook)
    train_sparse(rank, world)
    reducer_outlives_group(rank, world)


@pytest.mark.parametrize("world_size", [2, 3])
def test_ddp_matches_single_process(world_size):
    run_ranks(ddp_variants, world_size)
