#!/usr/bin/python3
"""A DistributedDataParallel script in the form torchrun runs: env:// init from
RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT, which vigil-run exports too.

    vigil-run -n 2 /usr/bin/python3 examples/ddp/ddp_env.py --backend vigil
    vigil-run -n 2 /usr/bin/python3 examples/ddp/ddp_env.py --backend gloo

Each rank trains on its own data; DDP averages the gradients, so every rank
ends with the same weights. Each rank prints its loss and a checksum of the
weights; exit status 0 when the checksums agree on every rank.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="gloo", help="vigil or gloo")
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.backend == "vigil":
        import vigil.torch  # noqa: F401  registers the backend
    dist.init_process_group(args.backend)  # env://
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    data = torch.Generator().manual_seed(1 + rank)
    for _ in range(args.steps):
        x = torch.randn(32, 16, generator=data)
        y = torch.sin(x[:, :1])
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()  # DDP all-reduces the gradients here
        opt.step()

    checksum = torch.cat([p.detach().flatten() for p in model.parameters()]).double().sum()
    every = [torch.zeros_like(checksum) for _ in range(world)]
    dist.all_gather(every, checksum)
    same = all(torch.equal(c, every[0]) for c in every)
    print(f"rank {rank}/{world} ({args.backend}, RANK={os.environ['RANK']} "
          f"MASTER_ADDR={os.environ['MASTER_ADDR']}): loss {loss.item():.6f} "
          f"weights checksum {checksum.item():.10f}, same on every rank: {same}", flush=True)
    dist.destroy_process_group()
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
